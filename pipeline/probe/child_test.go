package probe

import (
	"context"
	"testing"

	"github.com/seed-7bc021c3/reckon/kernel"
	"github.com/seed-7bc021c3/reckon/pipeline"
)

type fakeRuns map[string][]kernel.StoredEvent

func (f fakeRuns) RunEvents(ctx context.Context, project, runID string) ([]kernel.StoredEvent, error) {
	return f[runID], nil
}

func ev(t *testing.T, run, typ string, data any) kernel.StoredEvent {
	t.Helper()
	e, err := kernel.NewEvent("kernel", run+"/"+typ, "acme", run, typ, "kernel", t0, data)
	if err != nil {
		t.Fatal(err)
	}
	return kernel.StoredEvent{Event: e}
}

func TestChildReplay(t *testing.T) {
	t.Parallel()
	started := func(run, op string) kernel.StoredEvent {
		return ev(t, run, kernel.TypeToolStarted, kernel.ToolStarted{OperationID: op, Tool: "run_command"})
	}
	done := func(run, op string) kernel.StoredEvent {
		return ev(t, run, kernel.TypeToolCompleted, kernel.ToolCompleted{OperationID: op})
	}
	runs := fakeRuns{
		"r.op-1": {ev(t, "r.op-1", kernel.TypeRunStarted, kernel.RunStarted{ParentRunID: "r"}), started("r.op-1", "op-1"), done("r.op-1", "op-1"), ev(t, "r.op-1", kernel.TypeRunFailed, kernel.RunFailed{Error: "x"})},
		"r.op-2": {ev(t, "r.op-2", kernel.TypeRunStarted, kernel.RunStarted{}), started("r.op-2", "op-1"), ev(t, "r.op-2", kernel.TypeRunFailed, kernel.RunFailed{Error: "x"})},
		"r.op-3": {ev(t, "r.op-3", kernel.TypeRunStarted, kernel.RunStarted{}), started("r.op-3", "op-1")},
		"r.op-5": {ev(t, "r.op-5", kernel.TypeRunStarted, kernel.RunStarted{}), ev(t, "r.op-5", kernel.TypeRunCompleted, struct{}{})},
		// Every call refused before it ran: the child did nothing.
		"r.op-7": {ev(t, "r.op-7", kernel.TypeRunStarted, kernel.RunStarted{}), started("r.op-7", "op-1"),
			ev(t, "r.op-7", kernel.TypeToolFailed, kernel.ToolFailed{OperationID: "op-1", ErrorType: kernel.ErrorTypeValidation, Error: "bad args", Effect: kernel.EffectNone}),
			ev(t, "r.op-7", kernel.TypeRunFailed, kernel.RunFailed{Error: "x"})},
		// Settled unknown proves neither way.
		"r.op-8": {ev(t, "r.op-8", kernel.TypeRunStarted, kernel.RunStarted{}), started("r.op-8", "op-1"),
			ev(t, "r.op-8", kernel.TypeOperationReconciled, kernel.Reconciliation{OperationID: "op-1", Effect: kernel.EffectUnknown, Basis: "operator", Note: "cannot tell"}),
			ev(t, "r.op-8", kernel.TypeRunFailed, kernel.RunFailed{Error: "x"})},
	}
	p := Child{Journal: runs}
	run := clocked(Run{Project: "acme", RunID: "r"})
	for op, want := range map[string]string{
		"op-1": pipeline.FindingOccurred, "op-2": pipeline.FindingInconclusive, "op-3": pipeline.FindingInconclusive,
		"op-4": pipeline.FindingInconclusive, "op-5": pipeline.FindingNone,
		"op-7": pipeline.FindingNone, "op-8": pipeline.FindingInconclusive,
	} {
		e, ok := p.Probe(context.Background(), run, pipeline.WallOperation{OperationID: op, Tool: "delegate",
			StartedKey: kernel.EventKey{SourceID: kernel.SourceKernel, EventID: "r/" + op + "/started"}})
		if !ok || e.Finding != want {
			t.Errorf("%s: got %s (%s), want %s", op, e.Finding, e.Detail, want)
		}
	}
	// A kernel delegation naming another run than its own child is not
	// replayed as that run.
	if e, ok := p.Probe(context.Background(), run, pipeline.WallOperation{OperationID: "op-9", Tool: "delegate", ChildRunID: "r.op-1",
		StartedKey: kernel.EventKey{SourceID: kernel.SourceKernel, EventID: "acme/r/op-9/started"}}); !ok || e.Finding != pipeline.FindingInconclusive {
		t.Errorf("op-9 naming r.op-1: got %s (%s)", e.Finding, e.Detail)
	}
	// A child run holding another source's events proves nothing.
	foreign := ev(t, "r.op-6", kernel.TypeRunCompleted, struct{}{})
	foreign.SourceID = "agent-x"
	runs["r.op-6"] = []kernel.StoredEvent{ev(t, "r.op-6", kernel.TypeRunStarted, kernel.RunStarted{}), foreign}
	if e, ok := p.Probe(context.Background(), run, pipeline.WallOperation{OperationID: "op-6", Tool: "delegate",
		StartedKey: kernel.EventKey{SourceID: kernel.SourceKernel, EventID: "acme/r/op-6/started"}}); !ok || e.Finding != pipeline.FindingInconclusive {
		t.Errorf("op-6 with a foreign event: got %s (%s)", e.Finding, e.Detail)
	}
}

// An agent's tool.started with the tool "delegate" is its account of a
// call: the child run it names (or the one derived from its run and
// operation) is a run the agent chose, and its replay proves nothing of the
// call. Here the agent points at a run that ended settled and at one that
// ended empty, which the probe would take for occurred and none.
func TestChildIgnoresAgentsDelegations(t *testing.T) {
	t.Parallel()
	started := ev(t, "k", kernel.TypeToolStarted, kernel.ToolStarted{OperationID: "op-1", Tool: "run_command"})
	done := ev(t, "k", kernel.TypeToolCompleted, kernel.ToolCompleted{OperationID: "op-1"})
	runs := fakeRuns{
		"k":      {ev(t, "k", kernel.TypeRunStarted, kernel.RunStarted{}), started, done, ev(t, "k", kernel.TypeRunCompleted, struct{}{})},
		"a.op-2": {ev(t, "a.op-2", kernel.TypeRunStarted, kernel.RunStarted{}), ev(t, "a.op-2", kernel.TypeRunCompleted, struct{}{})},
	}
	p := Child{Journal: runs}
	run := clocked(Run{Project: "acme", RunID: "a"})
	for _, op := range []pipeline.WallOperation{
		{OperationID: "op-1", Tool: "delegate", ChildRunID: "k"},
		{OperationID: "op-2", Tool: "delegate"},
	} {
		op.StartedKey = kernel.EventKey{SourceID: "agent-7", EventID: "a/" + op.OperationID + "/started"}
		op.AgentReported = true
		if e, ok := p.Probe(context.Background(), run, op); ok {
			t.Errorf("%s: the agent's delegation was probed: %s (%s)", op.OperationID, e.Finding, e.Detail)
		}
		op.StartedKey.SourceID, op.AgentReported = kernel.SourceKernel, false
		if _, ok := p.Probe(context.Background(), run, op); !ok {
			t.Errorf("%s: the kernel's delegation was not probed", op.OperationID)
		}
	}
}
