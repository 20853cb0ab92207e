#!/usr/bin/env bash
# The pgbench references `make bench` compares reckon against, measured in
# the same run: the journal's table shape and indexes, INSERT ... ON
# CONFLICT DO NOTHING, without reckon's logic. Besides the human-readable
# lines it prints "ref NAME EVENTS_PER_SECOND" lines for scripts/benchtable.
set -euo pipefail
cd "$(dirname "$0")/../bench"
url="${RECKON_TEST_DATABASE_URL:-postgres://127.0.0.1:5432/reckon_test?sslmode=disable}"
psql -q "$url" -f pgbench_setup.sql >/dev/null 2>&1 || { createdb -h 127.0.0.1 reckon_test 2>/dev/null; psql -q "$url" -f pgbench_setup.sql >/dev/null; }
# name script rows-per-tx clients
while read -r name f rows clients; do
  out=$(pgbench -n -c "$clients" -j 1 -T "${SECONDS_PER_RUN:-8}" -f "pgbench_$f.sql" "$url" 2>&1)
  tps=$(echo "$out" | awk '/^tps/ {print $3; exit}')
  eps=$(awk -v t="$tps" -v r="$rows" 'BEGIN{printf "%.0f", t*r}')
  echo "pgbench reference $f, $clients client(s): $tps tx/s = $eps events/s"
  echo "ref $name $eps"
done <<'LIST'
pgbench_batch1_c1 batch1 1 1
pgbench_batch1_c8 batch1 1 8
pgbench_batch100_c2 batch100 100 2
pgbench_batch500_c1 batch500 500 1
LIST
psql -q "$url" -c "DROP SCHEMA pgbench_ref CASCADE" >/dev/null 2>&1
