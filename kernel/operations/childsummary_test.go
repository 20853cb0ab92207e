package operations_test

import (
	"testing"
	"time"

	"github.com/seed-7bc021c3/reckon/internal/reckontest"
	"github.com/seed-7bc021c3/reckon/kernel"
)

// The listing counts a delegation's child run in SQL (childSummarySQL);
// the kernel's summarize_child_run and the delegation probe count with
// kernel.Replay. Both must say the same of the same events.
func TestChildSummarySQLMatchesReplay(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	parent := reckontest.Run{Project: "acme", RunID: "parent", Source: kernel.SourceKernel}
	children := map[string]func(c reckontest.Run) []kernel.Event{
		"none": func(c reckontest.Run) []kernel.Event {
			return []kernel.Event{c.RunStarted(ago(time.Hour)), c.RunFailed(ago(time.Hour))}
		},
		"mixed": func(c reckontest.Run) []kernel.Event {
			return []kernel.Event{c.RunStarted(ago(time.Hour)),
				c.Started("op-1", "run_command", ago(time.Hour)), c.Completed("op-1", ago(time.Hour)),
				c.Started("op-2", "run_command", ago(time.Hour)), c.Failed("op-2", kernel.EffectUncertain, ago(time.Hour)),
				c.Started("op-3", "run_command", ago(time.Hour)), c.Failed("op-3", kernel.EffectNone, ago(time.Hour)),
				c.Started("op-4", "run_command", ago(time.Hour)), c.Failed("op-4", "", ago(time.Hour)),
				c.Started("op-5", "run_command", ago(time.Hour)), c.Blocked("op-5", ago(time.Hour)),
				c.Started("op-6", "run_command", ago(time.Hour)),
				ruling("acme", c.RunID, "op-6", kernel.EffectUnknown, kernel.EventKey{SourceID: c.Source, EventID: c.RunID + "/op-6/started"}, ago(time.Hour))}
		},
		// A settling event ahead of its tool.started, and one of an
		// operation that never started.
		"out-of-order": func(c reckontest.Run) []kernel.Event {
			return []kernel.Event{c.Completed("op-1", ago(2*time.Hour)), c.Started("op-1", "run_command", ago(time.Hour)),
				c.Completed("op-9", ago(time.Hour)), c.Started("op-2", "run_command", ago(time.Hour))}
		},
	}
	var evs []kernel.Event
	want := map[string]kernel.ChildSummary{}
	evs = append(evs, parent.RunStarted(ago(3*time.Hour)))
	for op, build := range children {
		child := reckontest.Run{Project: "acme", RunID: kernel.ChildRunID("parent", op), Source: kernel.SourceKernel}
		cevs := build(child)
		want[op] = kernel.Replay(cevs).Summary()
		evs = append(evs, parent.Started(op, kernel.DelegateTool, ago(2*time.Hour)))
		evs = append(evs, cevs...)
	}
	evs = append(evs, parent.RunFailed(ago(time.Minute)))
	e.Ingest(evs...)

	items, _ := e.List("acme")
	for op, w := range want {
		it, ok := items["parent/"+op]
		if !ok || it.ChildSummary == nil {
			t.Fatalf("delegation %s: listed %v, child summary %+v", op, ok, it.ChildSummary)
		}
		if *it.ChildSummary != w {
			t.Errorf("child run of %s: SQL counts %+v, kernel.Replay %+v", op, *it.ChildSummary, w)
		}
	}
	// op-3 failed none and op-5 was blocked; op-6 was ruled unknown.
	if w := want["mixed"]; w != (kernel.ChildSummary{Total: 6, Unresolved: 2, None: 2, Unknown: 1}) {
		t.Fatalf("replay of the mixed child: %+v", w)
	}
}

// An agent's delegation is summarized from its own source's events in the
// child run, with reckon's reconciliations: another source's events there
// (journaled before migration 00032 made an agent's child runs its own)
// make up nothing of "N of M unresolved".
func TestChildSummaryCountsTheDelegationsSourceOnly(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	parent := reckontest.Run{Project: "acme", RunID: "r", Source: "agent-a"}
	child := reckontest.Run{Project: "acme", RunID: kernel.ChildRunID("r", "op-1"), Source: "agent-a"}
	forger := reckontest.Run{Project: "acme", RunID: child.RunID, Source: "agent-b"}
	e.Ingest(parent.RunStarted(ago(3*time.Hour)), parent.Started("op-1", kernel.DelegateTool, ago(2*time.Hour)),
		child.RunStarted(ago(time.Hour)),
		child.Started("op-1", "t", ago(time.Hour)), child.Completed("op-1", ago(time.Hour)),
		child.Started("op-2", "t", ago(time.Hour)), child.Failed("op-2", kernel.EffectUncertain, ago(time.Hour)),
		child.Started("op-3", "t", ago(time.Hour)),
		ruling("acme", child.RunID, "op-3", kernel.EffectNone, kernel.EventKey{SourceID: "agent-a", EventID: child.RunID + "/op-3/started"}, ago(time.Hour)),
		// agent-b's: a settling event of agent-a's uncertain op-2, and
		// operations of its own, one unresolved.
		forger.Completed("op-2", ago(time.Minute)),
		forger.Started("op-8", "t", ago(time.Hour)), forger.Started("op-9", "t", ago(time.Hour)), forger.Completed("op-9", ago(time.Hour)),
		parent.RunFailed(ago(time.Minute)))

	items, _ := e.List("acme")
	it, ok := items["r/op-1"]
	if !ok || it.ChildSummary == nil {
		t.Fatalf("delegation r/op-1: listed %v, child summary %+v", ok, it.ChildSummary)
	}
	if want := (kernel.ChildSummary{Total: 3, Unresolved: 1, None: 1}); *it.ChildSummary != want {
		t.Errorf("child summary %+v, want agent-a's own %+v", *it.ChildSummary, want)
	}
}
