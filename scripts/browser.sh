#!/usr/bin/env bash
# Headless Chromium for the live page's browser test (tests/ui/test_live_page.py): Debian's package, installed
# when missing, as scripts/pg.sh installs PostgreSQL. It never fails `make test` by itself: without chromium
# that test skips, saying why, except where SWEEP_REQUIRE_CHROMIUM=1 (.ci/run sets it): there it fails.
# A failed install says so and shows apt's last lines, so a skip is never silent.
set -uo pipefail
command -v chromium >/dev/null 2>&1 && exit 0
outcome=skip
[ "${SWEEP_REQUIRE_CHROMIUM:-}" = 1 ] && outcome=fail
if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
  echo "installing chromium (Debian package) for the live page's browser test" >&2
  export DEBIAN_FRONTEND=noninteractive
  log=$(mktemp)
  if ! { apt-get update -qq && apt-get install -y -qq chromium; } >"$log" 2>&1 </dev/null; then
    echo "chromium could not be installed (apt-get, last lines below): the live page's browser test will" \
         "$outcome" >&2
    tail -n 15 "$log" >&2
  fi
  rm -f "$log"
else
  echo "chromium is missing and this is not root with apt-get (install it: apt-get install -y chromium):" \
       "the live page's browser test will $outcome" >&2
fi
exit 0
