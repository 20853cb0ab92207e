// Package outbox is the transactional outbox kernel_event_outbox and its
// publisher. Events are enqueued in the caller's transaction, beside whatever
// they describe; the publisher drains them to a kernel.Journal with
// at-least-once delivery, which the journal's idempotent ingest turns into a
// single journal row per key. This is not exactly-once transport.
//
// Enqueue also writes, in the same statements' transaction, the webhooks
// its events announce (kernel/webhook: a reconciliation, a kernel run's
// wait), and the publisher those of the rows it parks: every event reckon
// writes itself passes here, so each such fact is announced whoever
// writes it.
package outbox

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/seed-7bc021c3/reckon/kernel"
	"github.com/seed-7bc021c3/reckon/kernel/pgplan"
	"github.com/seed-7bc021c3/reckon/kernel/webhook"
)

// DBTX is what Enqueue writes through: a pgx.Tx joins the caller's
// transaction; a pool or connection writes in a transaction of its own.
type DBTX interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	SendBatch(ctx context.Context, b *pgx.Batch) pgx.BatchResults
}

// Enqueue validates events and writes them to the outbox through db. An
// event whose key is already enqueued with the same payload is a no-op, so a
// retried activity can enqueue again safely; the same key with a different
// payload is an EConflict error and the statement writes nothing of it.
// When db is a transaction the rows commit or roll back with it.
func Enqueue(ctx context.Context, db DBTX, events ...kernel.Event) error {
	if len(events) == 0 {
		return nil
	}
	r, notes, err := prepareBatch(events)
	if err != nil {
		return err
	}
	if pool, ok := db.(*pgxpool.Pool); ok {
		// A transaction of its own: the batch is written on the
		// condition that every key is new (enqueueNewSQL says why), and
		// answered key by key below only when one is not. Not in a
		// caller's transaction, which the refusal would abort.
		b := &pgx.Batch{}
		pgplan.Force(b, "")
		for _, pt := range r.parts {
			b.Queue(enqueueNewSQL, r.args(pt)...)
		}
		webhook.Queue(b, notes)
		pgplan.Restore(b)
		err := pool.SendBatch(ctx, b).Close()
		if err == nil {
			return nil
		}
		if !AlreadyEnqueued(err) {
			return fmt.Errorf("enqueue %d events: %w", len(events), err)
		}
	}
	n := len(events)
	srcs, ids, digests, seen := r.srcs, r.ids, r.digests, r.seen
	inserted := make(map[kernel.EventKey]bool, n)
	b := &pgx.Batch{}
	for _, pt := range r.parts {
		pgplan.QueueInserted(b, inserted, "", enqueueSQL, r.args(pt)...)
	}
	if len(notes) > 0 {
		pgplan.Force(b, "")
		webhook.Queue(b, notes)
		pgplan.Restore(b)
	}
	if err := db.SendBatch(ctx, b).Close(); err != nil {
		return fmt.Errorf("enqueue %d events: %w", n, err)
	}
	var recheck []int
	for k, i := range seen {
		if !inserted[k] {
			recheck = append(recheck, i)
		}
	}
	if len(recheck) == 0 {
		return nil
	}
	rs, ri := make([]string, len(recheck)), make([]string, len(recheck))
	for i, o := range recheck {
		rs[i], ri[i] = srcs[o], ids[o]
	}
	var conflict error
	rb := &pgx.Batch{}
	queueIndexedRead(rb, enqueueRecheckSQL, rs, ri).Query(func(rows pgx.Rows) error {
		for rows.Next() {
			var k kernel.EventKey
			var stored []byte
			if err := rows.Scan(&k.SourceID, &k.EventID, &stored); err != nil {
				return err
			}
			if conflict == nil && !bytes.Equal(stored, digests[seen[k]]) {
				conflict = conflictErr(k)
			}
		}
		return rows.Err()
	})
	if err := db.SendBatch(ctx, rb).Close(); err != nil {
		return fmt.Errorf("enqueue: recheck: %w", err)
	}
	return conflict
}

