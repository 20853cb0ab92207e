package runner

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/seed-7bc021c3/reckon/kernel"
)

// Run ids are unique per project only: the same run id in two projects
// runs both to completion, each under event ids of its own project.
func TestSameRunIDInTwoProjects(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOpts{})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	plan := Plan{Steps: []Step{cmd("echo ok > proof.txt")}}
	projects := []string{e.project + "-a", e.project + "-b"}
	for _, p := range projects {
		if _, created, err := e.starter.Start(ctx, StartParams{Project: p, RunID: "shared-1", Plan: plan}); err != nil || !created {
			t.Fatalf("start %s/shared-1: created=%v %v", p, created, err)
		}
	}
	for _, p := range projects {
		pe := *e
		pe.project = p
		if err := pe.wait(ctx, "shared-1"); err != nil {
			t.Fatalf("%s/shared-1 did not complete: %v", p, err)
		}
		evs := pe.events("shared-1")
		wantShape(t, evs, "run.started", "tool.started op-1", "tool.completed op-1", "run.completed")
		for _, ev := range evs {
			if !strings.HasPrefix(ev.EventID, p+"/shared-1/") || ev.Project != p {
				t.Fatalf("%s: event %s of project %s", p, ev.EventID, ev.Project)
			}
		}
	}
}

// A run id that already has events from another writer — the run itself,
// or a child run its plan would start — is refused at start: those events
// would otherwise be read as the kernel's.
func TestClaimedRunIDRefused(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOpts{})
	ctx := context.Background()
	forge := func(runID string) {
		ev, err := kernel.NewEvent("agent-x", runID+"/op-1/failed", e.project, runID, kernel.TypeToolFailed, "agent", time.Now(),
			kernel.ToolFailed{OperationID: "op-1", ErrorType: "validation", Error: "pre-claimed", Effect: kernel.EffectNone})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := e.journal.Ingest(ctx, []kernel.Event{ev}); err != nil {
			t.Fatal(err)
		}
	}
	forge("claimed")
	forge("parent.op-2-r1")
	plan := Plan{Steps: []Step{cmd("true")}}
	delegating := Plan{Steps: []Step{cmd("true"), {Tool: kernel.DelegateTool, OnUncertain: OnUncertainReissue, Plan: &Plan{Steps: []Step{cmd("true")}}}}}
	for _, c := range []struct {
		run  string
		plan Plan
		in   string
	}{{"claimed", plan, `"claimed"`}, {"parent", delegating, `"parent.op-2-r1"`}} {
		_, _, err := e.starter.Start(ctx, StartParams{Project: e.project, RunID: c.run, Plan: c.plan})
		if kernel.ErrorCode(err) != kernel.EConflict || !strings.Contains(err.Error(), `"agent-x"`) || !strings.Contains(err.Error(), c.in) {
			t.Fatalf("start %s: %v, want a conflict naming agent-x and %s", c.run, err, c.in)
		}
	}
	var n int
	if err := e.pool.Pool.QueryRow(ctx, "SELECT count(*) FROM kernel_runs").Scan(&n); err != nil || n != 0 {
		t.Fatalf("kernel_runs rows after refused starts: %d %v", n, err)
	}
	// The same plan under an unclaimed id starts.
	if _, created, err := e.starter.Start(ctx, StartParams{Project: e.project, RunID: "fresh", Plan: plan}); err != nil || !created {
		t.Fatalf("fresh: %v %v", created, err)
	}
	// Ended before the test's data directory is removed.
	defer func() {
		if err := e.wait(ctx, "fresh"); err != nil {
			t.Errorf("run fresh: %v", err)
		}
	}()
	// A run the MCP gateway has claimed, whose events are still in the
	// outbox (none journaled: here, none at all), is the gateway's.
	if _, err := e.pool.Pool.Exec(ctx, `INSERT INTO gateway_runs (project, run_id, source_id, kind) VALUES ($1, 'host-1', 'mcp-gateway', 'client')`, e.project); err != nil {
		t.Fatal(err)
	}
	_, _, err := e.starter.Start(ctx, StartParams{Project: e.project, RunID: "host-1", Plan: plan})
	if kernel.ErrorCode(err) != kernel.EConflict || !strings.Contains(err.Error(), `"mcp-gateway"`) {
		t.Fatalf("start of a gateway run's id: %v, want a conflict naming mcp-gateway", err)
	}
}
