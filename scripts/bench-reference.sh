#!/usr/bin/env bash
# The pgbench reference the README compares the journal against: the same
# table shape and indexes, INSERT ... ON CONFLICT DO NOTHING, one client.
set -euo pipefail
cd "$(dirname "$0")/../bench"
url="${RECKON_TEST_DATABASE_URL:-postgres://127.0.0.1:5432/reckon_test?sslmode=disable}"
psql -q "$url" -f pgbench_setup.sql >/dev/null 2>&1 || { createdb -h 127.0.0.1 reckon_test 2>/dev/null; psql -q "$url" -f pgbench_setup.sql >/dev/null; }
for f in batch1 batch500; do
  out=$(pgbench -n -c 1 -T "${SECONDS_PER_RUN:-10}" -f "pgbench_$f.sql" "$url" 2>&1)
  tps=$(echo "$out" | awk '/^tps/ {print $3; exit}')
  rows=$([ "$f" = batch500 ] && echo 500 || echo 1)
  echo "pgbench reference $f: $tps tx/s = $(awk -v t="$tps" -v r="$rows" 'BEGIN{printf "%.0f", t*r}') events/s"
done
psql -q "$url" -c "DROP SCHEMA pgbench_ref CASCADE" >/dev/null
