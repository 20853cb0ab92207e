package runner

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
(SELECT source_id, run_id FROM journal_events
 WHERE project = $1 AND run_id = ANY($2::text[]) AND source_id <> 'kernel'
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
