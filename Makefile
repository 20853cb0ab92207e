# reckon — see README.md. Everything here uses the approved Go toolchain.
export GOTOOLCHAIN := go1.27.3
# bash with pipefail: a failing `go test` piped through grep must fail the
# target (make bench's filter used to hide a build failure behind grep's 0).
SHELL := /bin/bash
.SHELLFLAGS := -o pipefail -c
DATABASE_URL ?= postgres://127.0.0.1:5432/reckon?sslmode=disable
export DATABASE_URL
GO ?= go
TEST_TIMEOUT ?= 18m

.PHONY: drill-tau2 drill-servers all build db deps browser-deps test test-browser test-clients test-clients-guard check-clients screenshots demo bench bench-scale lint clean soak fuzz conformance image-smoke deploy-check alerts

all: build

# -buildvcs=true: `reckon version` names the commit (a GOFLAGS of the
# machine's may say otherwise).
build:
	$(GO) build -buildvcs=true -o bin/reckon ./cmd/reckon

## image-smoke: builds deploy/Dockerfile with podman (base images from
## Debian's packages where no registry is reachable) and runs the image
## against PostgreSQL: /readyz, a plan, its operation listed and settled
## (deploy/smoke.sh). Not part of test: it builds an image.
image-smoke: db
	deploy/smoke.sh

## deploy-check: systemd-analyze verify on deploy/systemd, docker-compose
## config on deploy/compose.yaml (deploy/check.sh).
deploy-check:
	deploy/check.sh

db:
	@scripts/ensure-postgres.sh

deps:
	@scripts/ensure-deps.sh

browser-deps:
	@scripts/ensure-browser.sh

## test: the whole suite against real PostgreSQL and an embedded real Temporal server.
test: db deps
	$(GO) vet ./...
	$(GO) test -count=1 -timeout $(TEST_TIMEOUT) ./...

## test-clients: the TypeScript and Python clients' tests against a real
## `reckon dev` on a free port with a fresh database (scripts/test-clients.sh):
## installs the TypeScript client's pinned packages (npm ci), the framework
## tests run real OpenAI Agents SDK and Vercel AI SDK agents against the
## scripted model.
test-clients: db
	scripts/test-clients.sh main

## test-clients-guard: the clients' retry guard and verdict stream tests;
## on a server without POST /v1/agent/operations/guard or GET
## /v1/agent/operations/watch they fail, naming the missing route.
test-clients-guard: db
	scripts/test-clients.sh guard

## check-clients: the TypeScript client's types, generated from
## adapter/httpapi/openapi.json by the pinned openapi-typescript, equal the
## committed clients/typescript/src/api.ts (regenerate: cd clients/typescript
## && npm run types).
check-clients:
	@cd clients/typescript && { [ -d node_modules ] && [ ! package-lock.json -nt node_modules/.package-lock.json ] || npm ci --no-audit --no-fund --loglevel=error; } && npm run --silent check-types

## test-browser: the operator console in headless Chromium (Debian's chromium
## driven by playwright-core) against a real dev stack. Its screenshots go to
## SCREENSHOTS (a scratch directory by default, so a test run leaves the tree
## clean); `make screenshots` writes docs/console-*.png for docs/console.md (commit
## them when the page changed).
SCREENSHOTS ?= $(CURDIR)/bin/screenshots
test-browser: db deps browser-deps
	$(GO) vet -tags browser ./internal/app/
	mkdir -p $(SCREENSHOTS)
	RECKON_SCREENSHOTS=$(SCREENSHOTS) $(GO) test -tags browser -count=1 -timeout 10m -run '^TestConsoleInBrowser$$' -v ./internal/app/

screenshots:
	$(MAKE) test-browser SCREENSHOTS=$(CURDIR)/docs

## demo: the main job on embedded defaults.
demo: db deps
	$(GO) run ./cmd/reckon demo

