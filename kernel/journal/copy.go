package journal

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/seed-7bc021c3/reckon/kernel"
	"github.com/seed-7bc021c3/reckon/kernel/pgplan"
)

// copyMin is the fewest distinct events a call writes with COPY (see
// ingestCopy); smaller batches go through the ingest statement, whose one
// round trip costs less than the copy's four. Where they cross, measured
// (alternated rounds of 40 agents' batches, 2026-12-02): 65 events 3.4–3.8
// ms a batch by statement against 3.7–4.0 by COPY, 100 events 4.7–5.2
// against 4.8–5.1, 128 events 6.1–6.3 against 5.9–6.3, 300 events 11.7–12.0
// against 11.4, 500 events 16.0 against 14.6.
const copyMin = 128

// journalColumns are the columns a copied batch fills, in copyRows' order.
var journalColumns = []string{"source_id", "event_id", "project", "run_id", "type", "ts", "actor",
	"parent_source_id", "parent_event_id", "data", "payload_digest", "operation_id", "settles", "open"}

// ingestLarge writes a batch too large for group commit: with COPY when
// it has copyMin distinct events or more and none is in the journal yet,
// otherwise (or when the copy meets a key already written) through the
// ingest statement.
func (s *Store) ingestLarge(ctx context.Context, preps []prepared) ([]kernel.IngestResult, error) {
	d := distinct(preps)
	if len(d.order) >= copyMin {
		res, ok, err := s.ingestCopy(ctx, preps, d)
		if ok || err != nil {
			return res, err
		}
	}
	return s.ingestRetry(ctx, preps)
}

// ingestCopy writes a batch whose keys are all new with COPY, in a
// transaction of its own: the agents' check first (as in the ingest
// statement's batch), the copy, then settleCopiedSQL, which gives the open
// hints the state the ingest statement would have given them, then the
// commit. It answers ok=false, having written nothing, when the copy met a
// key already in the journal (or a deadlock over one): COPY has no ON
// CONFLICT, so a batch holding a repeat or a conflict is answered by the
// ingest statement instead, which reads the stored digests.
//
// Why COPY: a large batch's time was the client's work (preparing 500
// events, encoding 15 arrays) and then the server's (the insert), one
// after the other; COPY streams the rows, so the server inserts the first
// ones while the client still encodes the rest, and it inserts them in
// bulk rather than one speculative insertion each. A batch of repeats
// (a client retrying a call that had been written) pays for the copy it
// throws away, then for the statement: that is the rare case.
func (s *Store) ingestCopy(ctx context.Context, preps []prepared, d distinctRows) ([]kernel.IngestResult, bool, error) {
	conn, err := s.pool.Acquire(ctx)
	if err != nil {
		return nil, false, fmt.Errorf("ingest batch of %d: %w", len(preps), err)
	}
	defer conn.Release()
	c := conn.Conn()

	fail := func(err error) ([]kernel.IngestResult, bool, error) {
		// The transaction is rolled back here, or the connection closed if
		// that fails, so that the pool never gets it back inside one.
		if _, rbErr := c.Exec(context.WithoutCancel(ctx), "ROLLBACK"); rbErr != nil {
			_ = c.Close(context.WithoutCancel(ctx))
		}
		var pgErr *pgconn.PgError
		if errors.As(err, &pgErr) && (pgErr.Code == "23505" || pgErr.Code == "40P01" || pgErr.Code == "40001") {
			return nil, false, nil
		}
		if refusal := agentRefusal(err); refusal != nil {
			return nil, false, refusal
		}
		return nil, false, fmt.Errorf("ingest batch of %d: %w", len(preps), err)
	}

	b := &pgx.Batch{}
	b.Queue("BEGIN")
	queueAgentChecks(b, preps)
	if err := c.SendBatch(ctx, b).Close(); err != nil {
		return fail(err)
	}
	src := &copyRows{preps: preps, d: d}
	if _, err := c.CopyFrom(ctx, pgx.Identifier{"journal_events"}, journalColumns, src); err != nil {
		return fail(err)
	}
	b = &pgx.Batch{}
	projects, runs, ops := src.touched()
	pgplan.Queue(b, "journal_events", settleCopiedSQL, projects, runs, ops)
	b.Queue("COMMIT")
	if err := c.SendBatch(ctx, b).Close(); err != nil {
		return fail(err)
	}
	if c.PgConn().TxStatus() != 'I' {
		// COMMIT of a failed transaction answers ROLLBACK without an
		// error; nothing was written.
		return fail(errors.New("the transaction was rolled back at commit"))
	}
	inserted := make(map[kernel.EventKey]bool, len(d.first))
	for k := range d.first {
		inserted[k] = true
	}
	res, err := s.answer(ctx, s.pool, preps, d.first, inserted)
	return res, true, err
}

// copyRows is a batch's distinct events as COPY rows (pgx.CopyFromSource),
// in journal order, with the columns of journalColumns.
type copyRows struct {
	preps []prepared
	d     distinctRows
	i     int
	row   [14]any
}

// Next advances to the next row.
func (r *copyRows) Next() bool {
	r.i++
	return r.i <= len(r.d.order)
}

// Values is the current row. Its slice is reused by the next call: pgx
// encodes each row before it asks for the next.
func (r *copyRows) Values() ([]any, error) {
	j := r.i - 1
	p := r.preps[r.d.order[j]]
	e := p.ev
	var psrc, pid, op any
	if e.ParentEventID != nil {
		psrc, pid = e.ParentEventID.SourceID, e.ParentEventID.EventID
	}
	if p.OperationID != "" {
		op = p.OperationID
	}
	r.row = [14]any{e.SourceID, e.EventID, e.Project, e.RunID, e.Type, e.TS, e.Actor, psrc, pid,
		p.CanonicalData, p.Digest, op, p.Settles, e.Type == kernel.TypeToolStarted && r.d.openInBatch[j]}
	return r.row[:], nil
}

// Err is always nil: the rows are prepared before the copy starts.
func (r *copyRows) Err() error { return nil }

// touched lists, once each, the operations whose open hints the copy may
// have left stale: those a copied event settles (a tool.started written
// earlier may be open) and those of a copied tool.started written open (a
// settling event may be in the journal already).
func (r *copyRows) touched() (projects, runs, ops []string) {
	seen := map[[3]string]bool{}
	for j, i := range r.d.order {
		p := r.preps[i]
		if p.OperationID == "" {
			continue
		}
		if !p.Settles && (p.ev.Type != kernel.TypeToolStarted || !r.d.openInBatch[j]) {
			continue
		}
		k := [3]string{p.ev.Project, p.ev.RunID, p.OperationID}
		if !seen[k] {
			seen[k] = true
			projects, runs, ops = append(projects, k[0]), append(runs, k[1]), append(ops, k[2])
		}
	}
	return projects, runs, ops
}