// rows are events prepared for enqueueSQL's arrays, in the batch's order.
type rows struct {
	srcs, ids []string
	// parts split the batch into statements: each part's events go as one
	// JSON array (enqueueInsertSQL says why), each event as
	// kernel.Prepared.EventJSON writes it.
	parts   []part
	digests [][]byte
	ords    []int32
	// What the journal needs besides the event, so that the in-process
	// publisher can copy the row into the journal inside the database
	// (journal.Store.IngestOutboxTx) without preparing it again.
	opIDs   []string
	settles []bool
	tss     []time.Time
	// seen is each key's last position; a key twice with two payloads is
	// refused by prepareRows.
	seen map[kernel.EventKey]int
}

// part is the events [lo, hi) of a batch, written by one statement; doc
// is their JSON array.
type part struct {
	lo, hi int
	doc    []byte
}

// maxPartDoc bounds one statement's JSON array of events. A jsonb value
// holds at most 256 MiB, and a batch of events of the API's largest size
// (8 MiB each) could pass it; the parts of a batch are statements of one
// round trip, so they commit or roll back together as the batch's single
// statement did.
const maxPartDoc = 64 << 20

// prepareBatch prepares events' rows and the webhook notifications they
// announce, as Enqueue and QueueEnqueueNew write them.
func prepareBatch(events []kernel.Event) (rows, []webhook.Notification, error) {
	r, err := prepareRows(events)
	if err != nil {
		return rows{}, nil, err
	}
	notes, err := r.notifications(events)
	if err != nil {
		return rows{}, nil, err
	}
	return r, notes, nil
}

// prepareRows validates and prepares events for the outbox.
func prepareRows(events []kernel.Event) (rows, error) {
	return prepareRowsIn(events, maxPartDoc)
}

// prepareRowsIn is prepareRows with parts of documents of at most maxDoc
// bytes, unless one event alone is larger.
func prepareRowsIn(events []kernel.Event, maxDoc int) (rows, error) {
	n := len(events)
	r := rows{
		srcs: make([]string, n), ids: make([]string, n),
		digests: make([][]byte, n), ords: make([]int32, n),
		opIDs: make([]string, n), settles: make([]bool, n), tss: make([]time.Time, n),
		seen: make(map[kernel.EventKey]int, n),
	}
	preps := make([]kernel.Prepared, n)
	for i, ev := range events {
		p, err := ev.Prepare()
		if err != nil {
			return rows{}, err
		}
		preps[i] = p
		d := p.Digest
		if j, dup := r.seen[ev.Key()]; dup {
			if !bytes.Equal(r.digests[j], d) {
				return rows{}, kernel.Errorf(kernel.EConflict, "enqueue: event %s appears twice in one batch with different payloads", ev.Key())
			}
		}
		r.seen[ev.Key()] = i
		r.srcs[i], r.ids[i], r.digests[i], r.ords[i] = ev.SourceID, ev.EventID, d, int32(i)
		r.opIDs[i], r.settles[i], r.tss[i] = p.OperationID, p.Settles, ev.TS
	}
	// The row holds the event with its canonical data, the data the
	// journal stores: copied in the database, the journal's row is then
	// the one the Go path writes (the same number spellings, {} for no
	// data). Written from what Prepare already built, not marshalled
	// again; ts is in UTC, the same instant. Each part's array is sized
	// before it is written.
	size := func(i int) int { return preps[i].EventJSONSize(events[i].Key()) + len(",") }
	for lo := 0; lo < n; {
		hi, total := lo+1, len("[]")+size(lo)
		for hi < n && total+size(hi) <= maxDoc {
			total += size(hi)
			hi++
		}
		doc := append(make([]byte, 0, total), '[')
		for i := lo; i < hi; i++ {
			if i > lo {
				doc = append(doc, ',')
			}
			doc = preps[i].AppendEventJSON(doc, events[i].Key())
		}
		r.parts = append(r.parts, part{lo: lo, hi: hi, doc: append(doc, ']')})
		lo = hi
	}
	return r, nil
}

