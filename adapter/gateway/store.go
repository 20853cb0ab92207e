package gateway

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/seed-7bc021c3/reckon/kernel"
	"github.com/seed-7bc021c3/reckon/kernel/outbox"
)

// All of the gateway's SQL, in one reviewed place. Events go through
// outbox.Enqueue in the same transactions as the bookkeeping rows they
// describe (migrations/00022_gateway.sql).

const registerInstanceSQL = `
INSERT INTO gateway_instances (instance_id, source_id, lease) VALUES ($1, $2, make_interval(secs => $3))`

// sourceOfAgentsSQL tells whether an agent has written runs under the
// source ($1) and no gateway has ever registered it: a gateway starting
// with it would make those agents' later writes refused (RK003).
const sourceOfAgentsSQL = `
SELECT EXISTS (SELECT 1 FROM agent_runs WHERE source_id = $1)
   AND NOT EXISTS (SELECT 1 FROM gateway_instances WHERE source_id = $1)`

const heartbeatSQL = `
UPDATE gateway_instances SET heartbeat_at = now() WHERE instance_id = $1 AND stopped_at IS NULL`

const stopInstanceSQL = `
UPDATE gateway_instances SET stopped_at = now() WHERE instance_id = $1 AND stopped_at IS NULL`

// insertRunSQL records a run; a concurrent or earlier insert of the same
// run wins and this one returns no row (its run.started is then not
// enqueued again).
const insertRunSQL = `
INSERT INTO gateway_runs (project, run_id, source_id, kind, instance_id)
VALUES ($1, $2, $3, $4, nullif($5, ''))
ON CONFLICT (project, run_id) DO NOTHING
RETURNING true`

// claimRunKeySQL takes, for the rest of the transaction, the lock a run
// id's claimants share: a kernel run's start holds it (kernel/runner's
// lockRunStartSQL) and an agent's write into the run tries it shared
// (reckon_refuse_kernel_runs, migrations 00028 and 00029), so the key's
// expression must stay the same in all three places. Taken before the
// gateway looks the run up to record it: a write of someone else's events
// under way then commits first and is seen, and one tried meanwhile is
// refused.
const claimRunKeySQL = `SELECT pg_advisory_xact_lock(hashtextextended($1::text || '/' || $2::text, 0))`

// nextOpSQL takes the run's next operation number under the row lock,
// which serializes concurrent calls of one run until their tool.started
// commits. The run's kind comes back so a call can be refused (and the
// increment rolled back) when it names a run of another kind.
const nextOpSQL = `
UPDATE gateway_runs SET last_op = last_op + 1
WHERE project = $1 AND run_id = $2
RETURNING last_op, ended_at IS NOT NULL, kind`

// runTakenSQL tells whether the journal has events of the run (the runs
// index holds a row for every run with an event; its events still in the
// outbox come from outbox.Pending, read first) or the run is a kernel
// run: a start records its kernel_runs row, under the same lock as a
// claim, before its workflow has written any event.
const runTakenSQL = `SELECT EXISTS (SELECT 1 FROM journal_runs WHERE project = $1 AND run_id = $2)
    OR EXISTS (SELECT 1 FROM kernel_runs WHERE project = $1 AND run_id = $2)`

const asyncCommitSQL = `SET LOCAL synchronous_commit TO off`

const endRunSQL = `
UPDATE gateway_runs SET ended_at = now()
WHERE project = $1 AND run_id = $2 AND ended_at IS NULL
RETURNING true`

// reapSQL ends the open session runs of dead instances (stopped, or
// heartbeat older than their lease; never this instance), returning what
// run.failed must say.
const reapSQL = `
UPDATE gateway_runs r SET ended_at = now()
FROM gateway_instances i
WHERE r.instance_id = i.instance_id AND r.kind = 'session' AND r.ended_at IS NULL
  AND i.instance_id <> $1
  AND (i.stopped_at IS NOT NULL OR i.heartbeat_at + i.lease < now())
RETURNING r.project, r.run_id, r.source_id, i.instance_id, i.heartbeat_at, extract(epoch FROM i.lease)::float8, i.stopped_at IS NOT NULL`

// pruneInstancesSQL forgets instances dead for a day that hold no open
// run. Runs are kept: their counters keep operation ids unique.
const pruneInstancesSQL = `
DELETE FROM gateway_instances i
WHERE i.instance_id <> $1
  AND coalesce(i.stopped_at, i.heartbeat_at + i.lease) < now() - interval '1 day'
  AND NOT EXISTS (SELECT 1 FROM gateway_runs r
                  WHERE r.instance_id = i.instance_id AND r.kind = 'session' AND r.ended_at IS NULL)`

// errRunEnded refuses a call in a run whose end is recorded: its
// tool.started would be in the crash window the moment it was written.
var errRunEnded = errors.New("run has ended")

