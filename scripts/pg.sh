#!/usr/bin/env bash
# Start or stop a throwaway PostgreSQL server for the tests, on 127.0.0.1 only.
#   usage: scripts/pg.sh start|stop|url      (data in $PGDATA_DIR, default /tmp/sweep-pg)
set -euo pipefail
dir=${PGDATA_DIR:-/tmp/sweep-pg}; port=${SWEEP_PG_PORT:-55432}
bin=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -1 || true)
as_pg() { if [ "$(id -u)" = 0 ]; then runuser -u postgres -- "$@"; else "$@"; fi; }
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
    if ! as_pg "$bin/pg_ctl" -D "$dir" status >/dev/null 2>&1; then
      as_pg "$bin/pg_ctl" -D "$dir" -w -t 60 -l "$dir/server.log" \
        -o "-c listen_addresses=127.0.0.1 -p $port -k $dir" start >/dev/null
    fi
    as_pg "$bin/psql" -h 127.0.0.1 -p "$port" -U sweep -d postgres -tAc \
      "SELECT 1 FROM pg_database WHERE datname='sweep_test'" | grep -q 1 || \
      as_pg "$bin/createdb" -h 127.0.0.1 -p "$port" -U sweep sweep_test
    echo "postgresql+psycopg://sweep@127.0.0.1:$port/sweep_test" ;;
  stop)
    [ -n "$bin" ] && [ -f "$dir/PG_VERSION" ] && as_pg "$bin/pg_ctl" -D "$dir" -m fast stop >/dev/null 2>&1 || true ;;
  url) echo "postgresql+psycopg://sweep@127.0.0.1:$port/sweep_test" ;;
  *) echo "usage: $0 start|stop|url" >&2; exit 2 ;;
esac