// args are enqueueSQL's (and enqueueNewSQL's) parameters for part pt, the
// events last so that pgx appends them to its buffers in one piece.
func (r rows) args(pt part) []any {
	lo, hi := pt.lo, pt.hi
	return []any{r.srcs[lo:hi], r.ids[lo:hi], r.digests[lo:hi], r.ords[lo:hi], r.opIDs[lo:hi],
		r.settles[lo:hi], r.tss[lo:hi], pt.doc}
}

// QueueEnqueueNew validates events and queues on b, between a caller's
// pgplan.Force and pgplan.Restore, the statement that writes them to the
// outbox on the condition that every one of them is new: when a key is
// already enqueued (with the same payload or another) the statement
// fails with a unique violation of the outbox's key (AlreadyEnqueued
// tells) and its transaction is aborted with nothing written. Enqueue's
// answers for such keys (a repeat is a no-op, another payload a
// conflict) need the stored digests read and compared before the
// transaction may commit; this statement lets a caller queue the COMMIT
// in the same round trip, and take Enqueue's way after a rollback in the
// rare case it raises. Nothing is queued when an event is invalid.
func QueueEnqueueNew(b *pgx.Batch, events ...kernel.Event) error {
	if len(events) == 0 {
		return nil
	}
	r, notes, err := prepareBatch(events)
	if err != nil {
		return err
	}
	for _, pt := range r.parts {
		b.Queue(enqueueNewSQL, r.args(pt)...)
	}
	webhook.Queue(b, notes)
	return nil
}

// notifications are the webhooks the prepared events announce
// (webhook.Derive), each bound to its event's digest: written in the
// statement after the events' own, in their transaction, and only while
// the outbox holds exactly that event (a conflict announces nothing).
func (r rows) notifications(events []kernel.Event) ([]webhook.Notification, error) {
	ns, err := webhook.Derive(events)
	if err != nil {
		return nil, err
	}
	for i := range ns {
		ns[i].Digest = r.digests[r.seen[ns[i].Key]]
	}
	return ns, nil
}

// AlreadyEnqueued reports whether err is QueueEnqueueNew's refusal of an
// event already enqueued: a unique violation of the outbox's key.
func AlreadyEnqueued(err error) bool {
	var pe *pgconn.PgError
	return errors.As(err, &pe) && pe.Code == uniqueViolation && pe.ConstraintName == outboxKeyConstraint
}

// uniqueViolation is PostgreSQL's SQLSTATE unique_violation.
const uniqueViolation = "23505"

// Stored returns the event enqueued under key, and false when none is (or it
// has been pruned after delivery).
func Stored(ctx context.Context, db DBTX, key kernel.EventKey) (kernel.Event, bool, error) {
	var body []byte
	b := &pgx.Batch{}
	queueIndexedRead(b, storedSQL, key.SourceID, key.EventID).Query(func(rows pgx.Rows) error {
		for rows.Next() {
			if err := rows.Scan(&body); err != nil {
				return err
			}
		}
		return rows.Err()
	})
	if err := db.SendBatch(ctx, b).Close(); err != nil {
		return kernel.Event{}, false, fmt.Errorf("outbox: read %s: %w", key, err)
	}
	if body == nil {
		return kernel.Event{}, false, nil
	}
	var ev kernel.Event
	if err := json.Unmarshal(body, &ev); err != nil {
		return kernel.Event{}, false, fmt.Errorf("outbox: decode %s: %w", key, err)
	}
	return ev, true, nil
}

func conflictErr(k kernel.EventKey) error {
	return kernel.Errorf(kernel.EConflict, "event %s is already enqueued with a different payload; nothing was overwritten", k)
}