// errRunUsed refuses a client-named run id that already has events the
// gateway did not write as that run.
var errRunUsed = errors.New("run id already used")

// errRunSession refuses a client-named run id that is an MCP session's
// run: only that session writes into it (a call never names another
// session's run; its own run id is not a client-named run).
var errRunSession = errors.New("run id is an MCP session's run")

// store is the gateway's database side.
type store struct {
	pool *pgxpool.Pool
}

func (s store) registerInstance(ctx context.Context, id, source string, lease time.Duration) error {
	if _, err := s.pool.Exec(ctx, registerInstanceSQL, id, source, lease.Seconds()); err != nil {
		return fmt.Errorf("register gateway instance: %w", err)
	}
	return nil
}

// agentsSource reports whether source is an agent's, as the journal's
// run owners say.
func (s store) agentsSource(ctx context.Context, source string) (bool, error) {
	var taken bool
	if err := s.pool.QueryRow(ctx, sourceOfAgentsSQL, source).Scan(&taken); err != nil {
		return false, fmt.Errorf("check the gateway's source: %w", err)
	}
	return taken, nil
}

// heartbeat renews the instance's lease; false means the instance is
// marked stopped.
func (s store) heartbeat(ctx context.Context, id string) (bool, error) {
	tag, err := s.pool.Exec(ctx, heartbeatSQL, id)
	if err != nil {
		return false, fmt.Errorf("gateway heartbeat: %w", err)
	}
	return tag.RowsAffected() == 1, nil
}

func (s store) stopInstance(ctx context.Context, id string) error {
	if _, err := s.pool.Exec(ctx, stopInstanceSQL, id); err != nil {
		return fmt.Errorf("mark gateway instance stopped: %w", err)
	}
	return nil
}

// startRun records a session run and its run.started in one transaction;
// nothing is written when the run is already recorded.
func (s store) startRun(ctx context.Context, project, runID, source, instance string, started kernel.Event) error {
	return pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		if err := claimRunKey(ctx, tx, project, runID); err != nil {
			return err
		}
		_, err := s.insertRun(ctx, tx, project, runID, source, kindSession, instance, started)
		return err
	})
}

// claimRunKey takes the run id's claim lock for the rest of tx
// (claimRunKeySQL).
func claimRunKey(ctx context.Context, tx pgx.Tx, project, runID string) error {
	if _, err := tx.Exec(ctx, claimRunKeySQL, project, runID); err != nil {
		return fmt.Errorf("claim run %s/%s: %w", project, runID, err)
	}
	return nil
}

func (s store) insertRun(ctx context.Context, tx pgx.Tx, project, runID, source, kind, instance string, started kernel.Event) (bool, error) {
	var inserted bool
	err := tx.QueryRow(ctx, insertRunSQL, project, runID, source, kind, instance).Scan(&inserted)
	if errors.Is(err, pgx.ErrNoRows) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("record run %s/%s: %w", project, runID, err)
	}
	if err := outbox.Enqueue(ctx, tx, started); err != nil {
		return false, fmt.Errorf("enqueue run.started of %s/%s: %w", project, runID, err)
	}
	return true, nil
}

// beginCall assigns the call its operation id and commits its tool.started
// (built by started from the id) before it returns: only then may the call
// go upstream. A run unknown to the gateway is recorded first, with
// run.started (runStarted) in the same transaction: a session run whose
// start could not be written at initialisation, or a client-named run seen
// for the first time (refused with errRunUsed when the journal or the
// outbox already has events of that run id, looked up under the run id's
// claim lock so that an agent's write under way is seen, and one tried
// meanwhile refused). A call that names a run of the other kind (a
// client-named run id that is some MCP session's run) is refused with
// errRunSession.
func (s store) beginCall(ctx context.Context, r runRef, runStarted kernel.Event, started func(opID string) (kernel.Event, error)) (opID string, err error) {
	err = pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		n, ended, kind, err := nextOp(ctx, tx, r)
		if errors.Is(err, pgx.ErrNoRows) {
			// Unknown: claim the run id, then look again, since another
			// call of the same new run may have recorded it while this
			// one waited for the claim (it is then this call's run too).
			if err := claimRunKey(ctx, tx, r.project, r.runID); err != nil {
				return err
			}
			n, ended, kind, err = nextOp(ctx, tx, r)
		}
		if errors.Is(err, pgx.ErrNoRows) {
			if r.kind == kindClient {
				used, err := runUsed(ctx, tx, r.project, r.runID)
				if err != nil {
					return err
				}
				if used {
					return errRunUsed
				}
			}
			if _, err := s.insertRun(ctx, tx, r.project, r.runID, r.source, r.kind, r.instance, runStarted); err != nil {
				return err
			}
			n, ended, kind, err = nextOp(ctx, tx, r)
		}
		if err != nil {
			return err
		}
		if kind != r.kind {
			return errRunSession
		}
		if ended {
			return errRunEnded
		}
		opID = "op-" + strconv.FormatInt(n, 10)
		ev, err := started(opID)
		if err != nil {
			return err
		}
		if err := outbox.Enqueue(ctx, tx, ev); err != nil {
			return fmt.Errorf("enqueue tool.started of %s/%s/%s: %w", r.project, r.runID, opID, err)
		}
		return nil
	})
	if err != nil {
		return "", err
	}
	return opID, nil
}

