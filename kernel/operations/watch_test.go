package operations_test

import (
	"testing"
	"time"

	"github.com/seed-7bc021c3/reckon/internal/pgtest"
	"github.com/seed-7bc021c3/reckon/internal/reckontest"
)

// TestWatchSettles: the stream leaves an event written less than
// WatchSettle ago, and every event after it, for a later read — a
// transaction that drew an earlier position may still commit — and sends
// them, in journal order, once they have settled.
func TestWatchSettles(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	r := reckontest.Run{Project: "acme", RunID: "run-1", Source: "agent-x"}
	ago := func(d time.Duration) time.Time { return time.Now().Add(-d) }
	e.Ingest(r.Started("op-1", "refund", ago(time.Minute)), r.Completed("op-1", ago(time.Minute)))
	age := func(seconds int) {
		t.Helper()
		pgtest.RedateJournal(t, e.Schema.Pool, `UPDATE journal_events SET ingested_at = ingested_at - make_interval(secs => $1)`, seconds)
	}
	age(5)
	e.Ingest(r.Started("op-2", "refund", ago(time.Second)), r.Completed("op-2", ago(time.Second)))
	got, err := e.Ops.WatchAfter(e.Ctx, "acme", "", 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || got[0].Event.EventID != r.Completed("op-1", time.Time{}).EventID {
		t.Fatalf("a fresh event was sent, or a settled one held: %+v", got)
	}
	age(2)
	got, err = e.Ops.WatchAfter(e.Ctx, "acme", "", got[0].Seq, 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || got[0].Event.EventID != r.Completed("op-2", time.Time{}).EventID {
		t.Fatalf("the settled event after the cursor: %+v", got)
	}
}
