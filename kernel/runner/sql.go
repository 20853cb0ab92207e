package runner

import "github.com/seed-7bc021c3/reckon/kernel/journal"

// insertRunSQL records a started run; no row comes back when the run id
// is taken.
const insertRunSQL = `
INSERT INTO kernel_runs (project, run_id, plan, plan_digest, workflow_id)
VALUES ($1, $2, $3, $4, $5)
ON CONFLICT (project, run_id) DO NOTHING
RETURNING true`

const runDigestSQL = `SELECT plan_digest FROM kernel_runs WHERE project = $1 AND run_id = $2`

const runExistsSQL = `SELECT EXISTS (SELECT 1 FROM kernel_runs WHERE project = $1 AND run_id = $2)`

// foreignEventSQL finds one journal event not written by the kernel in any
// of the runs $2 of project $1 (index journal_events_run), or one of them
// the MCP gateway has recorded as its run: the gateway's events reach the
// journal through the outbox, so a run it has just claimed (or claimed
// while the publisher is down) may have none journaled yet, but its
// gateway_runs row was committed with the claim, under the same lock as a
// start (kernel/gateway's claimRunKeySQL).
const foreignEventSQL = `
(SELECT source_id, run_id FROM gateway_runs
 WHERE project = $1 AND run_id = ANY($2::text[])
 LIMIT 1)
UNION ALL
(SELECT e.source_id, e.run_id FROM journal_runs jr
 JOIN journal_events e ON e.project = jr.project AND e.run_id = jr.run_id
  AND e.ingested_at >= jr.first_ingested_at AND e.ingested_at < jr.ingested_before
 WHERE jr.project = $1 AND jr.run_id = ANY($2::text[]) AND e.source_id <> 'kernel'
 LIMIT 1)
LIMIT 1`

// lockRunStartSQL and unlockRunStartSQL make starts of one run id take
// turns (a session lock on the run's key; a hash collision only makes two
// unrelated starts take turns too). Writes of foreign events take the same
// key shared (reckon_refuse_kernel_runs, migrations 00028 and 00029) and
// the MCP gateway takes it to claim a run id (kernel/gateway's
// claimRunKeySQL): the key's expression must stay the same in all three
// places.
const (
	lockRunStartSQL   = `SELECT pg_advisory_lock(hashtextextended($1::text || '/' || $2::text, 0))`
	unlockRunStartSQL = `SELECT pg_advisory_unlock(hashtextextended($1::text || '/' || $2::text, 0))`
)

// deleteRunSQL takes back the row of a start whose workflow never
// started, so the run id is free again instead of taken forever.
const deleteRunSQL = `DELETE FROM kernel_runs WHERE project = $1 AND run_id = $2`

// runAwaitingSQL finds the wait a run is in, if any: its newest kernel
// run.awaiting whose operation has no run.resumed (index journal_events_run
// for the run, journal_events_operation for the resumption). $1 project,
// $2 run_id.
var runAwaitingSQL = `
SELECT a.operation_id, a.ts, coalesce(a.data->>'until', '')
FROM journal_events a
WHERE a.project = $1 AND a.run_id = $2 AND a.type = 'run.awaiting' AND a.source_id = 'kernel'
  AND ` + journal.RunBoundParams("a.ingested_at") + `
  AND NOT EXISTS (
      SELECT 1 FROM journal_events e
      WHERE e.project = a.project AND e.run_id = a.run_id AND e.operation_id = a.operation_id
        AND e.type = 'run.resumed' AND e.source_id = 'kernel'
        AND ` + journal.RunBoundParams("e.ingested_at") + `)
ORDER BY a.seq DESC
LIMIT 1`

// awaitingSQL lists the kernel's waits that have not ended in the journal
// (no run.resumed for their operation, no run.completed or run.failed of
// their run), each with the newest reconciliation of the awaited operation
// (by ts, then journal order, as the listing orders them) and whether the
// kernel's tool.failed of it is journaled (the listing, and so a triage,
// sees the operation only then). It reads the partial index
// journal_events_awaiting (migration 00040) from $1 on, so its cost
// follows the waits begun within the await bound, not journal history;
// per wait it probes the operation's and the run's events. $2/$3 narrow it
// to one run ($2 empty: every run), $4 bounds the answer.
var awaitingSQL = `
SELECT a.project, a.run_id, a.operation_id, a.ts,
       r.source_id, r.event_id, r.data->>'effect', r.data->>'basis',
       EXISTS (SELECT 1 FROM journal_events f
               WHERE f.project = a.project AND f.run_id = a.run_id AND f.operation_id = a.operation_id
                 AND f.type = 'tool.failed' AND f.source_id = 'kernel'
                 AND ` + journal.RunBound("f.ingested_at", "a") + `)
FROM journal_events a
LEFT JOIN LATERAL (
    SELECT t.source_id, t.event_id, t.data
    FROM journal_events t
    WHERE t.project = a.project AND t.run_id = a.run_id AND t.operation_id = a.operation_id
      AND t.type = 'operation.reconciled'
      AND ` + journal.RunBound("t.ingested_at", "a") + `
    ORDER BY t.ts DESC, t.seq DESC
    LIMIT 1
) r ON true
WHERE a.type = 'run.awaiting' AND a.source_id = 'kernel' AND a.ts >= $1
  AND ($2 = '' OR (a.project = $2 AND a.run_id = $3))
  AND NOT EXISTS (
      SELECT 1 FROM journal_events e
      WHERE e.project = a.project AND e.run_id = a.run_id AND e.operation_id = a.operation_id
        AND e.type = 'run.resumed' AND e.source_id = 'kernel'
        AND ` + journal.RunBound("e.ingested_at", "a") + `)
  AND NOT EXISTS (
      SELECT 1 FROM journal_events e
      WHERE e.project = a.project AND e.run_id = a.run_id
        AND e.type IN ('run.completed', 'run.failed') AND e.source_id = 'kernel'
        AND ` + journal.RunBound("e.ingested_at", "a") + `)
ORDER BY a.ts, a.seq
LIMIT $4`