// PendingCount counts the events of runs (each named once) not yet
// delivered to the journal (parked rows excluded), in one statement
// however many runs.
func PendingCount(ctx context.Context, db DBTX, runs ...kernel.RunKey) (int, error) {
	projects, ids := make([]string, len(runs)), make([]string, len(runs))
	for i, r := range runs {
		projects[i], ids[i] = r.Project, r.RunID
	}
	var (
		n int
		b pgx.Batch
	)
	queueIndexedRead(&b, pendingForRunsSQL, projects, ids).QueryRow(func(row pgx.Row) error { return row.Scan(&n) })
	if err := db.SendBatch(ctx, &b).Close(); err != nil {
		return 0, fmt.Errorf("pending outbox rows of %d run(s): %w", len(runs), err)
	}
	return n, nil
}

// WaitDelivered polls until every outbox row of the run is delivered (or
// parked), or ctx ends. Readers of the journal that must see a run's own
// events (the child-run summary) call it first.
func WaitDelivered(ctx context.Context, pool *pgxpool.Pool, project, runID string, every time.Duration) error {
	for {
		n, err := PendingCount(ctx, pool, kernel.RunKey{Project: project, RunID: runID})
		if err != nil {
			return err
		}
		if n == 0 {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("wait for %d outbox rows of %s/%s: %w", n, project, runID, ctx.Err())
		case <-time.After(every):
		}
	}
}

// Parked is an outbox row parked on a conflict.
type Parked struct {
	Key      kernel.EventKey
	Reason   string
	ParkedAt time.Time
}

// ListParked returns up to limit parked rows, newest first.
func ListParked(ctx context.Context, pool *pgxpool.Pool, limit int) ([]Parked, error) {
	rows, err := pool.Query(ctx, parkedSQL, limit)
	if err != nil {
		return nil, fmt.Errorf("list parked: %w", err)
	}
	defer rows.Close()
	var out []Parked
	for rows.Next() {
		var p Parked
		if err := rows.Scan(&p.Key.SourceID, &p.Key.EventID, &p.Reason, &p.ParkedAt); err != nil {
			return nil, fmt.Errorf("list parked: %w", err)
		}
		out = append(out, p)
	}
	return out, rows.Err()
}

// Retrying is an outbox row whose delivery failed and is tried again with
// backoff: neither delivered nor parked.
type Retrying struct {
	Key           kernel.EventKey
	Attempts      int
	EnqueuedAt    time.Time
	NextAttemptAt time.Time
	// LastError is the last failure: the journal unreachable, or its
	// refusal of the event to this publisher (a kernel event sent to a
	// journal behind the HTTP API waits for an in-process publisher).
	LastError string
}

