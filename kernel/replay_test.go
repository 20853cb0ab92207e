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
		{"no operations", []Event{ev("run.started", `{}`), ev("run.failed", `{"error":"x"}`)}, ChildSummary{0, 0}, EffectNone, nil},
		{"settled by reconciliation", []Event{
			ev("tool.started", `{"operation_id":"op-1","tool":"t"}`),
			ev("tool.failed", `{"operation_id":"op-1","error_type":"x","error":"y","effect":"uncertain"}`),
			ev("operation.reconciled", `{"operation_id":"op-1","effect":"none","basis":"operator","note":""}`),
		}, ChildSummary{1, 0}, EffectOccurred, nil},
		{"open start", []Event{
			ev("tool.started", `{"operation_id":"op-1","tool":"t"}`),
			ev("tool.completed", `{"operation_id":"op-1"}`),
			ev("tool.started", `{"operation_id":"op-2","tool":"t"}`),
		}, ChildSummary{2, 1}, EffectUncertain, []string{"op-2"}},
		{"legacy activity_failed counts as uncertain", []Event{
			ev("tool.started", `{"operation_id":"op-1","tool":"t"}`),
			ev("tool.failed", `{"operation_id":"op-1","error_type":"activity_failed","error":"y"}`),
		}, ChildSummary{1, 1}, EffectUncertain, []string{"op-1"}},
		// Settling in either arrival order, and a settling event of an
		// operation that never started does not make an operation.
		{"settled before started", []Event{
			ev("tool.completed", `{"operation_id":"op-1"}`),
			ev("tool.started", `{"operation_id":"op-1","tool":"t"}`),
			ev("tool.completed", `{"operation_id":"op-9"}`),
		}, ChildSummary{1, 0}, EffectOccurred, nil},
	}
	for _, c := range cases {
		r := Replay(c.evs)
		if got := r.Summary(); got != c.want || got.Effect() != c.effect || !slices.Equal(r.Unsettled, c.unsettled) {
			t.Errorf("%s: got %+v effect %s unsettled %v, want %+v %s %v", c.name, got, got.Effect(), r.Unsettled, c.want, c.effect, c.unsettled)
		}
	}
}
