// Package journal is the PostgreSQL journal: idempotent ingest of event
// batches (accepted / repeated / conflict) and the reads the projections need.
package journal

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"runtime"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/seed-7bc021c3/reckon/kernel"
	"github.com/seed-7bc021c3/reckon/kernel/pgplan"
	"github.com/seed-7bc021c3/reckon/platform/promx"
)

// Store is the journal in PostgreSQL. It implements kernel.Journal.
type Store struct {
	pool    *pgxpool.Pool
	results *prometheus.CounterVec
	// groupRetries counts writes of group-commit calls made again after
	// their combined batch failed (grouper.retry).
	groupRetries prometheus.Counter
	group        grouper
	// stmts are the statement path's SQL: the journal's, or in a test a
	// reference to compare it with.
	stmts statements
}

// statements are the SQL of the statement path's write and of its
// answers' reads.
type statements struct{ ingest, digests string }

var _ kernel.GuardedJournal = (*Store)(nil)

// New returns a journal over pool. Metrics are registered with reg when it is
// not nil.
func New(pool *pgxpool.Pool, reg prometheus.Registerer) *Store {
	s := &Store{
		pool:  pool,
		stmts: statements{ingest: ingestSQL, digests: digestsSQL},
		results: promx.CounterVec("reckon_journal_ingest_results_total",
			"Events ingested into the journal, by status (accepted, repeated, conflict).",
			"status"),
		groupRetries: promx.Counter("reckon_journal_group_retries_total",
			"Writes of group-commit calls made again after their combined batch failed: halves of it after an agent's write was refused, single calls after any other error."),
	}
	if reg != nil {
		reg.MustRegister(s.results, s.groupRetries)
	}
	s.group.s = s
	return s
}

// prepared is one event ready for the ingest statement.
type prepared struct {
	ev kernel.Event
	kernel.Prepared
	// agent: the event is an agent's, to be written only outside kernel
	// and gateway runs and into a run its source owns (IngestAgentEvents).
	agent bool
}

// querier is what ingest runs on: the pool, or a transaction of the caller.
type querier interface {
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	SendBatch(ctx context.Context, b *pgx.Batch) pgx.BatchResults
}

// Ingest writes a batch of events and answers per event: in one round trip,
// or with COPY for a large batch of new events (see ingestLarge).
// Every event is validated first; an invalid one fails the whole call before
// anything is written. Small batches from concurrent callers share a round
// trip and a commit (group commit, see grouper); each still gets its own
// answers, as if the calls had run one after another.
func (s *Store) Ingest(ctx context.Context, events []kernel.Event) ([]kernel.IngestResult, error) {
	preps, err := prepare(events)
	if err != nil || len(preps) == 0 {
		return nil, err
	}
	return s.ingestPrepared(ctx, preps)
}

// IngestAgentEvents is Ingest for the events agents report (POST
// /v1/events), in the same transaction as the write: it refuses the whole
// call with an EForbidden naming the run if an event, or a run its id
// descends from, is a kernel or gateway run or is being started or claimed
// at that moment (only the kernel writes a kernel run's events, only the
// MCP gateway a gateway run's), or if an event lies in an agent's run that
// another source owns, or in a run nobody has claimed whose nearest owned
// ancestor another source owns (an agent's child runs are its own,
// migration 00032); an event into a run that has no owner, and no owned run
// it descends from, claims it for its source (the call's first event of the
// run, in order). Nothing of a refused call is written. The caller's own
// check before the write (kernel.RunOwners) gives the precise message; this
// one closes the races with a start, a claim or a first write in between
// (see reckon_check_agent_events, migrations 00030, 00031 and 00032, and
// reckon_refuse_kernel_runs, migrations 00028 and 00029). It also refuses
// events under the MCP gateway's source (its default, or one a gateway
// instance registered with): their keys could take the ids of the gateway's
// own events.
func (s *Store) IngestAgentEvents(ctx context.Context, events []kernel.Event) ([]kernel.IngestResult, error) {
	preps, err := prepare(events)
	if err != nil || len(preps) == 0 {
		return nil, err
	}
	for i := range preps {
		preps[i].agent = true
	}
	return s.ingestPrepared(ctx, preps)
}

