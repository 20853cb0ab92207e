package operations

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/seed-7bc021c3/reckon/kernel"
	"github.com/seed-7bc021c3/reckon/kernel/journal"
	"github.com/seed-7bc021c3/reckon/kernel/outbox"
	"github.com/seed-7bc021c3/reckon/kernel/pgplan"
)

// The triage store: what the scheduled triage needs of the journal beyond
// the listing. A sweep opens TriageLocks; each run it triages is locked
// and read in one round trip (TriageLocks.Lock), its walls are written in
// one transaction each (TriageRun.WriteWall: supervisor.verdict and the
// wall's operation.reconciled events, through the reconcile rules), and
// the run's last wall releases the lock with its commit.
//
// Two sweeps never triage one run at once: a PostgreSQL advisory lock per
// (project, run) is held on a dedicated connection for the whole of the
// run's walls, and that connection reads the run and writes them.

// TriageLocks are the dedicated connections one sweep holds runs' triage
// locks on, one per run in flight, each also reading its run and writing
// its walls: separate from the service's pool, so that a held lock (held
// across a model call) never starves the listing, or an operator's
// ruling, of a connection.
type TriageLocks struct {
	svc  *Service
	pool *pgxpool.Pool
}

// OpenTriageLocks opens at most n lock connections (each when a run first
// needs it). Close them when the sweep is done.
func (s *Service) OpenTriageLocks(ctx context.Context, n int) (*TriageLocks, error) {
	cfg := s.pool.Config()
	cfg.MaxConns = int32(n)
	cfg.MinConns = 0
	p, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("triage: lock connections: %w", err)
	}
	return &TriageLocks{svc: s, pool: p}, nil
}

// Close closes the lock connections.
func (l *TriageLocks) Close() { l.pool.Close() }

// TriageRun is a run under its triage lock, held by the session of one
// lock connection, which also reads the run and writes its walls. Unlock
// it once its walls are done.
type TriageRun struct {
	svc            *Service
	conn           *pgxpool.Conn
	project, runID string
	// held is whether the session may hold the lock: until the lock is
	// known not taken, or released with the run's last wall.
	held bool
	// read is the run as read when the lock was taken, or by the last
	// Reread.
	read RunRead
	// base is read with the events of the walls written since added to
	// its pending ones: what WriteWall writes a wall on in one round trip
	// (QueueReconcileAll). Nil once the run changed under it: the run's
	// next walls are written the checked way, until a Reread.
	base *RunRead
}

// Lock takes the run's triage lock on a lock connection and reads the run
// (Read) in the same round trip. locked is false, and run nil, when
// another sweep holds the lock; the read is then wasted, on the contended
// path only.
func (l *TriageLocks) Lock(ctx context.Context, project, runID string) (run *TriageRun, locked bool, err error) {
	conn, err := l.pool.Acquire(ctx)
	if err != nil {
		return nil, false, fmt.Errorf("triage lock %s/%s: acquire connection: %w", project, runID, err)
	}
	r := &TriageRun{svc: l.svc, conn: conn, project: project, runID: runID, held: true}
	read, locked, err := readRun(ctx, conn, project, runID, true)
	if err != nil {
		r.Unlock(ctx) // the lock may be taken even though a read failed
		return nil, false, err
	}
	if !locked {
		r.held = false
		r.Unlock(ctx)
		return nil, false, nil
	}
	r.reset(read)
	return r, true, nil
}

// Read returns the run as read when its lock was taken, or by the last
// Reread.
func (r *TriageRun) Read() RunRead { return r.read }

// Reread reads the run again on its lock connection (a wall is rebuilt
// after an operator's ruling landed on it) and writes the next walls on
// what it read.
func (r *TriageRun) Reread(ctx context.Context) (RunRead, error) {
	read, _, err := readRun(ctx, r.conn, r.project, r.runID, false)
	if err != nil {
		return RunRead{}, err
	}
	r.reset(read)
	return read, nil
}

func (r *TriageRun) reset(read RunRead) {
	r.read = read
	// Clipped: what later walls add to the base's pending events never
	// reaches the caller's copy of the read.
	r.base = &RunRead{Journaled: read.Journaled, Pending: slices.Clip(read.Pending)}
}

// ReadRun reads a run as TriageLocks.Lock does, without its lock, from the
// service's pool: what a dry-run sweep builds its walls on.
func (s *Service) ReadRun(ctx context.Context, project, runID string) (RunRead, error) {
	read, _, err := readRun(ctx, s.pool, project, runID, false)
	return read, err
}

