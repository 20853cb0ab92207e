package triage

import (
	"context"
	"net/http/httptest"
	"path/filepath"
	"testing"
	"time"

	"github.com/seed-7bc021c3/reckon/kernel"
	"github.com/seed-7bc021c3/reckon/kernel/mcpserver"
	"github.com/seed-7bc021c3/reckon/kernel/mcptool"
	"github.com/seed-7bc021c3/reckon/kernel/operations"
	"github.com/seed-7bc021c3/reckon/pipeline/probe"
)

// TestMCPProbeSkipsAServerConfiguredElsewhere, end to end: a gateway call
// whose tool.started records server "issues" at the production store's
// endpoint is not settled none by the sweep's "issues", a staging store
// that has never seen the key; the same call recorded at the staging
// store's own endpoint is, as before.
func TestMCPProbeSkipsAServerConfiguredElsewhere(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	store, err := mcpserver.OpenStore(filepath.Join(t.TempDir(), "issues.json"))
	if err != nil {
		t.Fatal(err)
	}
	staging := httptest.NewServer(mcpserver.Handler(mcpserver.NewServer(store)))
	defer staging.Close()
	stagingCfg := mcptool.ServerConfig{Name: "issues", URL: staging.URL + mcpserver.HTTPPath}
	production := mcptool.ServerConfig{Name: "issues", URL: "http://issues.prod.example:9000/mcp"}
	for run, endpoint := range map[string]string{"gw-elsewhere": production.Endpoint(), "gw-here": stagingCfg.Endpoint()} {
		if _, err := e.s.Pool.Exec(context.Background(),
			`INSERT INTO gateway_runs (project, run_id, source_id, kind) VALUES ('acme', $1, 'mcp-gateway', 'client')`, run); err != nil {
			t.Fatal(err)
		}
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