// ingestPrepared writes prepared events: small calls through group commit,
// larger ones alone (see ingestLarge).
func (s *Store) ingestPrepared(ctx context.Context, preps []prepared) ([]kernel.IngestResult, error) {
	if len(preps) <= groupSmall {
		return s.group.ingest(ctx, preps)
	}
	return s.ingestLarge(ctx, preps)
}

// ingestRetry writes preps on the pool in their own transaction.
func (s *Store) ingestRetry(ctx context.Context, preps []prepared) ([]kernel.IngestResult, error) {
	// Two batches that hold the same new keys in opposite orders can
	// deadlock on the unique index; PostgreSQL aborts one of them whole,
	// so it is safe to run it again. The batch keeps its order (journal
	// order follows it) rather than being sorted to avoid the wait.
	for attempt := 1; ; attempt++ {
		res, err := s.ingest(ctx, s.pool, preps)
		if attempt < 5 && abortedWhole(err) {
			continue
		}
		return res, err
	}
}

// IngestTx is Ingest inside the caller's transaction. The in-process
// publisher uses it to write the journal rows and mark the outbox rows
// delivered in one commit (outbox.TxJournal).
func (s *Store) IngestTx(ctx context.Context, tx pgx.Tx, events []kernel.Event) ([]kernel.IngestResult, error) {
	preps, err := prepare(events)
	if err != nil || len(preps) == 0 {
		return nil, err
	}
	return s.ingest(ctx, tx, preps)
}

// prepareSpan is the fewest events one goroutine of prepare takes: below
// it, starting a goroutine costs more than it saves.
const prepareSpan = 64

// prepare validates and canonicalizes events; the first invalid one fails
// the whole batch. A large batch is prepared on every core at once: with
// one caller the database waits for this step, and the answer is the
// same, the first invalid event in batch order.
func prepare(events []kernel.Event) ([]prepared, error) {
	preps := make([]prepared, len(events))
	workers := min(runtime.GOMAXPROCS(0), len(events)/prepareSpan)
	if workers <= 1 {
		return preps, prepareSpanOf(events, preps)
	}
	// Each goroutine stops at the first invalid event of its span; the
	// spans are in batch order, so the first span's error is the batch's.
	errs := make([]error, workers)
	per := (len(events) + workers - 1) / workers
	var wg sync.WaitGroup
	for w := range workers {
		lo, hi := w*per, min((w+1)*per, len(events))
		wg.Go(func() { errs[w] = prepareSpanOf(events[lo:hi], preps[lo:hi]) })
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return nil, err
		}
	}
	return preps, nil
}

// prepareSpanOf prepares events into preps, stopping at the first invalid
// one.
func prepareSpanOf(events []kernel.Event, preps []prepared) error {
	for i, ev := range events {
		p, err := ev.Prepare()
		if err != nil {
			return err
		}
		preps[i] = prepared{ev: ev, Prepared: p}
	}
	return nil
}

// distinctRows is a batch's events as the journal gets them: duplicates
// inside one batch go to the database once, and later copies are answered
// against the first.
type distinctRows struct {
	// first is each key's first index in the batch.
	first map[kernel.EventKey]int
	// order lists the batch index of each key's first event, in batch
	// order (journal order follows it).
	order []int
	// openInBatch is, per entry of order, false when the batch itself
	// settles the event's operation: a tool.started is then written
	// closed.
	openInBatch []bool
	// settled is the (project, run, operation) of every operation the
	// batch settles.
	settled map[[3]string]bool
}

// distinct splits preps into the events the journal gets (see
// distinctRows).
func distinct(preps []prepared) distinctRows {
	d := distinctRows{first: make(map[kernel.EventKey]int, len(preps)), settled: make(map[[3]string]bool, len(preps)/2)}
	for i, p := range preps {
		if _, dup := d.first[p.ev.Key()]; !dup {
			d.first[p.ev.Key()] = i
			d.order = append(d.order, i)
		}
		if p.Settles {
			d.settled[[3]string{p.ev.Project, p.ev.RunID, p.OperationID}] = true
		}
	}
	d.openInBatch = make([]bool, len(d.order))
	for j, i := range d.order {
		e := preps[i].ev
		d.openInBatch[j] = !d.settled[[3]string{e.Project, e.RunID, preps[i].OperationID}]
	}
	return d
}