## drill-tau2: the tau2-bench retail suite (docs/evals.md#tau2-retail): the
## reference actions of TAU2_COUNT seeded tasks replayed as runs with faults
## before and after their writes, scored with the built-in supervisor and
## gated by evals/baseline-tau2.json (coverage 90 %, accuracy 100 %, nothing
## unsafe); the scorecard per write tool is bin/drill-tau2/eval/report.md.
## Needs the benchmark's data in TAU2_DATA (never committed).
TAU2_DATA ?= ../shared/data/tau2-retail
TAU2_SEED ?= 48
TAU2_COUNT ?= 48
drill-tau2: db
	@test -f $(TAU2_DATA)/db.json -a -f $(TAU2_DATA)/tasks.json || { echo "drill-tau2: $(TAU2_DATA) holds no db.json and tasks.json: copy data/tau2/domains/retail from github.com/sierra-research/tau2-bench (MIT) there, or set TAU2_DATA (docs/evals.md#tau2-retail)" >&2; exit 2; }
	$(GO) run ./cmd/reckon drill --suite tau2-retail --data $(TAU2_DATA) --seed $(TAU2_SEED) --count $(TAU2_COUNT) --out bin/drill-tau2
	$(GO) run ./cmd/reckon eval --fixtures bin/drill-tau2 --gate evals/baseline-tau2.json --out bin/drill-tau2/eval --quiet

## drill-servers: the real-server suites (docs/evals.md#real-mcp-servers):
## SERVERS_COUNT seeded scenarios each over mcp-sqlite and
## @cyanheads/git-mcp-server from testdata/npm, faults before and after
## their writes, scored with the built-in supervisor and gated by
## evals/baseline-servers.json; scorecards in bin/drill-<suite>/eval/report.md.
SERVERS_SEED ?= 48
SERVERS_COUNT ?= 48
drill-servers: db deps
	$(GO) run ./cmd/reckon drill --suite mcp-sqlite --seed $(SERVERS_SEED) --count $(SERVERS_COUNT) --out bin/drill-sqlite
	$(GO) run ./cmd/reckon eval --fixtures bin/drill-sqlite --gate evals/baseline-servers.json --out bin/drill-sqlite/eval --quiet
	$(GO) run ./cmd/reckon drill --suite git --seed $(SERVERS_SEED) --count $(SERVERS_COUNT) --out bin/drill-git
	$(GO) run ./cmd/reckon eval --fixtures bin/drill-git --gate evals/baseline-servers.json --out bin/drill-git/eval --quiet

## bench: benchmarks, printed as they run and then as ONE table of ratios,
## each reckon figure against a reference measured in the same run (pgbench
## on the journal's table, River working the same jobs as the outbox's
## events, a bare Temporal activity, the outbox alone, the model's
## concurrency limit); the table is also written to bin/bench.json.
## Long; not part of test. RECKON_BENCH_SIZES=100k,1m shortens the listing.
## The ingest rows, the sustained row (against River's steady run) and the
## built-in sweep measure RECKON_BENCH_REPEAT pairs (default 5), each pair
## side by side, and report the pair of median ratio.
## The outbox package runs first, right after the references it is compared
## with, so that the load of a shared machine moves them together.
BENCH_PKGS = ./kernel/outbox/ ./kernel/journal/ ./kernel/operations/ ./pipeline/triage/ ./kernel/runner/ ./adapter/gateway/ ./kernel/manifest/
bench: db deps
	@mkdir -p bin
	scripts/bench-reference.sh | tee bin/bench-ref.txt
	@# River, the queue peer, in its own module (bench/riverref) so that it
	@# stays out of go.mod. Its failure (say, no module proxy) leaves its
	@# rows "not measured" rather than stopping the run. Burn-down only:
	@# the sustained benchmark runs River's steady reference itself, right
	@# after each of its runs.
	{ cd bench/riverref && $(GO) run . -mode burndown || echo "River reference failed: its rows say not measured" >&2; } | tee -a bin/bench-ref.txt
	@# -p 1: one package's benchmarks at a time; go test otherwise runs a
	@# test binary per core at once and the figures measure each other.
	$(GO) test -p 1 -run '^$$' -bench . -benchtime 1x -timeout 60m -v $(BENCH_PKGS) | tee bin/bench-raw.txt | grep -vE '^(=== RUN|--- PASS|PASS|goos|goarch|cpu)'
	@$(GO) run ./scripts/benchtable -ref bin/bench-ref.txt -json bin/bench.json \
		-machine "$$(nproc) cores, $$(free -g | awk '/^Mem/ {print $$2}') GiB, PostgreSQL $$(psql -h 127.0.0.1 -d postgres -tAc 'SHOW server_version' 2>/dev/null || echo '?'), $$(date -u +%F)" < bin/bench-raw.txt

