package kernel

// ChildSummary counts a run's operations and those still unsettled: what
// a delegation's child run amounts to. The kernel writes it into a failed
// delegation's tool.failed (child_ops_total, child_ops_unresolved), the
// listing serves it as child_summary, and the supervisor's wall shows it.
type ChildSummary struct {
	Total      int `json:"total"`
	Unresolved int `json:"unresolved"`
	// None and Unknown count the settled operations whose last settling
	// event says effect none (a call refused before it ran, a
	// reconciliation) and unknown (a reconciliation that could not
	// tell). Summaries from before they were counted, and the listing's,
	// leave them 0.
	None    int `json:"none,omitempty"`
	Unknown int `json:"unknown,omitempty"`
}

// Effect is what the counts say of the delegation, once the child run has
// ended: every operation settled, with effect none → none (as when it
// performed none); some with an effect → occurred; otherwise (an
// operation unresolved, or settled unknown) uncertain. A child whose
// every call was refused before it ran makes its delegation none, so it
// may be re-issued.
func (c ChildSummary) Effect() string {
	switch {
	case c.Total == 0:
		return EffectNone
	case c.Unresolved > 0 || c.Unknown > 0:
		return EffectUncertain
	case c.None == c.Total:
		return EffectNone
	}
	return EffectOccurred
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
	// Effects maps each settled operation to the effect its last settling
	// event (in the events' order) says: occurred, none or unknown.
	Effects map[string]string
}

// Summary counts the replayed operations.
func (r RunReplay) Summary() ChildSummary {
	c := ChildSummary{Total: len(r.Operations), Unresolved: len(r.Unsettled)}
	for _, op := range r.Operations {
		switch r.Effects[op] {
		case EffectNone:
			c.None++
		case EffectUnknown:
			c.Unknown++
		}
	}
	return c
}

// SettledEffect is the effect a settling event says of its operation:
// occurred for tool.completed, none for tool.blocked, else its data's
// effect (unknown when it says none).
func SettledEffect(e Event) string {
	switch e.Type {
	case TypeToolCompleted:
		return EffectOccurred
	case TypeToolBlocked:
		return EffectNone
	}
	var d struct {
		Effect string `json:"effect"`
	}
	if e.DecodeData(&d) != nil || d.Effect == "" {
		// Settling without saying what happened: nothing proves none.
		return EffectUnknown
	}
	return d.Effect
}

// Replay reads a run's events (in journal order) with the one settlement
// rule: an operation is one with a tool.started, settled when any of its
// events settles it (Event.Settles), in whatever order they came. The
// kernel's summarize_child_run and the delegation probe replay with it;
// the operations listing counts the same way in SQL
// (operations.childSummarySQL), and a test holds the two together.
func Replay(events []Event) RunReplay {
	r := RunReplay{Effects: map[string]string{}}
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
			r.Effects[op] = SettledEffect(e)
		}
	}
	for _, op := range r.Operations {
		if !settled[op] {
			r.Unsettled = append(r.Unsettled, op)
		}
	}
	return r
}
