#!/usr/bin/env bash
# Headless Chromium for the live page's browser test (tests/test_live_page.py): Debian's package, installed
# when missing, as scripts/pg.sh installs PostgreSQL. Never fails `make test`: without it that test skips.
set -uo pipefail
command -v chromium >/dev/null 2>&1 && exit 0
if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
  echo "installing chromium (Debian package) for the live page's browser test" >&2
  export DEBIAN_FRONTEND=noninteractive
  { apt-get update -qq && apt-get install -y -qq chromium; } >/dev/null 2>&1 || \
    echo "chromium could not be installed: the live page's browser test will skip" >&2
else
  echo "chromium is missing (apt-get install -y chromium): the live page's browser test will skip" >&2
fi
exit 0