// batchSender is the pool or one of the lock connections.
type batchSender interface {
	SendBatch(ctx context.Context, b *pgx.Batch) pgx.BatchResults
}

// readRun reads the run in one round trip through q, first taking the
// run's triage lock when lock is set. The reads are statements of their
// own after the lock's, so they see every wall the previous holder
// committed; the run's pending events are read before the journal (see
// outbox.Pending), of every type, not only reconciliations: a wall is
// written on this read, and the reconcile rules look at all of an
// operation's pending events.
func readRun(ctx context.Context, q batchSender, project, runID string, lock bool) (read RunRead, locked bool, err error) {
	var b pgx.Batch
	locked = !lock
	if lock {
		b.Queue(tryTriageLockSQL, triageLockClass, triageLockName(project, runID)).QueryRow(func(row pgx.Row) error { return row.Scan(&locked) })
	}
	// The batch is a transaction of its own (none is open on the lock
	// connection between walls), so the plan settings end with it.
	pgplan.Force(&b, "")
	if err := outbox.QueuePendingForced(&b, outbox.PendingFilter{Project: project, RunID: runID}, &read.Pending); err != nil {
		return RunRead{}, false, fmt.Errorf("triage: pending verdicts of %s/%s: %w", project, runID, err)
	}
	journal.QueueRunEvents(&b, project, runID, &read.Journaled)
	b.Queue(dbClockSQL).QueryRow(func(row pgx.Row) error { return row.Scan(&read.ReadAt) })
	if err := q.SendBatch(ctx, &b).Close(); err != nil {
		return RunRead{}, false, fmt.Errorf("triage: read run %s/%s: %w", project, runID, err)
	}
	read.ReadAt = read.ReadAt.UTC()
	return read, locked, nil
}

// Unlock releases the run's triage lock, if the session may still hold
// it, and gives the connection back to the lock pool. A panic unwinding
// past a deferred Unlock releases the lock too, and a wall's transaction
// left open goes with the connection, which the pool closes as it comes
// back inside one.
func (r *TriageRun) Unlock(ctx context.Context) {
	if r.conn == nil {
		return
	}
	conn := r.conn
	r.conn = nil
	if !r.held {
		conn.Release()
		return
	}
	uctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	var released bool
	if err := conn.QueryRow(uctx, unlockTriageSQL, triageLockClass, triageLockName(r.project, r.runID)).Scan(&released); err != nil || !released {
		// A connection that may still hold the lock must not go back to
		// the pool: closing it releases every session lock.
		_ = conn.Hijack().Close(uctx)
		return
	}
	conn.Release()
}

// triageLockName is length-prefixed so that no two (project, run) pairs
// share it.
func triageLockName(project, runID string) string {
	return fmt.Sprintf("reckon.triage:%d:%s%d:%s", len(project), project, len(runID), runID)
}

// WallWrite says how WriteWall wrote a wall.
type WallWrite struct {
	// Reconciled are the wall's operation.reconciled events, in the order
	// of the requests (an earlier event for a request that repeats one).
	Reconciled []kernel.Event
	// OnRead says the wall was written in one round trip on the run as
	// read under its lock; otherwise it was written the checked way,
	// reading the operations again under their locks.
	OnRead bool
	// Reread says the run had changed since it was read, so the wall went
	// the checked way (set whether or not that then wrote it).
	Reread bool
}

// ErrWallWritten is WriteWall's answer for a wall whose verdict is
// already enqueued (a retried write, or a sweep that got past the lock,
// which the lock prevents): nothing more is written.
var ErrWallWritten = errors.New("this wall's operations already have a supervisor verdict")

// WriteWall journals one wall: verdict (its supervisor.verdict) and one
// operation.reconciled per request, under the rules an operator's ruling
// goes through (ReconcileTx), in ONE transaction on the run's lock
// connection: either the whole wall is written or nothing is. last says
// it is the run's last wall, whose commit releases the run's lock in the
// same round trip.
//
// It writes on the run as read under its lock when it can (writeOnRead),
// the checked way (ReconcileAllTx) otherwise. Errors: ErrWallWritten; an
// EConflict when an operation of the wall is settled already (an
// operator's ruling, which a supervisor never overrides, or another
// reconciliation landed since the run was read): nothing is written, and
// the caller rebuilds the wall on a Reread; any other error.
func (r *TriageRun) WriteWall(ctx context.Context, verdict kernel.Event, reqs []ReconcileParams, last bool) (WallWrite, error) {
	var w WallWrite
	if r.base != nil {
		recs, err := r.writeOnRead(ctx, verdict, reqs, last)
		if !errors.Is(err, errReadStale) {
			w.Reconciled, w.OnRead = recs, err == nil
			return w, err
		}
		// The read is no longer the run: this wall and the run's next
		// ones are written the checked way, until a Reread.
		r.base, w.Reread = nil, true
	}
	recs, err := r.writeChecked(ctx, verdict, reqs, last)
	w.Reconciled = recs
	return w, err
}

