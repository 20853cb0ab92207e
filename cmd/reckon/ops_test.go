package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"

	"github.com/seed-7bc021c3/reckon/adapter/auth"
	"github.com/seed-7bc021c3/reckon/adapter/httpapi"
	"github.com/seed-7bc021c3/reckon/internal/app"
	"github.com/seed-7bc021c3/reckon/internal/reckontest"
	"github.com/seed-7bc021c3/reckon/kernel"
	"github.com/seed-7bc021c3/reckon/kernel/operations"
	"github.com/seed-7bc021c3/reckon/kernel/outbox"
	"github.com/seed-7bc021c3/reckon/pipeline/probe"
	"github.com/seed-7bc021c3/reckon/pipeline/triage"
	"github.com/seed-7bc021c3/reckon/tool/mcptool"
)

// TestOpsCLI drives `reckon ops` against the real operations API.
func TestOpsCLI(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := reckontest.Setup(t)
	s, j, now := b.Schema, b.Journal, b.Clock.Now()
	ts := opsAPI(t, b)
	verdict, _ := kernel.NewEvent(kernel.SourceKernel, "run-1/verdict/1", "acme", "run-1", kernel.TypeSupervisorVerdict, kernel.ActorSupervisor, now,
		kernel.Verdict{Kind: kernel.VerdictKindReconciliation, OperationIDs: []string{"op-1"}, Supervisor: "builtin", Lesson: "check the workspace first",
			Causes: []string{}, Remedies: []string{}})
	b.Ingest(verdict)

	ev := func(id, typ, data string) kernel.Event {
		return kernel.Event{SourceID: "agent-x", EventID: id, Project: "acme", RunID: "run-1", Type: typ, TS: now.Add(-time.Hour), Actor: "agent", Data: []byte(data)}
	}
	if _, err := j.Ingest(ctx, []kernel.Event{
		ev("s1", kernel.TypeToolStarted, `{"operation_id":"op-1","tool":"run_command","args":{"command":"echo ok > drill-proof.txt"}}`),
		ev("f1", kernel.TypeToolFailed, `{"operation_id":"op-1","error_type":"activity_failed","error":"worker crashed","effect":"uncertain"}`),
		ev("s2", kernel.TypeToolStarted, `{"operation_id":"op-2","tool":"delegate"}`),
		ev("rf", kernel.TypeRunFailed, `{"error":"worker crashed"}`),
	}); err != nil {
		t.Fatal(err)
	}

	run := func(token string, args ...string) (string, string, error) {
		var out, errb bytes.Buffer
		env := map[string]string{"RECKON_URL": ts.URL, "RECKON_TOKEN": token}
		err := opsMain(ctx, args, &out, &errb, func(k string) string { return env[k] })
		return out.String(), errb.String(), err
	}

	out, _, err := run("reader-secret", "list", "--project", "acme")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"RUN", "op-1", "failed_uncertain", "activity_failed effect=uncertain", "op-2", "crash_window", "child run-1.op-2 (0 ops, 0 unresolved)", "2 unresolved"} {
		if !strings.Contains(out, want) {
			t.Errorf("table lacks %q:\n%s", want, out)
		}
	}
	out, _, err = run("reader-secret", "list", "--project", "acme", "--limit", "1")
	if err != nil || !strings.Contains(out, "--cursor") {
		t.Fatalf("paged table: %v\n%s", err, out)
	}
	out, _, err = run("reader-secret", "list", "--project", "acme", "--limit", "1", "--all", "--json")
	var page struct {
		Operations []operations.Item `json:"operations"`
	}
	if err != nil || json.Unmarshal([]byte(out), &page) != nil || len(page.Operations) != 2 {
		t.Fatalf("--all --json: %v\n%s", err, out)
	}

	// Errors: the API's message, with a hint when the token is missing.
	if _, _, err := run("", "list", "--project", "acme"); err == nil || !strings.Contains(err.Error(), "401") || !strings.Contains(err.Error(), "RECKON_TOKEN") {
		t.Fatalf("no token: %v", err)
	}
	if _, _, err := run("reader-secret", "reconcile", "--project", "acme", "--run", "run-1", "--op", "op-1", "--effect", "occurred", "--note", "x"); err == nil || !strings.Contains(err.Error(), "403") {
		t.Fatalf("reader reconciling: %v", err)
	}
	if _, _, err := run("operator-secret", "reconcile", "--project", "acme", "--run", "run-1", "--op", "op-1", "--effect", "maybe", "--note", "x"); err == nil || !strings.Contains(err.Error(), "400") || !strings.Contains(err.Error(), "effect") {
		t.Fatalf("bad effect: %v", err)
	}
	if _, _, err := run("operator-secret", "reconcile", "--project", "acme", "--run", "run-1"); err == nil || !strings.Contains(err.Error(), "--op") {
		t.Fatalf("missing flags: %v", err)
	}

	guardArgs := []string{"guard", "--project", "acme", "--tool", "run_command", "--args", `{"command": "echo ok > drill-proof.txt"}`}
	out, _, err = run("agent-secret", guardArgs...)
	if err != nil || !strings.HasPrefix(out, "hold: operation op-1 of run run-1 (unsettled") {
		t.Fatalf("guard of an uncertain call's twin: %v\n%s", err, out)
	}

	evidence := filepath.Join(t.TempDir(), "evidence.json")
	if err := os.WriteFile(evidence, []byte(`{"workspace_file":"drill-proof.txt","sha256":"abc"}`), 0o600); err != nil {
		t.Fatal(err)
	}
	args := []string{"reconcile", "--project", "acme", "--run", "run-1", "--op", "op-1", "--effect", "occurred",
		"--note", "drill-proof.txt exists in the workspace", "--evidence", "@" + evidence, "--idempotency-key", "cli-1"}
	out, _, err = run("operator-secret", args...)
	if err != nil || !strings.HasPrefix(out, "recorded kernel:run-1/op-1/reconciled/") || !strings.Contains(out, "effect=occurred basis=operator actor=operator:ann") {
		t.Fatalf("reconcile: %v\n%s", err, out)
	}
	out, _, err = run("operator-secret", args...)
	if err != nil || !strings.HasPrefix(out, "already recorded") {
		t.Fatalf("repeat: %v\n%s", err, out)
	}
	if err := outbox.NewPublisher(s.Pool, j, outbox.Config{}, nil, zerolog.Nop()).Drain(ctx); err != nil {
		t.Fatal(err)
	}
	out, _, err = run("reader-secret", "history", "--project", "acme", "--run", "run-1", "--op", "op-1")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"tool.started", "tool.failed", "operation.reconciled", "operator:ann", "basis=operator", "drill-proof.txt"} {
		if !strings.Contains(out, want) {
			t.Errorf("history lacks %q:\n%s", want, out)
		}
	}
	out, _, err = run("reader-secret", "history", "--project", "acme", "--run", "run-1", "--op", "op-1", "--json")
	if err != nil || !strings.Contains(out, `"events"`) {
		t.Fatalf("history --json: %v\n%s", err, out)
	}
	out, _, err = run("reader-secret", "list", "--project", "acme")
	if err != nil || strings.Contains(out, "op-1") {
		t.Fatalf("listing after reconcile still shows op-1: %v\n%s", err, out)
	}
	out, _, err = run("agent-secret", guardArgs...)
	if err != nil || !strings.Contains(out, "done: operation op-1 of run run-1 (occurred") ||
		!strings.Contains(out, "settled occurred by operator:ann, basis operator: drill-proof.txt exists") {
		t.Fatalf("guard after the ruling: %v\n%s", err, out)
	}
	out, _, err = run("reader-secret", "verdicts", "--project", "acme")
	if err != nil || !strings.Contains(out, "builtin") || !strings.Contains(out, "check the workspace first") || !strings.Contains(out, "1 verdict(s)") {
		t.Fatalf("verdicts: %v\n%s", err, out)
	}
	if _, _, err := run("reader-secret", "frobnicate"); err == nil {
		t.Fatal("unknown subcommand accepted")
	}
}

