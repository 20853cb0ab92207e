package runner

import (
	"context"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/seed-7bc021c3/reckon/internal/pgtest"
	"github.com/seed-7bc021c3/reckon/kernel"
	"github.com/seed-7bc021c3/reckon/kernel/outbox"
)

// A worker killed after RecordEvent (a local activity) enqueued an event but
// before its workflow task completed runs the task again at a later
// workflow time: the same event comes back with a later ts. It is the same
// event, a no-op; any other difference is still a conflict.
func TestRecordEventRetryAtLaterWorkflowTime(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := pgtest.New(t)
	acts := &Activities{Pool: s.Pool, Log: zerolog.Nop()}
	t0 := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	mk := func(ts time.Time, effect string) kernel.Event {
		t.Helper()
		ev, err := kernel.NewEvent(kernel.SourceKernel, "p/r/op-1/failed", "p", "r", kernel.TypeToolFailed, kernel.ActorKernel, ts,
			kernel.ToolFailed{OperationID: "op-1", ErrorType: "worker_lost", Error: "heartbeat timeout", Effect: effect})
		if err != nil {
			t.Fatal(err)
		}
		return ev
	}
	if err := acts.RecordEvent(ctx, mk(t0, kernel.EffectUncertain)); err != nil {
		t.Fatalf("first record: %v", err)
	}
	if err := acts.RecordEvent(ctx, mk(t0.Add(3*time.Second), kernel.EffectUncertain)); err != nil {
		t.Fatalf("the same event at a later workflow time must be a no-op: %v", err)
	}
	stored, ok, err := outboxStored(ctx, s, "p/r/op-1/failed")
	if err != nil || !ok {
		t.Fatalf("stored event: ok=%v err=%v", ok, err)
	}
	if !stored.TS.Equal(t0) {
		t.Fatalf("stored ts %v, want the first record's %v", stored.TS, t0)
	}
	err = acts.RecordEvent(ctx, mk(t0.Add(5*time.Second), kernel.EffectNone))
	if kernel.ErrorCode(err) != kernel.EConflict {
		t.Fatalf("a different effect under the same key: got %v, want a conflict", err)
	}
}

func outboxStored(ctx context.Context, s *pgtest.Schema, id string) (kernel.Event, bool, error) {
	return outbox.Stored(ctx, s.Pool, kernel.EventKey{SourceID: kernel.SourceKernel, EventID: id})
}