func nextOp(ctx context.Context, tx pgx.Tx, r runRef) (n int64, ended bool, kind string, err error) {
	err = tx.QueryRow(ctx, nextOpSQL, r.project, r.runID).Scan(&n, &ended, &kind)
	if err != nil && !errors.Is(err, pgx.ErrNoRows) {
		err = fmt.Errorf("next operation of %s/%s: %w", r.project, r.runID, err)
	}
	return n, ended, kind, err
}

// enqueueTerminal writes a call's terminal event in a transaction of its
// own that does not wait for its WAL flush (synchronous_commit off): the
// commit is visible at once and survives the gateway's crash; only a crash
// of PostgreSQL itself within its WAL writer delay (200 ms by default)
// could lose it, and a lost terminal event leaves the operation unresolved,
// to be listed and probed — never wrongly settled. tool.started, which
// must be durable before the call is sent, always waits for its flush.
// This saves one disk flush per call.
func (s store) enqueueTerminal(ctx context.Context, ev kernel.Event) error {
	return pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, asyncCommitSQL); err != nil {
			return fmt.Errorf("enqueue %s: %w", ev.Key(), err)
		}
		return outbox.Enqueue(ctx, tx, ev)
	})
}

// endRun records the run's end (ev: run.completed or run.failed) unless
// its end is already recorded; ended is false then.
func (s store) endRun(ctx context.Context, project, runID string, ev kernel.Event) (ended bool, err error) {
	err = pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		err := tx.QueryRow(ctx, endRunSQL, project, runID).Scan(&ended)
		if errors.Is(err, pgx.ErrNoRows) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("end run %s/%s: %w", project, runID, err)
		}
		return outbox.Enqueue(ctx, tx, ev)
	})
	return ended, err
}

// reaped is a session run of a dead instance, ended by reap.
type reaped struct {
	project, runID, source, instance string
	heartbeat                        time.Time
	lease                            time.Duration
	stopped                          bool
}

// reap ends the open session runs of dead instances, each with the
// run.failed failed builds, in one transaction.
func (s store) reap(ctx context.Context, self string, failed func(reaped) (kernel.Event, error)) ([]reaped, error) {
	var out []reaped
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		out = out[:0]
		rows, err := tx.Query(ctx, reapSQL, self)
		if err != nil {
			return fmt.Errorf("reap runs of dead gateways: %w", err)
		}
		for rows.Next() {
			var r reaped
			var lease float64
			if err := rows.Scan(&r.project, &r.runID, &r.source, &r.instance, &r.heartbeat, &lease, &r.stopped); err != nil {
				rows.Close()
				return fmt.Errorf("reap runs of dead gateways: %w", err)
			}
			r.lease = time.Duration(lease * float64(time.Second))
			out = append(out, r)
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return fmt.Errorf("reap runs of dead gateways: %w", err)
		}
		events := make([]kernel.Event, 0, len(out))
		for _, r := range out {
			ev, err := failed(r)
			if err != nil {
				return err
			}
			events = append(events, ev)
		}
		if err := outbox.Enqueue(ctx, tx, events...); err != nil {
			return fmt.Errorf("enqueue run.failed of dead gateways' runs: %w", err)
		}
		_, err = tx.Exec(ctx, pruneInstancesSQL, self)
		return err
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// runUsed tells whether anyone (the kernel, an agent, an earlier gateway
// run whose row is gone) has events of the run, still in the outbox or
// journaled, or the run is a kernel run: a client-named run id must be new
// to the gateway's bookkeeping and to the journal alike, or op-1 could be
// issued twice, and must not be the kernel's.
func runUsed(ctx context.Context, tx pgx.Tx, project, runID string) (bool, error) {
	pending, err := outbox.Pending(ctx, tx, outbox.PendingFilter{Project: project, RunID: runID})
	if err != nil {
		return false, fmt.Errorf("check run %s/%s: %w", project, runID, err)
	}
	if len(pending) > 0 {
		return true, nil
	}
	var used bool
	if err := tx.QueryRow(ctx, runTakenSQL, project, runID).Scan(&used); err != nil {
		return false, fmt.Errorf("check run %s/%s: %w", project, runID, err)
	}
	return used, nil
}
