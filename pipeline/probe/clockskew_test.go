package probe

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/seed-7bc021c3/reckon/internal/pgtest"
	"github.com/seed-7bc021c3/reckon/kernel"
	"github.com/seed-7bc021c3/reckon/kernel/operations"
	"github.com/seed-7bc021c3/reckon/pipeline"
)

// TestWaitsAreMeasuredOnTheDatabaseClock: the kernel's events carry the
// workflow's clock, here 8 minutes behind the sweeper's, and a call 70
// seconds old by the database's clock (the journal's commit time of its
// tool.started) looks 9 minutes old by the sweeper's. Measured across the
// two, never_seen and a missing file would prove none while the call may
// still arrive, or the command still run. Measured on the database's clock
// they wait, and the proof once it comes records the skew.
func TestWaitsAreMeasuredOnTheDatabaseClock(t *testing.T) {
	t.Parallel()
	db := pgtest.New(t)
	kernelRuns(t, db.Pool, "acme", "run-1")
	root := t.TempDir()
	if err := os.MkdirAll(filepath.Join(root, "acme", "run-1"), 0o755); err != nil {
		t.Fatal(err)
	}
	dbNow := now()
	const skew = 8 * time.Minute
	sweeper := func() time.Time { return dbNow.Add(skew) }
	run := Run{Project: "acme", RunID: "run-1", Ended: true,
		Clock: pipeline.Clock{Read: dbNow, Before: sweeper(), After: sweeper(), Local: sweeper}}
	kernelStarted := kernel.EventKey{SourceID: kernel.SourceKernel, EventID: "run-1/op-1/started"}
	at := func(op pipeline.WallOperation, journaledAgo time.Duration) pipeline.WallOperation {
		op.StartedAt = dbNow.Add(-journaledAgo - skew) // the workflow's clock, behind
		op.JournaledAt = journaled(dbNow.Add(-journaledAgo))
		return op
	}
	mcpOp := pipeline.WallOperation{OperationID: "op-1", Tool: "mcp__create_issue", State: "failed_uncertain", StartedKey: kernelStarted}
	cmdOp := pipeline.WallOperation{OperationID: "op-1", Tool: kernel.ToolRunCommand, State: "failed_uncertain", StartedKey: kernelStarted,
		Args: json.RawMessage(`{"command": "true", "timeout_s": 30}`), Postcondition: pc("absent.txt", "")}
	cmdRun := run
	cmdRun.Started = []StartedOp{{OperationID: "op-1", Tool: kernel.ToolRunCommand}}
	ws := Workspace{Root: root, Owners: operations.Owners{Pool: db.Pool}}
	for _, c := range []struct {
		name  string
		probe Probe
		run   Run
		op    pipeline.WallOperation
		need  time.Duration
	}{
		{"never_seen", MCP{Looker: neverSeen{}, Grace: 5 * time.Minute}, run, mcpOp, 5 * time.Minute},
		{"missing file", ws, cmdRun, cmdOp, 90 * time.Second},
	} {
		young := at(c.op, 70*time.Second)
		ev, _ := c.probe.Probe(context.Background(), c.run, young)
		if want := young.JournaledAt.Add(c.need); ev.Finding != pipeline.FindingInconclusive || ev.RecheckAfter == nil || !ev.RecheckAfter.Equal(want) {
			t.Errorf("%s, 70s old on the database's clock: %s %q recheck %v, want inconclusive until %s", c.name, ev.Finding, ev.Detail, ev.RecheckAfter, want)
		}
		if !ev.ObservedAt.Equal(dbNow) {
			t.Errorf("%s: observed at %s, want the database's clock %s", c.name, ev.ObservedAt, dbNow)
		}
		old := at(c.op, c.need+time.Second)
		ev, _ = c.probe.Probe(context.Background(), c.run, old)
		el := (*pipeline.Elapsed)(nil)
		if ev.Preconditions != nil {
			el = ev.Preconditions.Elapsed
		}
		if ev.Finding != pipeline.FindingNone || el == nil || el.Clock != pipeline.ClockDatabase || el.SkewMS != skew.Milliseconds() || !el.Since.Equal(*old.JournaledAt) {
			t.Errorf("%s, past its wait: %s %q %+v, want none measured on the database's clock with the skew recorded", c.name, ev.Finding, ev.Detail, el)
		}
		if why := pipeline.Unmet(old, ev); why != "" {
			t.Errorf("%s: the proof's preconditions do not hold: %s", c.name, why)
		}
	}
}

// TestFindingNeedsNameEveryProbe holds pipeline's table of what each
// probe's findings rest on to this package's probe names: a probe missing
// from it would be held to the defaults of a probe contract.
func TestFindingNeedsNameEveryProbe(t *testing.T) {
	t.Parallel()
	ours := map[string]bool{MCPName: true, MCPStateName: true, MCPAnnotationsName: true, WorkspaceName: true, DiffName: true, ChildName: true}
	known := map[string]bool{}
	for _, p := range pipeline.KnownProbes() {
		known[p] = true
		if !ours[p] {
			t.Errorf("pipeline's table names probe %q, which this package does not have", p)
		}
	}
	for p := range ours {
		if !known[p] {
			t.Errorf("probe %q is missing from pipeline's table of what findings rest on", p)
		}
	}
}
