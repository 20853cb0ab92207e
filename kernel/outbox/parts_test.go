package outbox

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/seed-7bc021c3/reckon/internal/pgtest"
	"github.com/seed-7bc021c3/reckon/kernel"
)

// partEvents are n events of one run, the i-th with a note of i bytes so
// that the parts' boundaries fall unevenly.
func partEvents(run string, n int) []kernel.Event {
	evs := make([]kernel.Event, n)
	for i := range evs {
		note := make([]byte, i*7)
		for j := range note {
			note[j] = 'a' + byte(j%26)
		}
		evs[i] = kernel.Event{SourceID: kernel.SourceKernel, EventID: fmt.Sprintf("%s/op-%d/started", run, i),
			Project: "acme", RunID: run, Type: kernel.TypeToolStarted, TS: time.Date(2026, 12, 3, 17, 0, 0, i, time.UTC),
			Actor: "kernel", Data: fmt.Appendf(nil, `{"operation_id":"op-%d","tool":"run_command","args":{"note":%q}}`, i, note)}
	}
	return evs
}

// TestPreparedPartsCoverTheBatchInOrder: the parts of a batch are
// consecutive, each within the bound (or one event alone), and each
// part's document is the JSON array of its events' EventJSON, in order.
func TestPreparedPartsCoverTheBatchInOrder(t *testing.T) {
	t.Parallel()
	evs := partEvents("r-parts", 40)
	for _, maxDoc := range []int{1, 600, 2000, 1 << 20} {
		r, err := prepareRowsIn(evs, maxDoc)
		if err != nil {
			t.Fatal(err)
		}
		next := 0
		for _, pt := range r.parts {
			if pt.lo != next || pt.hi <= pt.lo {
				t.Fatalf("maxDoc %d: part [%d,%d) after %d", maxDoc, pt.lo, pt.hi, next)
			}
			next = pt.hi
			if len(pt.doc) > maxDoc && pt.hi-pt.lo > 1 {
				t.Fatalf("maxDoc %d: part [%d,%d) is %d bytes", maxDoc, pt.lo, pt.hi, len(pt.doc))
			}
			var docs []json.RawMessage
			if err := json.Unmarshal(pt.doc, &docs); err != nil {
				t.Fatalf("maxDoc %d: part [%d,%d) is not a JSON array: %v", maxDoc, pt.lo, pt.hi, err)
			}
			if len(docs) != pt.hi-pt.lo {
				t.Fatalf("maxDoc %d: part [%d,%d) holds %d events", maxDoc, pt.lo, pt.hi, len(docs))
			}
			for k, d := range docs {
				p, err := evs[pt.lo+k].Prepare()
				if err != nil {
					t.Fatal(err)
				}
				if want := p.EventJSON(evs[pt.lo+k].Key()); string(d) != string(want) {
					t.Fatalf("maxDoc %d: event %d is\n%s\nwant\n%s", maxDoc, pt.lo+k, d, want)
				}
			}
		}
		if next != len(evs) {
			t.Fatalf("maxDoc %d: parts end at %d of %d", maxDoc, next, len(evs))
		}
		if maxDoc == 1<<20 && len(r.parts) != 1 || maxDoc == 1 && len(r.parts) != len(evs) {
			t.Fatalf("maxDoc %d: %d parts", maxDoc, len(r.parts))
		}
	}
}

// TestEnqueueInPartsIsOneBatch: a batch written as several statements
// (parts of a small bound) inserts every event once, in the batch's
// order, answers a repeat of itself as a no-op, and, in a transaction
// rolled back, leaves nothing; the statement that requires every key new
// refuses the batch when its last part holds a key already enqueued.
func TestEnqueueInPartsIsOneBatch(t *testing.T) {
	t.Parallel()
	s := pgtest.New(t)
	ctx := context.Background()
	evs := partEvents("r-parts", 30)
	r, err := prepareRowsIn(evs, 900)
	if err != nil {
		t.Fatal(err)
	}
	if len(r.parts) < 3 {
		t.Fatalf("%d parts: the bound does not split the batch", len(r.parts))
	}
	write := func(db DBTX) {
		t.Helper()
		inserted := map[kernel.EventKey]bool{}
		b := &pgx.Batch{}
		for _, pt := range r.parts {
			b.Queue(enqueueSQL, r.args(pt)...).Query(func(rows pgx.Rows) error {
				for rows.Next() {
					var k kernel.EventKey
					if err := rows.Scan(&k.SourceID, &k.EventID); err != nil {
						return err
					}
					inserted[k] = true
				}
				return rows.Err()
			})
		}
		if err := db.SendBatch(ctx, b).Close(); err != nil {
			t.Fatal(err)
		}
	}
	tx, err := s.Pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	write(tx)
	if err := tx.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	var n int
	if err := s.Pool.QueryRow(ctx, `SELECT count(*) FROM kernel_event_outbox`).Scan(&n); err != nil || n != 0 {
		t.Fatalf("after a rollback: %d rows (%v)", n, err)
	}
	write(s.Pool)
	rowsRead, err := s.Pool.Query(ctx, `SELECT o.event_id, o.event, u.id IS NOT NULL FROM kernel_event_outbox o
		LEFT JOIN kernel_event_outbox_undelivered u ON u.id = o.id ORDER BY o.id`)
	if err != nil {
		t.Fatal(err)
	}
	i := 0
	for rowsRead.Next() {
		var id string
		var body []byte
		var pending bool
		if err := rowsRead.Scan(&id, &body, &pending); err != nil {
			t.Fatal(err)
		}
		if id != evs[i].EventID || !pending {
			t.Fatalf("row %d: %s pending=%v, want %s pending", i, id, pending, evs[i].EventID)
		}
		// The stored event is the one enqueued: the same digest, which
		// covers every field but the key.
		got, err := kernel.DecodeEvent(body)
		if err != nil {
			t.Fatalf("row %d: %v", i, err)
		}
		gp, err := got.Prepare()
		if err != nil {
			t.Fatalf("row %d: %v", i, err)
		}
		if got.Key() != evs[i].Key() || !bytes.Equal(gp.Digest, r.digests[i]) {
			t.Fatalf("row %d: stored %s, not the event enqueued", i, body)
		}
		i++
	}
	if err := rowsRead.Err(); err != nil || i != len(evs) {
		t.Fatalf("%d rows of %d (%v)", i, len(evs), err)
	}
	// Enqueue's own way, whole batch again: every key is a repeat.
	if err := Enqueue(ctx, s.Pool, evs...); err != nil {
		t.Fatalf("enqueue again: %v", err)
	}
	// Every key new but the last: the statements that require it refuse
	// the whole batch, and its transaction writes nothing.
	fresh := partEvents("r-parts-2", 29)
	again := append(fresh, evs[len(evs)-1])
	ra, err := prepareRowsIn(again, 900)
	if err != nil {
		t.Fatal(err)
	}
	b := &pgx.Batch{}
	for _, pt := range ra.parts {
		b.Queue(enqueueNewSQL, ra.args(pt)...)
	}
	if err := s.Pool.SendBatch(ctx, b).Close(); !AlreadyEnqueued(err) {
		t.Fatalf("a batch with a key already enqueued: %v, want the refusal", err)
	}
	if err := s.Pool.QueryRow(ctx, `SELECT count(*) FROM kernel_event_outbox`).Scan(&n); err != nil || n != len(evs) {
		t.Fatalf("after the refusal: %d rows (%v), want %d", n, err, len(evs))
	}
}
