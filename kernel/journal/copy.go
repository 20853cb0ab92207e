package journal

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/seed-7bc021c3/reckon/kernel"
	"github.com/seed-7bc021c3/reckon/kernel/pgplan"
)

// copyMin is the fewest events a call writes with COPY (see
// ingestCopy); smaller batches go through the ingest statement, whose one
// round trip costs less than the copy's four. The two cost about the same
// at this size.
const copyMin = 128

// journalColumns are the columns a copied batch fills (copyEventsSQL's).
var journalColumns = []string{"seq", "source_id", "event_id", "project", "run_id", "type", "ts", "actor",
	"parent_source_id", "parent_event_id", "data", "payload_digest", "operation_id", "settles", "open"}

// ingestLarge writes a batch too large for group commit: with COPY when
// it has copyMin events or more and none is in the journal yet, otherwise
// (or when the copy meets a key already written) through the ingest
// statement.
func (s *Store) ingestLarge(ctx context.Context, preps []prepared) ([]kernel.IngestResult, error) {
	if len(preps) >= copyMin {
		res, ok, err := s.ingestCopy(ctx, preps, distinct(preps))
		if ok || err != nil {
			return res, err
		}
	}
	return s.ingestRetry(ctx, preps)
}

// ingestCopy writes a batch whose keys are all new with COPY, in a
// transaction of its own: the copy, then in one batch the agents' check
// (as in the ingest statement's batch), settleCopiedSQL, which gives the
// open hints the state the ingest statement would have given them, and
// the commit. It answers ok=false, having written nothing, when the copy
// met a key already in the journal (or a deadlock over one): COPY has no
// ON CONFLICT, so a batch holding a repeat or a conflict is answered by
// the ingest statement instead, which reads the stored digests.
//
// The agents' check comes after the copy, sparing a round trip, and
// decides the same as before it; why that holds, why COPY, and what a
// repeat costs: docs/internals.md#journal. TestCopyAgentChecks,
// TestCopyGivesWayToTheStatement, TestCopyConcurrentOverlappingBatches.
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
		if errors.As(err, &pgErr) && pgErr.Code == uniqueViolation || abortedWhole(err) {
			return nil, false, nil
		}
		if refusal := agentRefusal(err); refusal != nil {
			return nil, false, refusal
		}
		return nil, false, fmt.Errorf("ingest batch of %d: %w", len(preps), err)
	}

	// Four round trips: the batch's sequence numbers, drawn outside the
	// transaction (a rolled back batch leaves a gap, as any does); the
	// transaction's BEGIN rides in the keys' copy query string, the
	// events' copy follows; the agents' check, the settle statement and
	// the commit go in one batch after them.
	seqs, err := reserveSeqs(ctx, c, len(d.order))
	if err != nil {
		return nil, false, fmt.Errorf("ingest batch of %d: %w", len(preps), err)
	}
	if _, err := c.PgConn().CopyFrom(ctx, bytes.NewReader(keyCopyData(preps, d, seqs)), beginCopyKeysSQL); err != nil {
		return fail(err)
	}
	if _, err := c.PgConn().CopyFrom(ctx, bytes.NewReader(copyData(preps, d, seqs)), copyEventsSQL); err != nil {
		return fail(err)
	}
	b := &pgx.Batch{}
	queueAgentChecks(b, preps)
	projects, runs, ops := touched(preps, d)
	rp, rr, rn := copiedRuns(preps, d, projects, runs)
	pgplan.Queue(b, plannedTable, settleCopiedSQL, projects, runs, ops, rp, rr, rn)
	b.Queue("COMMIT")
	if err := c.SendBatch(ctx, b).Close(); err != nil {
		return fail(err)
	}
	if c.PgConn().TxStatus() != 'I' {
		// COMMIT of a failed transaction answers ROLLBACK without an
		// error; nothing was written.
		return fail(errors.New("the transaction was rolled back at commit"))
	}
	res, err := s.answer(ctx, s.pool, preps, d.first, func(kernel.EventKey) bool { return true })
	return res, true, err
}

