package operations_test

import (
	"testing"
	"time"

	"github.com/seed-7bc021c3/reckon/kernel"
)

// The listing counts a delegation's child run in SQL (childSummarySQL);
// the kernel's summarize_child_run and the delegation probe count with
// kernel.Replay. Both must say the same of the same events.
func TestChildSummarySQLMatchesReplay(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	ago := func(d time.Duration) time.Time { return t0.Add(-d) }
	parent := evb{"acme", "parent", kernel.SourceKernel}
	children := map[string]func(c evb) []kernel.Event{
		"none": func(c evb) []kernel.Event {
			return []kernel.Event{c.runStarted(ago(time.Hour)), c.runFailed(ago(time.Hour))}
		},
		"mixed": func(c evb) []kernel.Event {
			return []kernel.Event{c.runStarted(ago(time.Hour)),
				c.started("op-1", "run_command", ago(time.Hour)), c.completed("op-1", ago(time.Hour)),
				c.started("op-2", "run_command", ago(time.Hour)), c.failed("op-2", kernel.EffectUncertain, ago(time.Hour)),
				c.started("op-3", "run_command", ago(time.Hour)), c.failed("op-3", kernel.EffectNone, ago(time.Hour)),
				c.started("op-4", "run_command", ago(time.Hour)), c.failed("op-4", "", ago(time.Hour)),
				c.started("op-5", "run_command", ago(time.Hour)), c.blocked("op-5", ago(time.Hour)),
				c.started("op-6", "run_command", ago(time.Hour)),
				reconciledEv("acme", c.run, "op-6", kernel.EffectUnknown, kernel.EventKey{SourceID: c.source, EventID: c.run + "/op-6/started"}, ago(time.Hour))}
		},
		// A settling event ahead of its tool.started, and one of an
		// operation that never started.
		"out-of-order": func(c evb) []kernel.Event {
			return []kernel.Event{c.completed("op-1", ago(2*time.Hour)), c.started("op-1", "run_command", ago(time.Hour)),
				c.completed("op-9", ago(time.Hour)), c.started("op-2", "run_command", ago(time.Hour))}
		},
	}
	var evs []kernel.Event
	want := map[string]kernel.ChildSummary{}
	evs = append(evs, parent.runStarted(ago(3*time.Hour)))
	for op, build := range children {
		child := evb{"acme", kernel.ChildRunID("parent", op), kernel.SourceKernel}
		cevs := build(child)
		want[op] = kernel.Replay(cevs).Summary()
		evs = append(evs, parent.started(op, kernel.DelegateTool, ago(2*time.Hour)))
		evs = append(evs, cevs...)
	}
	evs = append(evs, parent.runFailed(ago(time.Minute)))
	e.ingest(evs...)

	items, _ := e.list("acme")
	for op, w := range want {
		it, ok := items["parent/"+op]
		if !ok || it.ChildSummary == nil {
			t.Fatalf("delegation %s: listed %v, child summary %+v", op, ok, it.ChildSummary)
		}
		if *it.ChildSummary != w {
			t.Errorf("child run of %s: SQL counts %+v, kernel.Replay %+v", op, *it.ChildSummary, w)
		}
	}
	if w := want["mixed"]; w != (kernel.ChildSummary{Total: 6, Unresolved: 2}) {
		t.Fatalf("replay of the mixed child: %+v", w)
	}
}