// ingest writes preps through q in one round trip, then reads the stored
// digests of the keys it did not insert.
func (s *Store) ingest(ctx context.Context, q querier, preps []prepared) ([]kernel.IngestResult, error) {
	d := distinct(preps)
	n := len(d.order)
	var (
		srcs, ids, projects, runs, types, actors = make([]string, 0, n), make([]string, 0, n), make([]string, 0, n), make([]string, 0, n), make([]string, 0, n), make([]string, 0, n)
		tss                                      = make([]time.Time, 0, n)
		psrc, pid, opIDs                         = make([]*string, 0, n), make([]*string, 0, n), make([]*string, 0, n)
		datas, digests                           = make([][]byte, 0, n), make([][]byte, 0, n)
		settles                                  = make([]bool, 0, n)
		ords                                     = make([]int32, 0, n)
	)
	for _, i := range d.order {
		p := preps[i]
		e := p.ev
		srcs, ids, projects, runs = append(srcs, e.SourceID), append(ids, e.EventID), append(projects, e.Project), append(runs, e.RunID)
		types, actors, tss = append(types, e.Type), append(actors, e.Actor), append(tss, e.TS)
		if e.ParentEventID != nil {
			ps, pe := e.ParentEventID.SourceID, e.ParentEventID.EventID
			psrc, pid = append(psrc, &ps), append(pid, &pe)
		} else {
			psrc, pid = append(psrc, nil), append(pid, nil)
		}
		if p.OperationID != "" {
			op := p.OperationID
			opIDs = append(opIDs, &op)
		} else {
			opIDs = append(opIDs, nil)
		}
		datas, digests = append(datas, p.CanonicalData), append(digests, p.Digest)
		settles = append(settles, p.Settles)
		ords = append(ords, int32(i))
	}

	inserted := make(map[kernel.EventKey]bool, n)
	// On its generic plan (pgplan), in one round trip.
	b := &pgx.Batch{}
	queueAgentChecks(b, preps)
	pgplan.QueueInserted(b, inserted, plannedTable, s.stmts.ingest, srcs, ids, projects, runs, types, tss, actors,
		psrc, pid, datas, digests, opIDs, settles, d.openInBatch, ords)
	if err := q.SendBatch(ctx, b).Close(); err != nil {
		if refusal := agentRefusal(err); refusal != nil {
			return nil, refusal
		}
		return nil, fmt.Errorf("ingest batch of %d: %w", len(preps), err)
	}
	return s.answer(ctx, q, preps, d.first, func(k kernel.EventKey) bool { return inserted[k] })
}

// answer reads the stored digests of the keys of preps the write did not
// insert and answers each event: accepted when its key was inserted by
// this event, repeated when the stored digest is its own, conflict
// otherwise.
func (s *Store) answer(ctx context.Context, q querier, preps []prepared, first map[kernel.EventKey]int, inserted func(kernel.EventKey) bool) ([]kernel.IngestResult, error) {
	stored := make(map[kernel.EventKey][]byte, len(first))
	var missing []kernel.EventKey
	for k, i := range first {
		if inserted(k) {
			stored[k] = preps[i].Digest
		} else {
			missing = append(missing, k)
		}
	}
	if len(missing) > 0 {
		if err := readDigests(ctx, q, s.stmts.digests, missing, stored); err != nil {
			return nil, err
		}
	}

	out := make([]kernel.IngestResult, len(preps))
	for i, p := range preps {
		k := p.ev.Key()
		r := kernel.IngestResult{SourceID: k.SourceID, EventID: k.EventID}
		switch {
		case first[k] == i && inserted(k):
			r.Status = kernel.StatusAccepted
		case bytes.Equal(stored[k], p.Digest):
			r.Status = kernel.StatusRepeated
		default:
			r.Status = kernel.StatusConflict
			r.Reason = conflictReason(k)
		}
		out[i] = r
	}
	s.countResults(out)
	return out, nil
}

