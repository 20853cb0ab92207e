package triage

import (
	"context"
	"testing"
	"time"

	"github.com/seed-7bc021c3/reckon/internal/mcpserver"
	"github.com/seed-7bc021c3/reckon/internal/mcptest"
	"github.com/seed-7bc021c3/reckon/kernel"
	"github.com/seed-7bc021c3/reckon/kernel/operations"
	"github.com/seed-7bc021c3/reckon/pipeline/probe"
	"github.com/seed-7bc021c3/reckon/tool/mcptool"
)

// TestMCPProbeIgnoresAgentReportedCalls: "never_seen" for the key
// <project>/<run>/<op> proves an MCP call did not land only when the call
// is known to have carried that key — the kernel's calls and the MCP
// gateway's do. An external agent that reports its own MCP call through
// POST /v1/events made that call with its own client, which never sent
// reckon's key: the server has never seen the key whether or not the
// issue was created. Such an operation must not be settled none on basis
// probe (a re-issue would duplicate the effect).
func TestMCPProbeIgnoresAgentReportedCalls(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	store, hs := mcptest.IssueServer(t)
	// The agent's call did land -- without reckon's key.
	if _, _, err := store.CreateIssue("agents-own-request-7", "Disk full on db-3", ""); err != nil {
		t.Fatal(err)
	}

	ev := func(id, typ string, ts time.Time, data any) kernel.Event {
		return e.agentEvent("agent-x", "agent-run", id, typ, ts, data)
	}
	if _, err := e.j.IngestAgentEvents(context.Background(), []kernel.Event{
		ev("a/run", kernel.TypeRunStarted, e.t0, map[string]any{}),
		ev("a/op-1/started", kernel.TypeToolStarted, e.t0, map[string]any{
			"operation_id": "op-1", "tool": "mcp__create_issue", "args": map[string]any{"title": "Disk full on db-3"}}),
		ev("a/run/failed", kernel.TypeRunFailed, e.t0.Add(time.Minute), kernel.RunFailed{Error: "agent crashed"}),
	}); err != nil {
		t.Fatal(err)
	}
	// The same call recorded by the MCP gateway, which sent the key: a
	// gateway run, probed as ever.
	e.gatewayRun("gw-run")
	gw := func(id, typ string, ts time.Time, data any) kernel.Event {
		return e.agentEvent("mcp-gateway", "gw-run", id, typ, ts, data)
	}
	e.ingest(
		gw("gw-run/run", kernel.TypeRunStarted, e.t0, map[string]any{}),
		gw("gw-run/op-1/started", kernel.TypeToolStarted, e.t0, map[string]any{
			"operation_id": "op-1", "tool": "mcp__create_issue", "args": map[string]any{"title": "Disk full on db-3"}}),
		gw("gw-run/run/failed", kernel.TypeRunFailed, e.t0.Add(time.Minute), kernel.RunFailed{Error: "gateway instance died"}),
	)
	owners := operations.Owners{Pool: e.s.Pool}
	mcp := probe.MCP{Looker: probe.MCPClient{Servers: []mcptool.ServerConfig{{Name: "issues", URL: hs.URL + mcpserver.HTTPPath}}, Timeout: 10 * time.Second},
		Owners: owners}
	e.sweepAgentRunUnsettled(probe.Set{mcp}, "an agent's own MCP call settled by the lookup of a key it never sent")

	rep, err := e.sweeper(Config{Probes: probe.Set{mcp}}).Sweep(context.Background(), SweepParams{Project: "acme", RunID: "gw-run"})
	if err != nil || rep.Journaled != 1 {
		t.Fatalf("sweep of the gateway run: %+v %v", rep, err)
	}
	e.drain()
	recs := e.reconciled("gw-run")
	var d kernel.Reconciliation
	if len(recs["op-1"]) != 1 || recs["op-1"][0].DecodeData(&d) != nil || d.Basis != kernel.BasisProbe || d.Effect != kernel.EffectNone {
		t.Fatalf("gateway call: %+v", d)
	}
}

// TestMCPProbeSkipsAServerConfiguredElsewhere, end to end: a gateway call
// whose tool.started records server "issues" at the production store's
// endpoint is not settled none by the sweep's "issues", a staging store
// that has never seen the key; the same call recorded at the staging
// store's own endpoint is, as before.
func TestMCPProbeSkipsAServerConfiguredElsewhere(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	_, staging := mcptest.IssueServer(t)
	stagingCfg := mcptool.ServerConfig{Name: "issues", URL: staging.URL + mcpserver.HTTPPath}
	production := mcptool.ServerConfig{Name: "issues", URL: "http://issues.prod.example:9000/mcp"}
	for run, endpoint := range map[string]string{"gw-elsewhere": production.Endpoint(), "gw-here": stagingCfg.Endpoint()} {
		e.gatewayRun(run)
		gw := func(id, typ string, ts time.Time, data any) kernel.Event {
			return e.agentEvent("mcp-gateway", run, run+"/"+id, typ, ts, data)
		}
		e.ingest(
			gw("run", kernel.TypeRunStarted, e.t0, map[string]any{}),
			gw("op-1/started", kernel.TypeToolStarted, e.t0, map[string]any{
				"operation_id": "op-1", "tool": "mcp__create_issue", "args": map[string]any{"title": "Disk full on db-3"},
				"server": "issues", "upstream_tool": "create_issue", "server_endpoint": endpoint}),
			gw("run/failed", kernel.TypeRunFailed, e.t0.Add(time.Minute), kernel.RunFailed{Error: "gateway instance died"}),
		)
	}
	mcp := probe.MCP{Looker: probe.MCPClient{Servers: []mcptool.ServerConfig{stagingCfg}, Timeout: 10 * time.Second},
		Owners: operations.Owners{Pool: e.s.Pool}}
	for run, want := range map[string]string{"gw-elsewhere": kernel.EffectUnknown, "gw-here": kernel.EffectNone} {
		rep, err := e.sweeper(Config{Probes: probe.Set{mcp}}).Sweep(context.Background(), SweepParams{Project: "acme", RunID: run})
		if err != nil || rep.Journaled != 1 {
			t.Fatalf("sweep of %s: %+v %v", run, rep, err)
		}
		e.drain()
		recs := e.reconciled(run)
		var d kernel.Reconciliation
		if len(recs["op-1"]) != 1 || recs["op-1"][0].DecodeData(&d) != nil {
			t.Fatalf("%s: reconciliations %+v", run, recs)
		}
		if d.Effect != want || (want == kernel.EffectNone) != (d.Basis == kernel.BasisProbe) {
			t.Errorf("%s: effect %s basis %s, want %s; evidence %s", run, d.Effect, d.Basis, want, d.Evidence)
		}
	}
}

// gatewayRun registers run as an MCP gateway's client-named run, as the
// gateway does before its first event.
func (e *env) gatewayRun(run string) {
	e.t.Helper()
	if _, err := e.s.Pool.Exec(context.Background(),
		`INSERT INTO gateway_runs (project, run_id, source_id, kind) VALUES ('acme', $1, 'mcp-gateway', 'client')`, run); err != nil {
		e.t.Fatal(err)
	}
}
