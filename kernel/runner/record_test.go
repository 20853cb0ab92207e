package runner

import (
	"context"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/seed-7bc021c3/reckon/internal/pgtest"
	"github.com/seed-7bc021c3/reckon/kernel"
	"github.com/seed-7bc021c3/reckon/kernel/journal"
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
	mk := func(ts time.Time, effect string) kernel.Event { return lostWorkerFailure(t, ts, effect) }
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

// An event recorded again after its delivered outbox row was pruned (a
// workflow task run again after a day-long outage of every worker) is
// judged against the journal: the same event at a later workflow time is a
// no-op that writes nothing, another payload a conflict; the row does not
// go in again to have its delivery parked as a conflict.
func TestRecordEventAfterItsDeliveredRowWasPruned(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := pgtest.New(t)
	j := journal.New(s.Pool, nil)
	acts := &Activities{Pool: s.Pool, Journal: j, Log: zerolog.Nop()}
	t0 := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	mk := func(ts time.Time, effect string) kernel.Event { return lostWorkerFailure(t, ts, effect) }
	if err := acts.RecordEvent(ctx, mk(t0, kernel.EffectUncertain)); err != nil {
		t.Fatalf("first record: %v", err)
	}
	if err := outbox.NewPublisher(s.Pool, j, outbox.Config{}, nil, zerolog.Nop()).Drain(ctx); err != nil {
		t.Fatal(err)
	}
	// What the publisher's prune does to a delivered row past the retention.
	if _, err := s.Pool.Exec(ctx, "DELETE FROM kernel_event_outbox"); err != nil {
		t.Fatal(err)
	}
	rows := func() int {
		var n int
		if err := s.Pool.QueryRow(ctx, "SELECT count(*) FROM kernel_event_outbox").Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	if err := acts.RecordEvent(ctx, mk(t0.Add(26*time.Hour), kernel.EffectUncertain)); err != nil {
		t.Fatalf("the same event a day later must be a no-op: %v", err)
	}
	if n := rows(); n != 0 {
		t.Fatalf("the same event a day later wrote %d outbox rows, to be parked as a conflict", n)
	}
	err := acts.RecordEvent(ctx, mk(t0.Add(26*time.Hour), kernel.EffectNone))
	if kernel.ErrorCode(err) != kernel.EConflict {
		t.Fatalf("a different effect under a journaled key: got %v, want a conflict", err)
	}
	if n := rows(); n != 0 {
		t.Fatalf("a conflicting event wrote %d outbox rows", n)
	}
}

// lostWorkerFailure is the kernel's tool.failed of p/r op-1 at ts, a
// worker lost, with effect.
func lostWorkerFailure(t *testing.T, ts time.Time, effect string) kernel.Event {
	t.Helper()
	ev, err := kernel.NewEvent(kernel.SourceKernel, "p/r/op-1/failed", "p", "r", kernel.TypeToolFailed, kernel.ActorKernel, ts,
		kernel.ToolFailed{OperationID: "op-1", ErrorType: "worker_lost", Error: "heartbeat timeout", Effect: effect})
	if err != nil {
		t.Fatal(err)
	}
	return ev
}
