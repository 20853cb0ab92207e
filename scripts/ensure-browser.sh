#!/usr/bin/env bash
# Installs what the operator console's browser tests (make test-browser)
# need: Debian's chromium — the tests drive /usr/bin/chromium, playwright
# never downloads a browser of its own — and the pinned playwright-core of
# testdata/browser (npm ci from its lock file).
set -euo pipefail
cd "$(dirname "$0")/.."
chromium="${RECKON_CHROMIUM:-/usr/bin/chromium}"
if [ ! -x "$chromium" ]; then
  if [ "$chromium" = /usr/bin/chromium ] && [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    echo "installing Debian's chromium (the operator console's browser tests)" >&2
    export DEBIAN_FRONTEND=noninteractive
    (apt-get install -y -qq chromium >/dev/null 2>&1 || { apt-get update -qq && apt-get install -y -qq chromium; }) >&2
  else
    echo "chromium is missing at $chromium: the operator console's browser tests drive Debian's chromium; install it (as root: apt-get install chromium) or point RECKON_CHROMIUM at a Chromium binary" >&2
    exit 1
  fi
fi
if ! command -v npm >/dev/null 2>&1; then
  echo "npm is missing: the browser tests run playwright-core on Node.js (apt-get install nodejs npm)" >&2
  exit 1
fi
if [ ! -d testdata/browser/node_modules ] || [ testdata/browser/package-lock.json -nt testdata/browser/node_modules/.package-lock.json ]; then
  echo "installing the pinned playwright-core for the browser tests" >&2
  (cd testdata/browser && npm ci --no-audit --no-fund --loglevel=error) >&2
fi