// agentRefusal is the EForbidden of an agents' write that
// reckon_check_agent_events refused, or nil when err is not one.
func agentRefusal(err error) error {
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) {
		return nil
	}
	switch pgErr.Code {
	case recordedRunCode, gatewaySourceCode:
		return kernel.Errorf(kernel.EForbidden, "%s", pgErr.Message)
	case otherSourceCode:
		// The function's message names the run's owner: kept for the
		// server's log, never answered to the writer, which may be a
		// hostile agent probing whose runs are whose.
		return kernel.Redacted(kernel.Errorf(kernel.EForbidden, "%s", otherSourceRefusal),
			kernel.Errorf(kernel.EForbidden, "%s", pgErr.Message))
	}
	return nil
}

// otherSourceRefusal is what a writer refused with RK002 is told. Only
// this race (a claim landing between the ingest's own check and its
// write) reaches it; that check names the run.
const otherSourceRefusal = "an event lies in a run that belongs to another source (the source of its first event), or in a child run of one, and only that source writes its events — report this run's operations under a run id of your own"

// SQLSTATEs of the agents' write's refusals (reckon_check_agent_events): a
// kernel or gateway run, another source's run, the MCP gateway's source
// (migration 00031).
const (
	recordedRunCode   = "RK001"
	otherSourceCode   = "RK002"
	gatewaySourceCode = "RK003"
)

// queueAgentChecks queues, ahead of the insert, the check of the agents'
// events among preps (checkAgentEventsSQL): the refusal of kernel and
// gateway runs over their runs' AncestryPairs, and the claim of their runs
// for their sources, one entry per (run, source) in the order of the
// events.
func queueAgentChecks(b *pgx.Batch, preps []prepared) {
	var guarded []kernel.RunKey
	type runSource struct{ project, run, source string }
	seen := map[runSource]bool{}
	var projects, runs, sources []string
	for _, p := range preps {
		if !p.agent {
			continue
		}
		guarded = append(guarded, kernel.RunKey{Project: p.ev.Project, RunID: p.ev.RunID})
		if k := (runSource{p.ev.Project, p.ev.RunID, p.ev.SourceID}); !seen[k] {
			seen[k] = true
			projects, runs, sources = append(projects, k.project), append(runs, k.run), append(sources, k.source)
		}
	}
	if len(guarded) == 0 {
		return
	}
	ap, ar := kernel.AncestryPairs(guarded)
	b.Queue(checkAgentEventsSQL, ap, ar, projects, runs, sources)
}

// countResults adds a batch's answers to the results metric, one Add per
// status.
func (s *Store) countResults(out []kernel.IngestResult) {
	counts := map[string]float64{}
	for _, r := range out {
		counts[r.Status]++
	}
	for st, c := range counts {
		s.results.WithLabelValues(st).Add(c)
	}
}

// conflictReason is the reason of a conflict answer.
func conflictReason(k kernel.EventKey) string {
	return fmt.Sprintf("event %s is already in the journal with a different payload; nothing was overwritten", k)
}

