package triage

import (
	"testing"
	"time"

	"github.com/seed-7bc021c3/reckon/kernel"
)

// The journal's order (seq) is the order publishers delivered events in,
// not the order the workflow ran them: two publishers, or a delivery
// retried after a failure, can journal op-2's tool.started before op-1's.
// The workspace probes read run.Started as execution order — op-1 then
// looked like the run's last operation, was compared with the workspace
// now, and op-2's files were taken for op-1's effect. The kernel dates its
// events with the workflow's clock, which is the execution order.
func TestProbeRunOrdersTheKernelsOperationsByWorkflowTime(t *testing.T) {
	t.Parallel()
	t0 := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	started := func(seq int64, op string, at time.Time, source string) kernel.StoredEvent {
		e, err := kernel.NewEvent(source, "acme/run-1/"+op+"/started", "acme", "run-1", kernel.TypeToolStarted, kernel.ActorKernel, at,
			kernel.ToolStarted{OperationID: op, Tool: kernel.ToolRunCommand})
		if err != nil {
			t.Fatal(err)
		}
		return kernel.StoredEvent{Event: e, Seq: seq}
	}
	rk := runKey{"acme", "run-1"}
	run := probeRun(rk, []kernel.StoredEvent{
		started(1, "op-2", t0.Add(time.Minute), kernel.SourceKernel),
		started(2, "op-1", t0, kernel.SourceKernel),
		started(3, "op-3", t0.Add(2*time.Minute), kernel.SourceKernel),
	})
	var got []string
	for _, s := range run.Started {
		got = append(got, s.OperationID)
	}
	if len(got) != 3 || got[0] != "op-1" || got[1] != "op-2" || got[2] != "op-3" {
		t.Fatalf("run.Started in %v, want op-1, op-2, op-3 (the workflow's order)", got)
	}
	// Another writer's operation carries no kernel time: journal order
	// stands for every operation then.
	run = probeRun(rk, []kernel.StoredEvent{
		started(1, "op-2", t0.Add(time.Minute), kernel.SourceKernel),
		started(2, "op-x", t0, "agent-7"),
		started(3, "op-1", t0, kernel.SourceKernel),
	})
	if run.Started[0].OperationID != "op-2" || run.Started[1].OperationID != "op-x" || run.Started[2].OperationID != "op-1" {
		t.Fatalf("with another writer's operation: %+v, want journal order", run.Started)
	}
}

// A kernel run that waits for a settlement starts nothing until the wait
// ends: for the probes it is over, as an ended run is, while its
// run.awaiting has no run.resumed, in whatever order they were journaled.
// An agent's report of a wait proves nothing of the kind.
func TestProbeRunTakesAWaitingRunAsOver(t *testing.T) {
	t.Parallel()
	t0 := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	ev := func(source, typ, op string, data any) kernel.StoredEvent {
		e, err := kernel.NewEvent(source, "acme/run-1/"+typ+"/"+op, "acme", "run-1", typ, kernel.ActorKernel, t0, data)
		if err != nil {
			t.Fatal(err)
		}
		return kernel.StoredEvent{Event: e}
	}
	awaiting := func(source, op string) kernel.StoredEvent {
		return ev(source, kernel.TypeRunAwaiting, op, kernel.RunAwaiting{OperationID: op})
	}
	resumed := func(op string) kernel.StoredEvent {
		return ev(kernel.SourceKernel, kernel.TypeRunResumed, op, kernel.RunResumed{OperationID: op, Effect: kernel.EffectNone,
			Reconciliation: &kernel.EventKey{SourceID: kernel.SourceKernel, EventID: "x"}})
	}
	rk := runKey{"acme", "run-1"}
	for _, c := range []struct {
		name string
		evs  []kernel.StoredEvent
		want bool
	}{
		{"waiting", []kernel.StoredEvent{awaiting(kernel.SourceKernel, "op-1")}, true},
		{"resumed", []kernel.StoredEvent{awaiting(kernel.SourceKernel, "op-1"), resumed("op-1")}, false},
		{"resumed, journaled first", []kernel.StoredEvent{resumed("op-1"), awaiting(kernel.SourceKernel, "op-1")}, false},
		{"waiting again after a re-issue", []kernel.StoredEvent{awaiting(kernel.SourceKernel, "op-1"), resumed("op-1"), awaiting(kernel.SourceKernel, "op-1-r1")}, true},
		{"an agent's report", []kernel.StoredEvent{awaiting("agent-7", "op-1")}, false},
	} {
		if got := probeRun(rk, c.evs).Ended; got != c.want {
			t.Errorf("%s: Ended = %v, want %v", c.name, got, c.want)
		}
	}
}