// TestOpsAttentionCLI drives `reckon ops attention` and `reckon ops
// verdicts` against the real API after a real sweep: what the supervisor
// left unknown is queued, verdicts say ATTENTION until an operator decides,
// then resolved, and --since/--limit reach the API.
func TestOpsAttentionCLI(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := reckontest.Setup(t, reckontest.Config{RealClock: true})
	s, j, svc := b.Schema, b.Journal, b.Ops
	ts := opsAPI(t, b)
	pub := outbox.NewPublisher(s.Pool, j, outbox.Config{}, nil, zerolog.Nop())

	t0 := time.Now().UTC().Add(-time.Hour)
	for _, run := range []string{"run-1", "run-2"} {
		ev := func(id, typ string, data string) kernel.Event {
			return kernel.Event{SourceID: "agent-x", EventID: run + "/" + id, Project: "acme", RunID: run, Type: typ, TS: t0, Actor: "agent", Data: []byte(data)}
		}
		if _, err := j.Ingest(ctx, []kernel.Event{
			ev("rs", kernel.TypeRunStarted, `{}`),
			ev("s1", kernel.TypeToolStarted, `{"operation_id":"op-1","tool":"mcp__create_issue","args":{"title":"disk full"}}`),
			ev("f1", kernel.TypeToolFailed, `{"operation_id":"op-1","error_type":"argument_validation","error":"title too long","effect":"uncertain"}`),
			ev("rf", kernel.TypeRunFailed, `{"error":"gave up"}`),
		}); err != nil {
			t.Fatal(err)
		}
	}
	if rep, err := triage.New(svc, triage.Config{}).Sweep(ctx, triage.SweepParams{}); err != nil || rep.Journaled != 2 {
		t.Fatalf("sweep: %+v %v", rep, err)
	}
	if err := pub.Drain(ctx); err != nil {
		t.Fatal(err)
	}
	run := func(token string, args ...string) (string, error) {
		var out, errb bytes.Buffer
		env := map[string]string{"RECKON_URL": ts.URL, "RECKON_TOKEN": token}
		err := opsMain(ctx, args, &out, &errb, func(k string) string { return env[k] })
		return out.String(), err
	}

	out, err := run("reader-secret", "attention", "--project", "acme")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"RUN", "PROPOSED", "run-1", "run-2", "op-1", "mcp__create_issue", "unknown", "builtin", "2 operation(s) waiting"} {
		if !strings.Contains(out, want) {
			t.Errorf("attention table lacks %q:\n%s", want, out)
		}
	}
	out, err = run("reader-secret", "attention", "--project", "acme", "--limit", "1", "--all", "--json")
	var page operations.AttentionPage
	if err != nil || json.Unmarshal([]byte(out), &page) != nil || len(page.Operations) != 2 || page.Operations[0].VerdictKey == nil {
		t.Fatalf("attention --all --json: %v\n%s", err, out)
	}
	if _, err := run("agent-secret", "attention", "--project", "acme"); err == nil || !strings.Contains(err.Error(), "403") {
		t.Fatalf("agent reading the queue: %v", err)
	}
	out, err = run("reader-secret", "verdicts", "--project", "acme")
	if err != nil || strings.Count(out, "YES") != 2 || !strings.Contains(out, "2 verdict(s), 2 still waiting") || !strings.Contains(out, "evidence") {
		t.Fatalf("verdicts before a decision: %v\n%s", err, out)
	}

	if out, err := run("operator-secret", "reconcile", "--project", "acme", "--run", "run-1", "--op", "op-1", "--effect", "occurred", "--note", "issue #7 exists"); err != nil {
		t.Fatalf("reconcile: %v\n%s", err, out)
	}
	if err := pub.Drain(ctx); err != nil {
		t.Fatal(err)
	}
	out, err = run("reader-secret", "attention", "--project", "acme")
	if err != nil || strings.Contains(out, "run-1") || !strings.Contains(out, "1 operation(s) waiting") {
		t.Fatalf("attention after the decision: %v\n%s", err, out)
	}
	out, err = run("reader-secret", "verdicts", "--project", "acme")
	if err != nil || strings.Count(out, "resolved") != 1 || strings.Count(out, "YES") != 1 || !strings.Contains(out, "1 still waiting") {
		t.Fatalf("verdicts after the decision: %v\n%s", err, out)
	}
	out, err = run("reader-secret", "verdicts", "--project", "acme", "--since", "2h", "--limit", "1")
	if err != nil || !strings.Contains(out, "1 verdict(s)") {
		t.Fatalf("verdicts --since --limit: %v\n%s", err, out)
	}
	out, err = run("reader-secret", "verdicts", "--project", "acme", "--since", time.Now().Add(time.Hour).UTC().Format(time.RFC3339))
	if err != nil || !strings.Contains(out, "0 verdict(s)") {
		t.Fatalf("verdicts --since the future: %v\n%s", err, out)
	}
	if _, err := run("reader-secret", "verdicts", "--project", "acme", "--since", "yesterday"); err == nil || !strings.Contains(err.Error(), "--since") {
		t.Fatalf("bad --since: %v", err)
	}
}

