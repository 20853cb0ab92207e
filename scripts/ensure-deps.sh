#!/usr/bin/env bash
# Installs what the tests and the demo need beyond Go modules: bubblewrap for
# the run_command sandbox and the pinned npm packages of the MCP interop tests.
set -euo pipefail
cd "$(dirname "$0")/.."
if ! command -v bwrap >/dev/null 2>&1; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    echo "installing bubblewrap (run_command sandbox)" >&2
    (apt-get install -y -qq bubblewrap >/dev/null 2>&1 || { apt-get update -qq && apt-get install -y -qq bubblewrap; }) >&2
  else
    echo "bubblewrap (bwrap) is missing: install it (apt-get install bubblewrap)" >&2
    exit 1
  fi
fi
if [ -f testdata/npm/package-lock.json ]; then
  if ! command -v npm >/dev/null 2>&1; then
    echo "npm is missing: the MCP interop tests need Node.js and npm (apt-get install nodejs npm)" >&2
    exit 1
  fi
  if [ ! -d testdata/npm/node_modules ] || [ testdata/npm/package-lock.json -nt testdata/npm/node_modules/.package-lock.json ]; then
    echo "installing pinned npm packages for the MCP interop tests" >&2
    # mcp-sqlite's sqlite3 module compiles from source with node-gyp when
    # no prebuilt binary can be fetched: JOBS=max spreads it over the cores.
    (cd testdata/npm && JOBS=max npm ci --no-audit --no-fund --loglevel=error) >&2 || {
      echo "npm ci in testdata/npm failed: the sqlite3 module of mcp-sqlite may need to compile (g++, make and python3, and Node.js headers)" >&2
      exit 1
    }
  fi
fi
