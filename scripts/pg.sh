#!/usr/bin/env bash
# Start or stop a throwaway PostgreSQL server for the tests, on 127.0.0.1 only.
#   usage: scripts/pg.sh start|stop|url
# One server per checkout: data in $PGDATA_DIR (default: .pg/ in this checkout) on a free port chosen at
# first start and kept in $PGDATA_DIR/sweep-port ($SWEEP_PG_PORT forces one), so two checkouts' `make test`
# never share a server and one finishing never stops the other's.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
dir=${PGDATA_DIR:-$here/.pg}
bin=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -1 || true)
as_pg() { if [ "$(id -u)" = 0 ]; then runuser -u postgres -- "$@"; else "$@"; fi; }
free_port() {
  "${PYTHON:-python3}" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}
port() {  # the port this checkout's server uses: forced, remembered, or a fresh free one
  if [ -n "${SWEEP_PG_PORT:-}" ]; then echo "$SWEEP_PG_PORT"
  elif [ -s "$dir/sweep-port" ]; then cat "$dir/sweep-port"
  else free_port; fi
}
url() { echo "postgresql+psycopg://sweep@127.0.0.1:$1/sweep_test"; }
case "${1:-}" in
  start)
    if [ -z "$bin" ]; then
      echo "installing PostgreSQL (Debian package)" >&2
      export DEBIAN_FRONTEND=noninteractive
      apt-get update -qq >/dev/null && apt-get install -y -qq postgresql >/dev/null
      bin=$(ls -d /usr/lib/postgresql/*/bin | sort -V | tail -1)
    fi
    if [ ! -f "$dir/PG_VERSION" ]; then
      mkdir -p "$dir"; [ "$(id -u)" = 0 ] && chown postgres "$dir"
      as_pg "$bin/initdb" -D "$dir" -U sweep --auth=trust >/dev/null
    fi
    p=$(port)
    if ! as_pg "$bin/pg_ctl" -D "$dir" status >/dev/null 2>&1; then
      as_pg "$bin/pg_ctl" -D "$dir" -w -t 60 -l "$dir/server.log" \
        -o "-c listen_addresses=127.0.0.1 -p $p -k $dir" start >/dev/null
    fi
    echo "$p" > "$dir/sweep-port"
    as_pg "$bin/psql" -h 127.0.0.1 -p "$p" -U sweep -d postgres -tAc \
      "SELECT 1 FROM pg_database WHERE datname='sweep_test'" | grep -q 1 || \
      as_pg "$bin/createdb" -h 127.0.0.1 -p "$p" -U sweep sweep_test
    url "$p" ;;
  stop)
    [ -n "$bin" ] && [ -f "$dir/PG_VERSION" ] && as_pg "$bin/pg_ctl" -D "$dir" -m fast stop >/dev/null 2>&1 || true ;;
  url)
    if [ -z "${SWEEP_PG_PORT:-}" ] && [ ! -s "$dir/sweep-port" ]; then
      echo "no PostgreSQL started for this checkout yet (scripts/pg.sh start)" >&2; exit 1
    fi
    url "$(port)" ;;
  *) echo "usage: $0 start|stop|url" >&2; exit 2 ;;
esac
