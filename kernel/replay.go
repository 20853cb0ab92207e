package kernel

// ChildSummary counts a run's operations and those still unsettled: what
// a delegation's child run amounts to. The kernel writes it into a failed
// delegation's tool.failed (child_ops_total, child_ops_unresolved), the
// listing serves it as child_summary, and the supervisor's wall shows it.
type ChildSummary struct {
	Total      int `json:"total"`
	Unresolved int `json:"unresolved"`
}

// Effect is what the counts say of the delegation, once the child run has
// ended: every operation settled → occurred (none when it performed none);
// otherwise uncertain.
func (c ChildSummary) Effect() string {
	switch {
	case c.Total == 0:
		return EffectNone
	case c.Unresolved == 0:
		return EffectOccurred
	}
	return EffectUncertain
}

// RunReplay is what a run's events say about the run and its operations.
type RunReplay struct {
	// Started and Ended say whether run.started and run.completed or
	// run.failed are among the events.
	Started, Ended bool
	// Operations lists the run's operations (those with a tool.started),
	// in the order their first tool.started came.
	Operations []string
	// Unsettled lists, in the same order, the operations no event settles.
	Unsettled []string
}

// Summary counts the replayed operations.
func (r RunReplay) Summary() ChildSummary {
	return ChildSummary{Total: len(r.Operations), Unresolved: len(r.Unsettled)}
}

// Replay reads a run's events (in journal order) with the one settlement
// rule: an operation is one with a tool.started, settled when any of its
// events settles it (Event.Settles), in whatever order they came. The
// kernel's summarize_child_run and the delegation probe replay with it;
// the operations listing counts the same way in SQL
// (operations.childSummarySQL), and a test holds the two together.
func Replay(events []Event) RunReplay {
	var r RunReplay
	settled := map[string]bool{}
	started := map[string]bool{}
	for _, e := range events {
		switch e.Type {
		case TypeRunStarted:
			r.Started = true
		case TypeRunCompleted, TypeRunFailed:
			r.Ended = true
		}
		op := e.OperationID()
		if op == "" {
			continue
		}
		if e.Type == TypeToolStarted && !started[op] {
			started[op] = true
			r.Operations = append(r.Operations, op)
		}
		if e.Settles() {
			settled[op] = true
		}
	}
	for _, op := range r.Operations {
		if !settled[op] {
			r.Unsettled = append(r.Unsettled, op)
		}
	}
	return r
}