// beginCopyKeysSQL begins the copy's transaction and copies a batch's
// keys (keyCopyData) into the key table, in one simple query: pgx sends
// the rows without waiting for the server's CopyInResponse, so the BEGIN
// costs no round trip of its own. A key already there fails the copy
// (the batch then goes the way that answers each key); the events follow
// (copyEventsSQL), their keys all new.
var beginCopyKeysSQL = `BEGIN; COPY journal_keys (` + strings.Join(keyColumns, ", ") + `) FROM STDIN (FORMAT binary)`

// copyEventsSQL copies a batch's rows (copyData) into the journal.
var copyEventsSQL = `COPY journal_events (` + strings.Join(journalColumns, ", ") + `) FROM STDIN (FORMAT binary)`

// keyColumns are the columns of the key table a copied batch fills.
var keyColumns = []string{"source_id", "event_id", "project", "run_id", "seq", "payload_digest"}

// reserveSeqs draws n journal sequence numbers, in order (reserveSeqsSQL).
func reserveSeqs(ctx context.Context, c *pgx.Conn, n int) ([]int64, error) {
	rows, err := c.Query(ctx, reserveSeqsSQL, n)
	if err != nil {
		return nil, fmt.Errorf("draw %d sequence numbers: %w", n, err)
	}
	seqs, err := pgx.CollectRows(rows, pgx.RowTo[int64])
	if err != nil {
		return nil, fmt.Errorf("draw %d sequence numbers: %w", n, err)
	}
	if len(seqs) != n {
		return nil, fmt.Errorf("draw %d sequence numbers: got %d", n, len(seqs))
	}
	return seqs, nil
}

// copyHeader starts a COPY binary stream of about n bytes.
func copyHeader(n int) []byte {
	buf := make([]byte, 0, n)
	buf = append(buf, "PGCOPY\n\377\r\n\000"...)
	buf = binary.BigEndian.AppendUint32(buf, 0)  // flags
	return binary.BigEndian.AppendUint32(buf, 0) // header extension
}

// keyCopyData is a batch's distinct keys in COPY's binary format with
// keyColumns, in journal order.
func keyCopyData(preps []prepared, d distinctRows, seqs []int64) []byte {
	n := 19 + 2
	for _, i := range d.order {
		e := preps[i].ev
		n += 2 + 4*len(keyColumns) + len(e.SourceID) + len(e.EventID) + len(e.Project) + len(e.RunID) + 8 + len(preps[i].Digest)
	}
	buf := copyHeader(n)
	field := func(b []byte) {
		buf = binary.BigEndian.AppendUint32(buf, uint32(len(b)))
		buf = append(buf, b...)
	}
	for j, i := range d.order {
		e := preps[i].ev
		buf = binary.BigEndian.AppendUint16(buf, uint16(len(keyColumns)))
		field([]byte(e.SourceID))
		field([]byte(e.EventID))
		field([]byte(e.Project))
		field([]byte(e.RunID))
		buf = binary.BigEndian.AppendUint32(buf, 8)
		buf = binary.BigEndian.AppendUint64(buf, uint64(seqs[j]))
		field(preps[i].Digest)
	}
	return binary.BigEndian.AppendUint16(buf, math.MaxUint16) // the trailer, -1
}

