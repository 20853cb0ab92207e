#!/usr/bin/env bash
# Runs the clients' tests against a real `reckon dev`: installs the
# TypeScript client's pinned packages (npm ci), builds bin/reckon and the
# scripted model, starts reckon dev on a free port with a fresh database
# and data dir, runs the TypeScript tests (node:test, on the Node 22 the
# lock file pins) and the Python unittest suite, then stops everything and
# drops the database.
#
#   scripts/test-clients.sh          the suites CI runs
#   scripts/test-clients.sh guard    the retry guard and verdict stream
#                                    suites (they fail, naming the missing
#                                    route, on a server without them)
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
suite=${1:-main}
export GOTOOLCHAIN=${GOTOOLCHAIN:-go1.27.3}

ts=clients/typescript
if [ ! -d $ts/node_modules ] || [ $ts/package-lock.json -nt $ts/node_modules/.package-lock.json ]; then
	echo "test-clients: installing the TypeScript client's pinned packages (npm ci)" >&2
	(cd $ts && npm ci --no-audit --no-fund --loglevel=error) >&2
fi
go build -o bin/reckon ./cmd/reckon
go build -o bin/scripted-model ./internal/fakeopenai/cmd/scripted-model

work=$(mktemp -d)
# The run_command sandbox runs as an unprivileged user that must traverse
# the data dir.
chmod 711 "$work"
db="reckon_clients_$$"
pg_base=${CLIENTS_PG:-postgres://127.0.0.1:5432}
dev_pid="" model_pid=""
cleanup() {
	[ -n "$model_pid" ] && kill "$model_pid" 2>/dev/null || true
	if [ -n "$dev_pid" ]; then
		kill "$dev_pid" 2>/dev/null || true
		wait "$dev_pid" 2>/dev/null || true
	fi
	psql "$pg_base/postgres" -qc "DROP DATABASE IF EXISTS $db WITH (FORCE)" >/dev/null 2>&1 || true
	rm -rf "$work"
}
trap cleanup EXIT

agent_secret=$(head -c 16 /dev/urandom | od -An -tx1 | tr -d ' \n')
operator_secret=$(head -c 16 /dev/urandom | od -An -tx1 | tr -d ' \n')
# A sweep in the middle of a test would add rulings the test did not make.
DATABASE_URL="$pg_base/$db?sslmode=disable" RECKON_DATA_DIR="$work/data" RECKON_HTTP_ADDR=127.0.0.1:0 \
	RECKON_TOKENS="ag1:agent:$agent_secret,op:operator:$operator_secret" RECKON_TRIAGE_SCHEDULE='@every 24h' \
	RECKON_LOG_LEVEL=warn bin/reckon dev >"$work/dev.log" 2>&1 &
dev_pid=$!
url=""
for _ in $(seq 1 600); do
	url=$(grep -o 'API on http://[0-9.:]*' "$work/dev.log" | head -1 | cut -d' ' -f3 || true)
	[ -n "$url" ] && break
	kill -0 "$dev_pid" 2>/dev/null || { echo "test-clients: reckon dev exited:" >&2; cat "$work/dev.log" >&2; exit 1; }
	sleep 0.1
done
[ -n "$url" ] || { echo "test-clients: reckon dev did not start within 60 s:" >&2; cat "$work/dev.log" >&2; exit 1; }

bin/scripted-model >"$work/model.url" 2>"$work/model.log" &
model_pid=$!
for _ in $(seq 1 100); do [ -s "$work/model.url" ] && break; sleep 0.1; done
model_url=$(head -1 "$work/model.url")
[ -n "$model_url" ] || { echo "test-clients: the scripted model did not start:" >&2; cat "$work/model.log" >&2; exit 1; }

export RECKON_URL=$url RECKON_TEST_AGENT_TOKEN=$agent_secret RECKON_TEST_OPERATOR_TOKEN=$operator_secret RECKON_TEST_MODEL_URL=$model_url
echo "test-clients: reckon dev on $url, scripted model on $model_url" >&2

status=0
case $suite in
main)
	(cd $ts && npm test) || status=1
	(cd clients/python && python3 -m unittest discover -s tests -t . -v) || status=1
	;;
guard)
	(cd $ts && npm run test-guard) || status=1
	(cd clients/python && python3 -m unittest discover -s guard_tests -t . -v) || status=1
	;;
*)
	echo "test-clients: unknown suite $suite (main or guard)" >&2
	exit 2
	;;
esac
if [ $status -ne 0 ]; then
	echo "test-clients: reckon dev's log (warnings and errors):" >&2
	tail -50 "$work/dev.log" >&2
fi
cd "$root"
exit $status
