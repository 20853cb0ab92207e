package outbox_test

import (
	"context"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"

	"github.com/seed-7bc021c3/reckon/internal/pgtest"
	"github.com/seed-7bc021c3/reckon/kernel"
	"github.com/seed-7bc021c3/reckon/kernel/journal"
	"github.com/seed-7bc021c3/reckon/kernel/outbox"
)

// pathCounting is the in-process journal with a count of the deliveries
// each path made: in the database (IngestOutboxTx) or checked (IngestTx).
type pathCounting struct {
	*journal.Store
	inDB, checked atomic.Int64
}

func (c *pathCounting) IngestTx(ctx context.Context, tx pgx.Tx, evs []kernel.Event) ([]kernel.IngestResult, error) {
	c.checked.Add(1)
	return c.Store.IngestTx(ctx, tx, evs)
}

func (c *pathCounting) IngestOutboxTx(ctx context.Context, tx pgx.Tx, ids []int64, keys []kernel.EventKey) ([]kernel.IngestResult, error) {
	c.inDB.Add(1)
	return c.Store.IngestOutboxTx(ctx, tx, ids, keys)
}

// deliveryBatches are events that exercise every column the journal
// derives from an event: data spelled non-canonically (numbers, escapes,
// key order) or absent, a timestamp with nanoseconds in another zone, a
// parent key, operations settled in the same batch, in a later one and
// before their tool.started, an uncertain failure that settles nothing.
func deliveryBatches() [][]kernel.Event {
	ts := time.Date(2026, 11, 30, 11, 0, 0, 123456789, time.FixedZone("x", 3600))
	e := func(id, typ, data string) kernel.Event {
		ev := kernel.Event{SourceID: "agent", EventID: id, Project: "acme", RunID: "run-1", Type: typ, TS: t0, Actor: "agent"}
		if data != "" {
			ev.Data = []byte(data)
		}
		return ev
	}
	startedA := e("a/started", kernel.TypeToolStarted, `{"tool":"run_command","operation_id":"a","args":{"n":1.50,"big":1e2,"s":"<é\u00e9>","z":[3,1]}}`)
	startedA.TS = ts
	rec := e("b/reconciled", kernel.TypeOperationReconciled, `{"operation_id":"b","effect":"unknown","note":"checked by hand","basis":"operator"}`)
	rec.SourceID, rec.Actor = kernel.SourceKernel, "operator:alice"
	rec.ParentEventID = &kernel.EventKey{SourceID: "agent", EventID: "b/started"}
	return [][]kernel.Event{{
		e("run/started", kernel.TypeRunStarted, `{"goal":"g"}`),
		startedA,
		e("a/completed", kernel.TypeToolCompleted, `{"operation_id":"a"}`),
		e("b/started", kernel.TypeToolStarted, `{"operation_id":"b","tool":"t"}`),
		e("b/failed", kernel.TypeToolFailed, `{"operation_id":"b","error_type":"x","effect":"uncertain"}`),
		e("c/completed", kernel.TypeToolCompleted, `{"operation_id":"c"}`),
		e("d/started", kernel.TypeToolStarted, `{"operation_id":"d","tool":"t"}`),
	}, {
		e("c/started", kernel.TypeToolStarted, `{"operation_id":"c","tool":"t"}`),
		rec,
		e("d/blocked", kernel.TypeToolBlocked, `{"operation_id":"d","reason":"policy"}`),
		e("e/started", kernel.TypeToolStarted, `{"operation_id":"e","tool":"t"}`),
	}, {
		e("run/completed", kernel.TypeRunCompleted, ""),
	}}
}

// journalRows is every journal row with every column but seq and
// ingested_at, in journal order, as text.
func journalRows(t *testing.T, s *pgtest.Schema) []string {
	t.Helper()
	return pgtest.Strings(t, s.Pool, `SELECT (to_jsonb(j) - 'seq' - 'ingested_at')::text FROM journal_events j ORDER BY seq`)
}

