package kernel

import (
	"encoding/json"
	"slices"
	"testing"
)

func TestReplayCountsSettledOperations(t *testing.T) {
	t.Parallel()
	// The operation id is read from the data, as in the journal.
	ev := func(typ, data string) Event {
		return Event{Type: typ, Data: json.RawMessage(data)}
	}
	cases := []struct {
		name      string
		evs       []Event
		want      ChildSummary
		effect    string
		unsettled []string
	}{
		{"no operations", []Event{ev("run.started", `{}`), ev("run.failed", `{"error":"x"}`)}, ChildSummary{}, EffectNone, nil},
		{"settled by reconciliation", []Event{
			ev("tool.started", `{"operation_id":"op-1","tool":"t"}`),
			ev("tool.failed", `{"operation_id":"op-1","error_type":"x","error":"y","effect":"uncertain"}`),
			ev("operation.reconciled", `{"operation_id":"op-1","effect":"none","basis":"operator","note":""}`),
		}, ChildSummary{Total: 1, None: 1}, EffectNone, nil},
		// Every call refused before it ran: the delegation did nothing
		// (none, so it may be re-issued; not occurred).
		{"every call refused", []Event{
			ev("tool.started", `{"operation_id":"op-1","tool":"t"}`),
			ev("tool.failed", `{"operation_id":"op-1","error_type":"argument_validation","error":"y","effect":"none"}`),
			ev("tool.started", `{"operation_id":"op-2","tool":"t"}`),
			ev("tool.blocked", `{"operation_id":"op-2","reason":"policy"}`),
		}, ChildSummary{Total: 2, None: 2}, EffectNone, nil},
		{"one call landed, one refused", []Event{
			ev("tool.started", `{"operation_id":"op-1","tool":"t"}`),
			ev("tool.completed", `{"operation_id":"op-1"}`),
			ev("tool.started", `{"operation_id":"op-2","tool":"t"}`),
			ev("tool.failed", `{"operation_id":"op-2","error_type":"argument_validation","error":"y","effect":"none"}`),
		}, ChildSummary{Total: 2, None: 1}, EffectOccurred, nil},
		// The last settling event counts: an operator's later ruling.
		{"settled none, then ruled occurred", []Event{
			ev("tool.started", `{"operation_id":"op-1","tool":"t"}`),
			ev("tool.failed", `{"operation_id":"op-1","error_type":"x","error":"y","effect":"none"}`),
			ev("operation.reconciled", `{"operation_id":"op-1","effect":"occurred","basis":"operator","note":""}`),
		}, ChildSummary{Total: 1}, EffectOccurred, nil},
		{"settled unknown", []Event{
			ev("tool.started", `{"operation_id":"op-1","tool":"t"}`),
			ev("operation.reconciled", `{"operation_id":"op-1","effect":"unknown","basis":"operator","note":""}`),
		}, ChildSummary{Total: 1, Unknown: 1}, EffectUncertain, nil},
		{"open start", []Event{
			ev("tool.started", `{"operation_id":"op-1","tool":"t"}`),
			ev("tool.completed", `{"operation_id":"op-1"}`),
			ev("tool.started", `{"operation_id":"op-2","tool":"t"}`),
		}, ChildSummary{Total: 2, Unresolved: 1}, EffectUncertain, []string{"op-2"}},
		{"legacy activity_failed counts as uncertain", []Event{
			ev("tool.started", `{"operation_id":"op-1","tool":"t"}`),
			ev("tool.failed", `{"operation_id":"op-1","error_type":"activity_failed","error":"y"}`),
		}, ChildSummary{Total: 1, Unresolved: 1}, EffectUncertain, []string{"op-1"}},
		// Settling in either arrival order, and a settling event of an
		// operation that never started does not make an operation.
		{"settled before started", []Event{
			ev("tool.completed", `{"operation_id":"op-1"}`),
			ev("tool.started", `{"operation_id":"op-1","tool":"t"}`),
			ev("tool.completed", `{"operation_id":"op-9"}`),
		}, ChildSummary{Total: 1}, EffectOccurred, nil},
	}
	for _, c := range cases {
		r := Replay(c.evs)
		if got := r.Summary(); got != c.want || got.Effect() != c.effect || !slices.Equal(r.Unsettled, c.unsettled) {
			t.Errorf("%s: got %+v effect %s unsettled %v, want %+v %s %v", c.name, got, got.Effect(), r.Unsettled, c.want, c.effect, c.unsettled)
		}
	}
}