// `reckon triage --api` asks the API for the sweep and prints what it did;
// the flags that tune a sweep run here are refused with it.
func TestTriageCLIThroughTheAPI(t *testing.T) {
	t.Parallel()
	c := triageAPIClient(t, "run_command")
	triageViaAPIPrints(t, c, "wall acme/run-1: journaled (op-1)", "attention acme/run-1/op-1 unknown (inference)", "triage (API): 1 wall(s), 0 settled, 1 for a person")
	c.token = "agent-secret"
	if err := triageViaAPI(context.Background(), c, io.Discard, "acme", "", false); err == nil || !strings.Contains(err.Error(), "403") {
		t.Fatalf("an agent's token: %v", err)
	}
	err := runTriage(context.Background(), []string{"--api", "--project", "acme", "--dry-run"})
	if err == nil || !strings.Contains(err.Error(), "--dry-run: not with --api") {
		t.Fatalf("--dry-run with --api: %v", err)
	}
}

// TestTriageCLIThroughTheAPILeavesUnavailableWalls: an operation whose
// evidence a probe could not reach (here: its MCP server is down) comes
// back as an unavailable wall whose error says why. It is left for a
// later sweep, not failed: `reckon triage --api` prints it and exits 0.
func TestTriageCLIThroughTheAPILeavesUnavailableWalls(t *testing.T) {
	t.Parallel()
	down := probe.MCPClient{Servers: []mcptool.ServerConfig{{Name: "issues", URL: "http://127.0.0.1:1/mcp"}}, Timeout: 2 * time.Second}
	c := triageAPIClient(t, "mcp__create_issue", probe.MCP{Looker: down})
	triageViaAPIPrints(t, c, "wall acme/run-1: unavailable (op-1): ", "server issues", "triage (API): 1 wall(s), 0 settled, 0 for a person")
}

