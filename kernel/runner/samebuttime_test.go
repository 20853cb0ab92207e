package runner

import (
	"testing"
	"time"

	"github.com/seed-7bc021c3/reckon/kernel"
)

// TestSameButTimeOfAnAwait: a workflow task run again after a worker died
// records run.awaiting at a later workflow time, so both its ts and its
// until move; that is the same event. Another operation is not.
func TestSameButTimeOfAnAwait(t *testing.T) {
	t.Parallel()
	t0 := time.Date(2026, 12, 6, 5, 0, 0, 0, time.UTC)
	await := func(at time.Time, op string) kernel.Event {
		ev, err := kernel.NewEvent(kernel.SourceKernel, "r1/run/awaiting/"+op, "p", "r1", kernel.TypeRunAwaiting, kernel.ActorKernel, at,
			kernel.RunAwaiting{OperationID: op, Until: at.Add(72 * time.Hour).Format(time.RFC3339Nano)})
		if err != nil {
			t.Fatal(err)
		}
		return ev
	}
	stored := await(t0, "op-1")
	if !sameButTime(stored, await(t0.Add(3*time.Second), "op-1")) {
		t.Error("run.awaiting recorded again 3 s later is not the same event")
	}
	other := await(t0.Add(3*time.Second), "op-1")
	other.Data = []byte(`{"operation_id":"op-2","until":"2026-12-09T05:00:03Z"}`)
	if sameButTime(stored, other) {
		t.Error("run.awaiting of another operation counts as the same event")
	}
}