// copyData is a batch's distinct events, in journal order, as COPY's
// binary format with copyEventsSQL's columns. Written by hand rather than
// through pgx's CopyFrom, whose encoding goes through a []any a row and an
// encode plan a value: CPU the server's side of the copy competes for.
// Each value is what pgx sends for the same Go value in the ingest
// statement's arrays (text as its bytes, ts as microseconds since
// 2000-01-01 UTC truncated as pgx truncates, jsonb as version 1 and the
// canonical JSON, bytea as its bytes), so both paths store the same rows
// (TestCopyWritesWhatTheStatementWrites compares them column by column).
func copyData(preps []prepared, d distinctRows, seqs []int64) []byte {
	// The exact size: the header (19 bytes) and trailer (2); per row its
	// field count (2), a length word per field, and the values (seq and
	// ts 8 bytes each, jsonb's version byte, two booleans).
	n := 19 + 2
	for _, i := range d.order {
		p := preps[i]
		e := p.ev
		n += 2 + 4*len(journalColumns) + len(e.SourceID) + len(e.EventID) + len(e.Project) + len(e.RunID) +
			len(e.Type) + 8 + 8 + len(e.Actor) + 1 + len(p.CanonicalData) + len(p.Digest) + len(p.OperationID) + 2
		if e.ParentEventID != nil {
			n += len(e.ParentEventID.SourceID) + len(e.ParentEventID.EventID)
		}
	}
	buf := copyHeader(n)
	text := func(s string) {
		buf = binary.BigEndian.AppendUint32(buf, uint32(len(s)))
		buf = append(buf, s...)
	}
	null := func() { buf = binary.BigEndian.AppendUint32(buf, math.MaxUint32) } // length -1
	boolean := func(v bool) {
		buf = binary.BigEndian.AppendUint32(buf, 1)
		if v {
			buf = append(buf, 1)
		} else {
			buf = append(buf, 0)
		}
	}
	for j, i := range d.order {
		p := preps[i]
		e := p.ev
		buf = binary.BigEndian.AppendUint16(buf, uint16(len(journalColumns)))
		buf = binary.BigEndian.AppendUint32(buf, 8)
		buf = binary.BigEndian.AppendUint64(buf, uint64(seqs[j]))
		text(e.SourceID)
		text(e.EventID)
		text(e.Project)
		text(e.RunID)
		text(e.Type)
		buf = binary.BigEndian.AppendUint32(buf, 8)
		buf = binary.BigEndian.AppendUint64(buf, uint64(e.TS.Unix()*1_000_000+int64(e.TS.Nanosecond())/1000-microsUnixToY2K))
		text(e.Actor)
		if e.ParentEventID != nil {
			text(e.ParentEventID.SourceID)
			text(e.ParentEventID.EventID)
		} else {
			null()
			null()
		}
		buf = binary.BigEndian.AppendUint32(buf, uint32(1+len(p.CanonicalData)))
		buf = append(buf, 1) // jsonb's binary version
		buf = append(buf, p.CanonicalData...)
		buf = binary.BigEndian.AppendUint32(buf, uint32(len(p.Digest)))
		buf = append(buf, p.Digest...)
		if p.OperationID != "" {
			text(p.OperationID)
		} else {
			null()
		}
		boolean(p.Settles)
		boolean(e.Type == kernel.TypeToolStarted && d.openInBatch[j])
	}
	return binary.BigEndian.AppendUint16(buf, math.MaxUint16) // the trailer, -1
}

// microsUnixToY2K is PostgreSQL's timestamp epoch, 2000-01-01 UTC, in
// microseconds since the Unix epoch.
const microsUnixToY2K = 946_684_800_000_000

// touched lists the operations whose open hints the copy may have left
// stale: those the batch settles (a tool.started written earlier may be
// open; distinct has them already) and those of a copied tool.started
// written open (a settling event may be in the journal already). An
// operation may be listed twice (two open tool.started rows of one
// operation): settleCopiedSQL then finds its rows twice and updates them
// once.
func touched(preps []prepared, d distinctRows) (projects, runs, ops []string) {
	add := func(k [3]string) {
		projects, runs, ops = append(projects, k[0]), append(runs, k[1]), append(ops, k[2])
	}
	for k := range d.settled {
		add(k)
	}
	for j, i := range d.order {
		if p := preps[i]; p.ev.Type == kernel.TypeToolStarted && d.openInBatch[j] && p.OperationID != "" {
			add([3]string{p.ev.Project, p.ev.RunID, p.OperationID})
		}
	}
	return projects, runs, ops
}

// copiedRuns lists the runs of a copied batch that hold one of the
// operations touched lists (touchedProjects, touchedRuns), and how many
// of the batch's rows each holds (settleCopiedSQL's $4..$6): the batch's
// distinct events, all of which the copy wrote. A run with no such
// operation is left out, so that the statement does not count it.
func copiedRuns(preps []prepared, d distinctRows, touchedProjects, touchedRuns []string) (projects, runs []string, copied []int32) {
	at := make(map[[2]string]int, 8)
	for i := range touchedProjects {
		k := [2]string{touchedProjects[i], touchedRuns[i]}
		if _, ok := at[k]; !ok {
			at[k] = len(projects)
			projects, runs, copied = append(projects, k[0]), append(runs, k[1]), append(copied, 0)
		}
	}
	for _, i := range d.order {
		e := preps[i].ev
		if j, ok := at[[2]string{e.Project, e.RunID}]; ok {
			copied[j]++
		}
	}
	return projects, runs, copied
}