// triageAPIClient journals agent-x's acme/run-1, whose op-1, a call of
// tool, failed uncertain an hour ago in a run that failed, serves the API
// with its sweeps run with probes, and returns an operator's client of it.
func triageAPIClient(t *testing.T, tool string, probes ...probe.Probe) *opsClient {
	t.Helper()
	b := reckontest.Setup(t)
	ts := opsAPI(t, b, probes...)
	r := reckontest.Run{Project: "acme", RunID: "run-1", Source: "agent-x"}
	t0 := b.Clock.Now().Add(-time.Hour)
	b.Ingest(r.RunStarted(t0), r.Started("op-1", tool, t0), r.Failed("op-1", kernel.EffectUncertain, t0), r.RunFailed(t0))
	return apiClient(func(k string) string {
		return map[string]string{"RECKON_URL": ts.URL, "RECKON_TOKEN": "operator-secret"}[k]
	}, time.Minute)
}

// triageViaAPIPrints runs `reckon triage --api --project acme --run run-1`
// with c and fails the test unless it succeeds, printing each of want.
func triageViaAPIPrints(t *testing.T, c *opsClient, want ...string) {
	t.Helper()
	var out bytes.Buffer
	if err := triageViaAPI(context.Background(), c, &out, "acme", "run-1", false); err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
	for _, w := range want {
		if !strings.Contains(out.String(), w) {
			t.Errorf("output lacks %q:\n%s", w, out.String())
		}
	}
}