## bench-scale: the partitioned journal against the flat one of the same
## content, at RECKON_BENCH_SCALE_EVENTS (default 20 million) over 1,000
## projects (docs/performance.md#journal-at-scale). Not part of test or
## bench: at its default size it takes hours and tens of GB of disk
## (reckon_bench_scale database; the schemas are dropped at the end).
bench-scale: db
	@mkdir -p bin
	@df -h $(CURDIR) | tail -1
	$(GO) test -tags benchscale -run '^TestBenchScale$$' -count=1 -timeout 0 -v ./internal/benchscale/ | tee bin/bench-scale.txt

## conformance: the official MCP conformance suite's server scenarios against
## `reckon mcp-gateway --http` in front of `reckon mcp-test-server
## --conformance`, once with the upstream over stdio and once over HTTP. The
## suite and Node.js 22 come from testdata/conformance's lock file (npm ci).
## Fails on any scenario not listed, with its reason, in
## testdata/conformance/expected-failures.yml, and on a listed one that
## passes. Results go to bin/conformance/.
conformance: build db
	scripts/conformance.sh bin/reckon bin/conformance

## soak: the fault soak (docs/testing.md): kills dev, worker and triage,
## restarts a private PostgreSQL cluster, proves nothing is lost. Bounded by
## SOAK_ROUNDS (default 30) and SOAK_TIMEOUT (default 20m); exits non-zero
## when anything was lost, duplicated, spuriously conflicting or re-executed.
soak: build
	@scripts/ensure-soak-deps.sh
	bin/reckon soak

## fuzz: every fuzz target of the boundary's decoders, each for FUZZTIME
## (default 60s; .ci/run passes a few seconds). A finding is written under
## the package's testdata/fuzz/ and fails the target: commit it with a fix,
## and it stays a regression test that plain `go test` runs.
FUZZTIME ?= 60s
FUZZ_TARGETS = ./kernel/:FuzzDecodeEvent ./kernel/:FuzzCanonical ./kernel/:FuzzCheckJSON \
	./kernel/:FuzzReconcileBody ./kernel/:FuzzCursor ./kernel/journal/:FuzzEventCursor \
	./kernel/plan/:FuzzDecodePlan ./adapter/auth/:FuzzParseTokens ./kernel/:FuzzPrepareMatchesReference
fuzz:
	@set -e; for t in $(FUZZ_TARGETS); do \
		pkg=$${t%%:*}; name=$${t##*:}; \
		echo "fuzz $$name ($$pkg) for $(FUZZTIME)"; \
		$(GO) test -run '^$$' -fuzz "^$$name\$$" -fuzztime $(FUZZTIME) $$pkg; \
	done

## alerts: the Prometheus alerting rules of deploy/prometheus checked and
## unit-tested by promtool (Debian's prometheus package, installed when
## missing and run as root), and every query of the Grafana dashboard
## deploy/grafana/reckon.json parsed by it. That every series they name is
## one reckon exports is TestDeployQueriesNameExportedSeries (make test).
alerts:
	@scripts/ensure-promtool.sh
	promtool check rules deploy/prometheus/reckon-alerts.yml
	cd deploy/prometheus && promtool test rules reckon-alerts_test.yml
	@mkdir -p bin
	$(GO) run ./scripts/dashexpr deploy/grafana/reckon.json > bin/dashboard-rules.yml
	promtool check rules bin/dashboard-rules.yml

lint: check-clients
	@# No lab notebook in tracked files (docs/testing.md).
	@scripts/check-process-words.sh
	$(GO) vet ./...
	$(GO) vet -tags browser ./internal/app/
	@test -z "$$(gofmt -l $$(git ls-files '*.go'))" || { gofmt -l $$(git ls-files '*.go'); exit 1; }
	$(GO) run honnef.co/go/tools/cmd/staticcheck@v0.8.2 ./...
	@# bench/riverref is a module of its own, which ./... skips.
	cd bench/riverref && $(GO) vet ./... && $(GO) run honnef.co/go/tools/cmd/staticcheck@v0.8.2 ./...
	@# Workflow determinism: static check of the run workflow, then replay of
	@# recorded real histories against the current workflow code.
	$(GO) run go.temporal.io/sdk/contrib/tools/workflowcheck@v0.6.0 -config kernel/runner/workflowcheck.config.yaml ./kernel/runner/
	$(GO) test -count=1 -run 'TestReplayRecordedHistories' ./kernel/runner/

clean:
	rm -rf bin .reckon