// ListRetrying returns up to limit rows whose delivery has failed and is
// retried, oldest first: the events an operator looks for when they are
// late, which ListParked does not show (they may still arrive).
func ListRetrying(ctx context.Context, pool *pgxpool.Pool, limit int) ([]Retrying, error) {
	rows, err := pool.Query(ctx, retryingSQL, limit)
	if err != nil {
		return nil, fmt.Errorf("list retrying: %w", err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (Retrying, error) {
		var x Retrying
		err := r.Scan(&x.Key.SourceID, &x.Key.EventID, &x.Attempts, &x.EnqueuedAt, &x.NextAttemptAt, &x.LastError)
		return x, err
	})
	if err != nil {
		return nil, fmt.Errorf("list retrying: %w", err)
	}
	return out, nil
}

// PendingFilter selects pending events (enqueued, neither delivered nor
// parked) by the event's own fields. Project is required; an empty RunID
// or OperationID and a nil Types match any; an OperationID needs its RunID
// (operation ids are per run).
type PendingFilter struct {
	Project     string
	RunID       string
	OperationID string
	Types       []string
}

// Pending is the one reader of the outbox's events for the rest of reckon:
// the events a filter selects that are on their way to the journal, in
// enqueue order. Readers that decide from the journal and must not miss
// what is still on its way (the reconcile rules, the operator's queue, the
// triage sweep's pending reconciliations) merge these in.
//
// Call it BEFORE reading the journal: the publisher commits a journal row
// before it marks the outbox row delivered, so an event delivered between
// the two reads is then seen on the journal side, and dropping the outbox
// copy of a key the journal also holds leaves each event once.
func Pending(ctx context.Context, db DBTX, f PendingFilter) ([]kernel.Event, error) {
	var (
		b   pgx.Batch
		evs []kernel.Event
	)
	if err := QueuePending(&b, f, &evs); err != nil {
		return nil, err
	}
	if err := db.SendBatch(ctx, &b).Close(); err != nil {
		return nil, fmt.Errorf("outbox: %w", err)
	}
	return evs, nil
}

// QueuePending is Pending queued on a batch, so that a caller reads the
// outbox and the journal (Pending first, in queue order) in one round trip:
// into is set when the batch's results are read. An invalid filter is an
// error at once, and nothing is queued.
func QueuePending(b *pgx.Batch, f PendingFilter, into *[]kernel.Event) error {
	return queuePending(b, f, into, true)
}

// QueuePendingForced is QueuePending for a caller that has queued
// pgplan.Force on b already and lets the settings end with the
// transaction (a batch sent outside one is a transaction of its own): it
// queues the read alone, not the two settings statements around it.
func QueuePendingForced(b *pgx.Batch, f PendingFilter, into *[]kernel.Event) error {
	return queuePending(b, f, into, false)
}

func queuePending(b *pgx.Batch, f PendingFilter, into *[]kernel.Event, settings bool) error {
	sql, args, err := pendingQuery(f)
	if err != nil {
		return err
	}
	var q *pgx.QueuedQuery
	if settings {
		q = queueIndexedRead(b, sql, args...)
	} else {
		q = b.Queue(sql, args...)
	}
	q.Query(func(rows pgx.Rows) error {
		evs, err := scanPending(rows)
		if err != nil {
			return fmt.Errorf("pending outbox events of %s: %w", f.Project, err)
		}
		*into = evs
		return nil
	})
	return nil
}

// queueIndexedRead queues one of the outbox's reads by key or by the
// event's project and run with sequential scans off, on its generic plan
// (pgplan.Queue; the statement reads no table that must be known large
// first). A plan made while the outbox was small is kept as it grows
// (until the table is analyzed again, which autovacuum may not do for a
// while): made by the planner alone it is a sequential scan, which every
// read then pays for with every row of the outbox, delivered ones
// included. TestReadsPlannedOnASmallOutbox.
func queueIndexedRead(b *pgx.Batch, sql string, args ...any) *pgx.QueuedQuery {
	return pgplan.Queue(b, "", sql, args...)
}

// pendingQuery picks the statement for the filter (see pendingSQL).
func pendingQuery(f PendingFilter) (string, []any, error) {
	switch {
	case f.Project == "":
		return "", nil, fmt.Errorf("pending outbox events: project is required")
	case f.RunID == "" && f.OperationID != "":
		return "", nil, fmt.Errorf("pending outbox events: an operation filter needs its run")
	case f.OperationID != "":
		return pendingOperationSQL, []any{f.Project, f.RunID, f.OperationID, f.Types}, nil
	case f.RunID != "":
		return pendingRunSQL, []any{f.Project, f.RunID, f.Types}, nil
	default:
		return pendingSQL, []any{f.Project, f.Types}, nil
	}
}

func scanPending(rows pgx.Rows) ([]kernel.Event, error) {
	defer rows.Close()
	var out []kernel.Event
	for rows.Next() {
		var body []byte
		if err := rows.Scan(&body); err != nil {
			return nil, fmt.Errorf("pending outbox events: scan: %w", err)
		}
		var ev kernel.Event
		if err := json.Unmarshal(body, &ev); err != nil {
			// Enqueue validated it; the publisher parks such a row.
			continue
		}
		ev.TS = ev.TS.UTC()
		out = append(out, ev)
	}
	return out, rows.Err()
}