// opsAPI serves the API over the bundle's journal and operations service
// for the client under test, its sweeps run with probes.
func opsAPI(t *testing.T, b *reckontest.Bundle, probes ...probe.Probe) *httptest.Server {
	t.Helper()
	toks, _ := auth.Parse("ann:operator:operator-secret,rita:reader:reader-secret,bot:agent:agent-secret")
	srv := httpapi.New(httpapi.Config{Tokens: toks, Log: zerolog.Nop(), Registry: prometheus.NewRegistry(),
		Journal: b.Journal, Operations: b.Ops, Verdicts: b.Ops,
		Triage: app.Triager{Sweeper: triage.New(b.Ops, triage.Config{Now: b.Clock.Now, Probes: probes})}})
	ts := httptest.NewServer(srv)
	t.Cleanup(ts.Close)
	return ts
}

// TestOpsListRefusesBadLimit: `reckon ops list --limit -5` (and
// attention) is a mistake in the command line: exit 2 naming --limit,
// before any request, not dropped silently to give the caller the default
// page size instead of an error.
func TestOpsListRefusesBadLimit(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	env := deadAPIEnv(t)
	for _, sub := range []string{"list", "attention"} {
		for _, limit := range []string{"-5", "-1"} {
			var stdout, stderr bytes.Buffer
			code := report(&stderr, "ops", opsMain(ctx, []string{sub, "--project", "p", "--limit", limit}, &stdout, &stderr, env))
			if code != exitUsage || !strings.Contains(stderr.String(), "--limit") {
				t.Errorf("reckon ops %s --limit %s: exit %d (want %d naming --limit), stderr %q", sub, limit, code, exitUsage, stderr.String())
			}
		}
	}
}

// TestOpsTablesQuoteControlCharacters: run ids, operation ids, tools and
// sources are written by agents; in `reckon ops list` and `reckon ops
// history` tables a newline in one must not forge a row and an escape
// sequence must not reach the operator's terminal (the attention and
// verdicts tables already quote them with kernel.Printable).
func TestOpsTablesQuoteControlCharacters(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	const (
		run  = "run-1\nFORGED  op-9  run_command  completed"
		op   = "op-1\x1b[2J"
		tool = "mcp__x\x1b]0;pwned\x07"
	)
	ts := time.Date(2026, 11, 30, 10, 0, 0, 0, time.UTC)
	started, _ := kernel.NewEvent("agent\x1b[31m", "e1", "acme", run, kernel.TypeToolStarted, kernel.ActorAgent, ts,
		kernel.ToolStarted{OperationID: op, Tool: tool})
	mux := http.NewServeMux()
	mux.HandleFunc(httpapi.PathOperations, func(w http.ResponseWriter, r *http.Request) {
		httpapi.WriteJSON(w, http.StatusOK, map[string]any{"operations": []map[string]any{{
			"project": "acme", "run_id": run, "operation_id": op, "tool": tool, "state": "crash_window",
			"started_at": ts, "started_key": map[string]string{"source_id": "agent-x", "event_id": "e1"},
		}}, "next_cursor": nil, "degraded": false})
	})
	mux.HandleFunc(httpapi.PathHistory, func(w http.ResponseWriter, r *http.Request) {
		httpapi.WriteJSON(w, http.StatusOK, map[string]any{"events": []kernel.Event{started}})
	})
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	env := func(k string) string {
		return map[string]string{"RECKON_URL": srv.URL, "RECKON_TOKEN": "reader-secret"}[k]
	}
	for _, args := range [][]string{
		{"list", "--project", "acme"},
		{"history", "--project", "acme", "--run", "run-1", "--op", "op-1"},
	} {
		var stdout, stderr bytes.Buffer
		if err := opsMain(ctx, args, &stdout, &stderr, env); err != nil {
			t.Fatalf("reckon ops %q: %v", args, err)
		}
		out := stdout.String()
		if strings.ContainsAny(out, "\x1b\x07") {
			t.Errorf("reckon ops %s: an escape sequence reached the terminal:\n%q", args[0], out)
		}
		for _, line := range strings.Split(out, "\n") {
			if strings.HasPrefix(line, "FORGED") {
				t.Errorf("reckon ops %s: a run id's newline forged a row:\n%s", args[0], out)
			}
		}
	}
}