func readDigests(ctx context.Context, q querier, sql string, keys []kernel.EventKey, into map[kernel.EventKey][]byte) error {
	srcs, ids := make([]string, len(keys)), make([]string, len(keys))
	for i, k := range keys {
		srcs[i], ids[i] = k.SourceID, k.EventID
	}
	rows, err := q.Query(ctx, sql, srcs, ids)
	if err != nil {
		return fmt.Errorf("ingest batch: re-read digests: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var k kernel.EventKey
		var d []byte
		if err := rows.Scan(&k.SourceID, &k.EventID, &d); err != nil {
			return fmt.Errorf("ingest batch: re-read digests: %w", err)
		}
		into[k] = d
	}
	return rows.Err()
}

// StoredEvent is an event as read back from the journal, with its
// position: kernel.StoredEvent, the form in which the journal's readers
// take events.
type StoredEvent = kernel.StoredEvent

func scanEvents(rows pgx.Rows) ([]StoredEvent, error) {
	defer rows.Close()
	var out []StoredEvent
	for rows.Next() {
		var e StoredEvent
		var psrc, pid *string
		// Data is scanned as bytes: into a json.RawMessage, pgx runs it
		// through json.Unmarshal, validating again what PostgreSQL's jsonb
		// output guarantees, about a quarter of the client's CPU for
		// reading a run (BenchmarkRunEvents).
		if err := rows.Scan(&e.SourceID, &e.EventID, &e.Project, &e.RunID, &e.Type, &e.TS, &e.Actor,
			&psrc, &pid, (*[]byte)(&e.Data), &e.Seq, &e.IngestedAt); err != nil {
			return nil, fmt.Errorf("scan event: %w", err)
		}
		e.TS, e.IngestedAt = e.TS.UTC(), e.IngestedAt.UTC()
		if psrc != nil && pid != nil {
			e.ParentEventID = &kernel.EventKey{SourceID: *psrc, EventID: *pid}
		}
		out = append(out, e)
	}
	return out, rows.Err()
}

// RunEvents returns every event of a run in journal order.
func (s *Store) RunEvents(ctx context.Context, project, runID string) ([]StoredEvent, error) {
	rows, err := s.pool.Query(ctx, runEventsSQL, project, runID)
	if err != nil {
		return nil, fmt.Errorf("run events %s/%s: %w", project, runID, err)
	}
	return scanEvents(rows)
}

// RunEventsPage returns at most limit of a run's events after seq, in
// journal order (GET /v1/runs/{run_id} pages through them).
func (s *Store) RunEventsPage(ctx context.Context, project, runID string, afterSeq int64, limit int) ([]StoredEvent, error) {
	rows, err := s.pool.Query(ctx, runEventsPageSQL, project, runID, afterSeq, limit)
	if err != nil {
		return nil, fmt.Errorf("run events %s/%s after %d: %w", project, runID, afterSeq, err)
	}
	return scanEvents(rows)
}

// RunTerminal reports whether the journal knows the run at all and the
// type of its newest run.completed or run.failed ("" while neither).
func (s *Store) RunTerminal(ctx context.Context, project, runID string) (known bool, terminal string, err error) {
	var t *string
	if err := s.pool.QueryRow(ctx, runTerminalSQL, project, runID).Scan(&known, &t); err != nil {
		return false, "", fmt.Errorf("run status %s/%s: %w", project, runID, err)
	}
	if t != nil {
		terminal = *t
	}
	return known, terminal, nil
}

// EventsOfType returns a project's events of one type at or after since,
// newest first, at most limit.
func (s *Store) EventsOfType(ctx context.Context, project, typ string, since time.Time, limit int) ([]StoredEvent, error) {
	rows, err := s.pool.Query(ctx, typeEventsSQL, project, typ, since, limit)
	if err != nil {
		return nil, fmt.Errorf("%s events of %s: %w", typ, project, err)
	}
	return scanEvents(rows)
}

// Querier is a pool or a transaction: the journal's reads that must see
// the caller's transaction (the reconcile rules) take one.
type Querier interface {
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
}

// OperationEvents returns one operation's events in journal order, read
// through q (the pool or the caller's transaction).
func OperationEvents(ctx context.Context, q Querier, project, runID, operationID string) ([]StoredEvent, error) {
	rows, err := q.Query(ctx, operationEventsSQL, project, runID, operationID)
	if err != nil {
		return nil, fmt.Errorf("events of operation %s/%s/%s: %w", project, runID, operationID, err)
	}
	return scanEvents(rows)
}

// OperationsEvents returns the events of several operations of one run
// in journal order, read through q.
func OperationsEvents(ctx context.Context, q Querier, project, runID string, operationIDs []string) ([]StoredEvent, error) {
	rows, err := q.Query(ctx, operationsEventsSQL, project, runID, operationIDs)
	if err != nil {
		return nil, fmt.Errorf("events of %d operations of %s/%s: %w", len(operationIDs), project, runID, err)
	}
	return scanEvents(rows)
}

// QueueOperationsEvents is OperationsEvents queued on a batch (a caller's
// lock and reads in one round trip): into is set when the batch's results
// are read.
func QueueOperationsEvents(b *pgx.Batch, project, runID string, operationIDs []string, into *[]StoredEvent) {
	queueEvents(b, into, fmt.Sprintf("events of %d operations of %s/%s", len(operationIDs), project, runID),
		operationsEventsSQL, project, runID, operationIDs)
}

// QueueRunEvents is RunEvents queued on a batch, read through whichever
// connection sends it (the triage sweep reads a run on the connection that
// holds the run's lock, in the round trip that takes it).
func QueueRunEvents(b *pgx.Batch, project, runID string, into *[]StoredEvent) {
	queueEvents(b, into, fmt.Sprintf("run events %s/%s", project, runID), runEventsSQL, project, runID)
}

func queueEvents(b *pgx.Batch, into *[]StoredEvent, what, sql string, args ...any) {
	b.Queue(sql, args...).Query(func(rows pgx.Rows) error {
		evs, err := scanEvents(rows)
		if err != nil {
			return fmt.Errorf("%s: %w", what, err)
		}
		*into = evs
		return nil
	})
}

// VerdictsNaming returns a run's supervisor.verdict events that name the
// operation, in journal order, read through q.
func VerdictsNaming(ctx context.Context, q Querier, project, runID, operationID string) ([]StoredEvent, error) {
	rows, err := q.Query(ctx, verdictsNamingSQL, project, runID, operationID)
	if err != nil {
		return nil, fmt.Errorf("verdicts naming %s/%s/%s: %w", project, runID, operationID, err)
	}
	return scanEvents(rows)
}

// Event reads one event by key; kernel ENotFound when absent.
func (s *Store) Event(ctx context.Context, key kernel.EventKey) (StoredEvent, error) {
	rows, err := s.pool.Query(ctx, eventSQL, key.SourceID, key.EventID)
	if err != nil {
		return StoredEvent{}, fmt.Errorf("event %s: %w", key, err)
	}
	evs, err := scanEvents(rows)
	if err != nil {
		return StoredEvent{}, err
	}
	if len(evs) == 0 {
		return StoredEvent{}, kernel.Errorf(kernel.ENotFound, "no event %s in the journal", key)
	}
	return evs[0], nil
}

// RepairOpenHints clears open hints left by concurrent ingest races and
// returns how many it cleared. Run it periodically (the publisher's
// maintenance loop does).
func (s *Store) RepairOpenHints(ctx context.Context) (int64, error) {
	tag, err := s.pool.Exec(ctx, repairOpenSQL)
	if err != nil {
		return 0, fmt.Errorf("repair open hints: %w", err)
	}
	return tag.RowsAffected(), nil
}

const eventCursorPrefix = "ev1:"

// EncodeEventCursor is the cursor of the events after journal seq.
func EncodeEventCursor(seq int64) string {
	return kernel.EncodeSeqCursor(eventCursorPrefix, seq)
}

// DecodeEventCursor returns the journal seq a cursor continues after; a
// cursor this server did not make is EInvalid.
func DecodeEventCursor(c string) (int64, error) {
	if seq, ok := kernel.DecodeSeqCursor(c, eventCursorPrefix); ok {
		return seq, nil
	}
	return 0, kernel.Errorf(kernel.EInvalid, "cursor %q is not a next_cursor of GET /v1/runs/{run_id}; start without one", kernel.Abbreviate(c, 64))
}

// IngestOutboxTx writes outbox rows (ids, and keys[i] the key of ids[i])
// into the journal inside tx, reading them in the database
// (ingestOutboxSQL): the in-process publisher's delivery, which spares each
// event the trip out of the server, the decode, the second Prepare and the
// trip back. It answers per row, in ids' order, as Ingest would have for
// the rows' events. The rows must have been enqueued by this version's
// outbox.Enqueue (their prepared columns set) and be locked by the caller.
// Nothing is validated again: Enqueue validated every row, and whoever can
// write the outbox table directly can write the journal's too. A row the
// journal's table refuses (possible only for a row written past Enqueue)
// fails the whole statement with the database's error, and the caller
// delivers the batch the checked way instead.
func (s *Store) IngestOutboxTx(ctx context.Context, tx pgx.Tx, ids []int64, keys []kernel.EventKey) ([]kernel.IngestResult, error) {
	if len(ids) != len(keys) {
		return nil, fmt.Errorf("ingest outbox rows: %d ids and %d keys", len(ids), len(keys))
	}
	if len(ids) == 0 {
		return nil, nil
	}
	inserted := make(map[kernel.EventKey]bool, len(ids))
	// First on the condition that every key is new (ingestOutboxNewSQL
	// says why), under a savepoint in the same round trip; a key already
	// journaled rolls that back, and the rows are written the way that
	// skips such keys and answers them below.
	b := &pgx.Batch{}
	b.Queue(outboxNewSavepointSQL)
	pgplan.QueueInserted(b, inserted, plannedTable, ingestOutboxNewSQL, ids)
	b.Queue(outboxNewReleaseSQL)
	err := tx.SendBatch(ctx, b).Close()
	if isJournalKeyViolation(err) {
		// The rollback alone first: pgx prepares a batch's statements
		// before it runs them, which the aborted transaction refuses.
		clear(inserted)
		if _, err := tx.Exec(ctx, outboxNewRollbackSQL); err != nil {
			return nil, fmt.Errorf("ingest %d outbox rows: %w", len(ids), err)
		}
		b = &pgx.Batch{}
		b.Queue(outboxNewReleaseSQL)
		pgplan.QueueInserted(b, inserted, plannedTable, ingestOutboxSQL, ids)
		err = tx.SendBatch(ctx, b).Close()
	}
	if err != nil {
		return nil, fmt.Errorf("ingest %d outbox rows: %w", len(ids), err)
	}
	var missing []int64
	for i, id := range ids {
		if !inserted[keys[i]] {
			missing = append(missing, id)
		}
	}
	same := make(map[int64]bool, len(missing))
	if len(missing) > 0 {
		dr, err := tx.Query(ctx, outboxDigestsSQL, missing)
		if err != nil {
			return nil, fmt.Errorf("ingest outbox rows: read digests: %w", err)
		}
		var id int64
		var eq bool
		if _, err := pgx.ForEachRow(dr, []any{&id, &eq}, func() error { same[id] = eq; return nil }); err != nil {
			return nil, fmt.Errorf("ingest outbox rows: read digests: %w", err)
		}
	}
	out := make([]kernel.IngestResult, len(ids))
	for i, id := range ids {
		k := keys[i]
		res := kernel.IngestResult{SourceID: k.SourceID, EventID: k.EventID}
		eq, found := same[id]
		switch {
		case inserted[k]:
			res.Status = kernel.StatusAccepted
		case !found:
			// Neither inserted nor in the journal: not a row this
			// statement could see (the caller passed a row it did not
			// lock, or one gone since).
			return nil, fmt.Errorf("ingest outbox rows: row %d (%s) was neither written nor found in the journal", id, k)
		case eq:
			res.Status = kernel.StatusRepeated
		default:
			res.Status = kernel.StatusConflict
			res.Reason = conflictReason(k)
		}
		out[i] = res
	}
	s.countResults(out)
	return out, nil
}

// abortedWhole reports whether err is PostgreSQL aborting a transaction
// whole for what another one did at the same time (a deadlock or a
// serialization failure): nothing of it was written, and running it
// again is safe.
func abortedWhole(err error) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && (pgErr.Code == deadlockDetected || pgErr.Code == serializationFailure)
}

// isJournalKeyViolation reports whether err is a unique violation of the
// journal's event keys: a key written before (ingestOutboxNewSQL).
func isJournalKeyViolation(err error) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && pgErr.Code == uniqueViolation && pgErr.ConstraintName == journalKeyConstraint
}
