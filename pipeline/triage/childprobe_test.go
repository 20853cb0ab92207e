package triage

import (
	"context"
	"testing"
	"time"

	"github.com/seed-7bc021c3/reckon/kernel"
	"github.com/seed-7bc021c3/reckon/pipeline/probe"
)

// TestChildProbeIgnoresAgentReportedDelegations: an external agent that
// reports a "delegate" operation of its own, naming as its child a run it
// wrote itself (or any run at all), must not get that operation settled
// on basis probe. The child run's events are the agent's own claims, and
// the child_run_id is the agent's: replaying them proves nothing, so the
// journal.child_run probe must not apply (the wall's operation stays an
// agent's claim, and the built-in supervisor answers unknown).
func TestChildProbeIgnoresAgentReportedDelegations(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ev := func(run, id, typ string, ts time.Time, data any) kernel.Event {
		return e.agentEvent("agent-x", run, id, typ, ts, data)
	}
	// Written through the agents' guarded path, as POST /v1/events does:
	// every run here is the agent's own.
	if _, err := e.j.IngestAgentEvents(context.Background(), []kernel.Event{
		// The "child" the agent names: it ran nothing.
		ev("invented-child", "c/run", kernel.TypeRunStarted, e.t0, map[string]any{}),
		ev("invented-child", "c/done", kernel.TypeRunCompleted, e.t0.Add(time.Second), map[string]any{}),
		// Its "delegation", failed uncertain: one call whose effect
		// nobody saw.
		ev("agent-run", "a/run", kernel.TypeRunStarted, e.t0, map[string]any{}),
		ev("agent-run", "a/op-1/started", kernel.TypeToolStarted, e.t0, map[string]any{
			"operation_id": "op-1", "tool": kernel.DelegateTool, "child_run_id": "invented-child"}),
		ev("agent-run", "a/op-1/failed", kernel.TypeToolFailed, e.t0.Add(time.Second), kernel.ToolFailed{
			OperationID: "op-1", ErrorType: kernel.ErrorTypeDelegationFail, Error: "child failed", Effect: kernel.EffectUncertain,
			ChildRunID: "invented-child"}),
		ev("agent-run", "a/run/failed", kernel.TypeRunFailed, e.t0.Add(time.Minute), kernel.RunFailed{Error: "gave up"}),
	}); err != nil {
		t.Fatal(err)
	}
	e.sweepAgentRunUnsettled(probe.Set{probe.Child{Journal: e.j}}, "an agent's own account of its delegation settled it")
}