// TestInDatabaseDeliveryWritesWhatIngestWrites: the publisher's delivery
// inside the database writes, column for column, the journal rows that
// Ingest writes for the same events in the same batches; rows enqueued
// before the prepared columns existed go the checked path and write them
// too; an UPDATE of a row's event clears its prepared mark, a delivery
// mark does not.
func TestInDatabaseDeliveryWritesWhatIngestWrites(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	batches := deliveryBatches()

	// The journal after each batch, written by Ingest.
	direct := pgtest.New(t)
	dj := journal.New(direct.Pool, nil)
	var want [][]string
	for _, b := range batches {
		res, err := dj.Ingest(ctx, b)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range res {
			if r.Status != kernel.StatusAccepted {
				t.Fatalf("direct ingest: %+v", r)
			}
		}
		want = append(want, journalRows(t, direct))
	}
	if last := want[len(want)-1]; len(last) != 12 || !strings.Contains(strings.Join(last, ""), `"open": true`) {
		t.Fatalf("direct ingest wrote %d rows, none open: %v", len(last), last)
	}

	for _, legacy := range []bool{false, true} {
		s := pgtest.New(t)
		j := &pathCounting{Store: journal.New(s.Pool, nil)}
		p := outbox.NewPublisher(s.Pool, j, fastCfg(), nil, zerolog.Nop())
		for i, b := range batches {
			enqueue(t, s, b...)
			if legacy {
				// As a row of a version before migration 00027.
				exec(t, s, `UPDATE kernel_event_outbox SET operation_id = NULL, settles = NULL, ts = NULL WHERE id IN (SELECT id FROM kernel_event_outbox_undelivered)`)
			}
			drain(t, p)
			if got := journalRows(t, s); !slices.Equal(got, want[i]) {
				t.Fatalf("legacy=%v, after batch %d: journal rows differ from Ingest's\n got: %s\nwant: %s", legacy, i,
					strings.Join(got, "\n      "), strings.Join(want[i], "\n      "))
			}
		}
		inDB, checked := j.inDB.Load(), j.checked.Load()
		n := int64(len(batches))
		if legacy && (inDB != 0 || checked != n) || !legacy && (inDB != n || checked != 0) {
			t.Fatalf("legacy=%v: %d deliveries in the database, %d checked", legacy, inDB, checked)
		}
		if !legacy {
			if n := count(t, s, "SELECT count(*) FROM kernel_event_outbox WHERE settles IS NULL"); n != 0 {
				t.Fatalf("the delivery mark cleared %d rows' prepared mark", n)
			}
			exec(t, s, `UPDATE kernel_event_outbox SET event = event || '{"actor":"x"}' WHERE event_id = 'a/started'`)
			if n := count(t, s, "SELECT count(*) FROM kernel_event_outbox WHERE settles IS NULL AND event_id = 'a/started'"); n != 1 {
				t.Fatal("an UPDATE of the event left the row marked prepared")
			}
		}
	}
}

// TestInDatabaseDeliveryAnswersRepeatedAndConflict: keys the journal
// already holds are answered from the stored digest, as Ingest answers
// them: the same payload is delivered (repeated), another one parked.
func TestInDatabaseDeliveryAnswersRepeatedAndConflict(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := pgtest.New(t)
	j := &pathCounting{Store: journal.New(s.Pool, nil)}
	evs := events("rc", 4)
	other := evs[2]
	other.Data = []byte(`{"operation_id":"op-2","tool":"something_else"}`)
	if _, err := j.Ingest(ctx, []kernel.Event{evs[1], other}); err != nil {
		t.Fatal(err)
	}
	enqueue(t, s, evs...)
	reg := prometheus.NewRegistry()
	drain(t, outbox.NewPublisher(s.Pool, j, fastCfg(), outbox.NewMetrics(reg, nil), zerolog.Nop()))
	// The rows' states: delivered (not undelivered, not parked) or parked.
	rows, err := s.Pool.Query(ctx, `SELECT event_id, CASE WHEN parked_at IS NOT NULL THEN 'parked'
	    WHEN id IN (SELECT id FROM kernel_event_outbox_undelivered) THEN 'pending' ELSE 'delivered' END
	FROM kernel_event_outbox ORDER BY id`)
	if err != nil {
		t.Fatal(err)
	}
	got, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (string, error) {
		var id, st string
		err := r.Scan(&id, &st)
		return id + "=" + st, err
	})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"rc/op-0/started=delivered", "rc/op-1/started=delivered", "rc/op-2/started=parked", "rc/op-3/started=delivered"}
	if !slices.Equal(got, want) {
		t.Fatalf("outbox rows %v, want %v", got, want)
	}
	// The journal's answers: rc/op-1 was already journaled with the same
	// payload.
	if a, r := deliveredCount(t, reg, kernel.StatusAccepted), deliveredCount(t, reg, kernel.StatusRepeated); a != 2 || r != 1 {
		t.Fatalf("delivered %v accepted and %v repeated, want 2 and 1", a, r)
	}
	if n := count(t, s, "SELECT count(*) FROM kernel_event_outbox WHERE parked_at IS NOT NULL AND park_reason LIKE '%already in the journal with a different payload%'"); n != 1 {
		t.Fatalf("%d rows parked with the conflict's reason", n)
	}
	if j.inDB.Load() != 1 || j.checked.Load() != 0 {
		t.Fatalf("%d deliveries in the database, %d checked", j.inDB.Load(), j.checked.Load())
	}
}