// errReadStale says a wall could not be written on the run as read under
// its lock (QueueReconcileAll refused: the run changed since, an event was
// already enqueued, a request repeats a reconciliation or breaks a rule on
// the read); WriteWall then writes it the checked way, reading again
// under the operations' locks.
var errReadStale = errors.New("the run changed since it was read")

// writeOnRead writes the wall on the run as read under its lock, in ONE
// round trip: BEGIN, the operations' locks, a guard that the run has not
// changed since the read, the enqueue, COMMIT and, for the run's last
// wall, the release of the run's lock. What would make the read's
// answers wrong aborts the transaction before its COMMIT (see
// QueueReconcileAll) and is errReadStale, after a rollback; nothing is
// written then.
func (r *TriageRun) writeOnRead(ctx context.Context, verdict kernel.Event, reqs []ReconcileParams, last bool) ([]kernel.Event, error) {
	if len(reqs) == 0 {
		return nil, errReadStale // a verdict alone: ReconcileAllTx writes it
	}
	b := &pgx.Batch{}
	b.Queue("BEGIN")
	done, err := r.svc.QueueReconcileAll(b, *r.base, reqs, verdict)
	if err != nil {
		// A repeat, a rule the read says is broken (a conflict), an
		// invalid request: nothing is sent yet, and the checked way gives
		// each the answer it always has (a conflict rebuilds the wall).
		return nil, errReadStale
	}
	b.Queue("COMMIT")
	if last {
		// Queued behind COMMIT: a statement after an error is not run,
		// so the lock is never released before the wall is committed.
		b.Queue(unlockAllSQL)
	}
	conn := r.conn.Conn()
	if err := conn.SendBatch(ctx, b).Close(); err != nil {
		if conn.PgConn().TxStatus() != 'I' {
			if _, rerr := conn.Exec(context.WithoutCancel(ctx), "ROLLBACK"); rerr != nil {
				return nil, fmt.Errorf("triage: roll back wall of %s/%s: %w (after %v)", r.project, r.runID, rerr, err)
			}
		}
		if Stale(err) {
			return nil, errReadStale
		}
		return nil, fmt.Errorf("triage: write wall of %s/%s: %w", r.project, r.runID, err)
	}
	if last {
		r.held = false
	}
	recs := recordedEvents(done)
	// The next wall of the run is written on the same read: what this one
	// enqueued is the run's pending events now, not a change.
	r.base.Pending = append(append(r.base.Pending, verdict), recs...)
	return recs, nil
}

// writeChecked writes the wall the checked way: the verdict and all of
// the wall's reconciliations in two round trips (ReconcileAllTx: the
// rules of ReconcileTx applied to each, under the operations' locks, the
// verdict enqueued in the same statement), BEGIN riding in the first
// (lazyTx).
func (r *TriageRun) writeChecked(ctx context.Context, verdict kernel.Event, reqs []ReconcileParams, last bool) ([]kernel.Event, error) {
	tx := &lazyTx{conn: r.conn.Conn()}
	if last {
		tx.opts.CommitQuery = commitUnlockSQL
	}
	defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }()
	done, err := r.svc.ReconcileAllTx(ctx, tx, reqs, verdict)
	if err != nil {
		if kernel.ErrorCode(err) != kernel.EConflict {
			return nil, fmt.Errorf("triage: reconcile: %w", err)
		}
		_ = tx.Rollback(ctx)
		// This wall's verdict already enqueued (with another payload) is
		// a wall already written; anything else is the conflict itself.
		// Read only on a conflict, the rare path.
		if _, written, serr := outbox.Stored(ctx, r.svc.pool, verdict.Key()); serr == nil && written {
			return nil, ErrWallWritten
		}
		return nil, err
	}
	if err := tx.Commit(ctx); err != nil {
		return nil, fmt.Errorf("triage: commit wall %s/%s: %w", r.project, r.runID, err)
	}
	if last {
		r.held = false
	}
	return recordedEvents(done), nil
}

// recordedEvents are the events of done.
func recordedEvents(done []Recorded) []kernel.Event {
	out := make([]kernel.Event, len(done))
	for i, r := range done {
		out[i] = r.Event
	}
	return out
}