// TestRowTheJournalCannotStoreGoesTheCheckedWay: a row written past
// Enqueue with the prepared columns set but an event the journal's table
// refuses (no project) fails the in-database statement; the publisher then
// delivers that batch the checked way, which parks the row with the
// journal's reason and delivers the rest, instead of retrying it forever.
func TestRowTheJournalCannotStoreGoesTheCheckedWay(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := pgtest.New(t)
	good := events("cw", 3)
	enqueue(t, s, good[:1]...)
	if _, err := s.Pool.Exec(ctx, `INSERT INTO kernel_event_outbox (source_id, event_id, event, payload_digest, operation_id, settles, ts)
VALUES ('kernel', 'cw/no-project', '{"source_id":"kernel","event_id":"cw/no-project","run_id":"cw","type":"tool.started","actor":"kernel","ts":"2026-11-30T10:00:00Z","data":{"operation_id":"x","tool":"t"}}',
    '\x00', 'x', false, now())`); err != nil {
		t.Fatal(err)
	}
	enqueue(t, s, good[1:]...)
	j := &pathCounting{Store: journal.New(s.Pool, nil)}
	drain(t, outbox.NewPublisher(s.Pool, j, fastCfg(), nil, zerolog.Nop()))
	if n := count(t, s, "SELECT count(*) FROM journal_events"); n != 3 {
		t.Fatalf("%d journal rows, want 3", n)
	}
	var reason string
	if err := s.Pool.QueryRow(ctx, "SELECT park_reason FROM kernel_event_outbox WHERE event_id = 'cw/no-project' AND parked_at IS NOT NULL").Scan(&reason); err != nil {
		t.Fatalf("the refused row is not parked: %v", err)
	}
	if !strings.Contains(reason, "project") {
		t.Fatalf("park reason %q does not name the missing field", reason)
	}
	if j.inDB.Load() != 1 || j.checked.Load() == 0 {
		t.Fatalf("%d deliveries in the database, %d checked", j.inDB.Load(), j.checked.Load())
	}
}

// TestInDatabaseDeliveryOfARowNotThere: asked to deliver a row the
// statement cannot see (an id that is not in the outbox: not locked by the
// caller, or gone since), IngestOutboxTx answers an error naming the row
// and writes nothing, rather than an answer for an event it never read;
// the rows beside it are not journaled either (the caller's transaction
// rolls back, and the publisher retries the batch).
func TestInDatabaseDeliveryOfARowNotThere(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := pgtest.New(t)
	j := journal.New(s.Pool, nil)
	enqueue(t, s, events("gone", 1)...)
	var id int64
	if err := s.Pool.QueryRow(ctx, `SELECT id FROM kernel_event_outbox`).Scan(&id); err != nil {
		t.Fatal(err)
	}
	missing := kernel.EventKey{SourceID: kernel.SourceKernel, EventID: "gone/op-9/started"}
	err := pgx.BeginFunc(ctx, s.Pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `SELECT id FROM kernel_event_outbox_undelivered WHERE id = $1 FOR UPDATE`, id); err != nil {
			return err
		}
		_, err := j.IngestOutboxTx(ctx, tx, []int64{id, id + 1000}, []kernel.EventKey{{SourceID: kernel.SourceKernel, EventID: "gone/op-0/started"}, missing})
		return err
	})
	if err == nil || !strings.Contains(err.Error(), "neither written nor found") || !strings.Contains(err.Error(), missing.EventID) {
		t.Fatalf("delivering a row that is not there: %v; want an error naming %s", err, missing)
	}
	if n := count(t, s, "SELECT count(*) FROM journal_events"); n != 0 {
		t.Fatalf("%d journal rows after the failed delivery, want none", n)
	}
}
