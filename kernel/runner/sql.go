package runner

// insertRunSQL records a started run; no row comes back when the run id
// is taken.
const insertRunSQL = `
INSERT INTO kernel_runs (project, run_id, plan, plan_digest, workflow_id)
VALUES ($1, $2, $3, $4, $5)
ON CONFLICT (project, run_id) DO NOTHING
RETURNING true`

const runDigestSQL = `SELECT plan_digest FROM kernel_runs WHERE project = $1 AND run_id = $2`

// kernelRunsSQL returns which of the candidate (project, run_id) pairs are
// runs started through the API: index lookups on the primary key.
const kernelRunsSQL = `
SELECT k.project, k.run_id
FROM unnest($1::text[], $2::text[]) AS c(project, run_id)
JOIN kernel_runs k ON k.project = c.project AND k.run_id = c.run_id`

const runExistsSQL = `SELECT EXISTS (SELECT 1 FROM kernel_runs WHERE project = $1 AND run_id = $2)`

// foreignEventSQL finds one journal event not written by the kernel in any
// of the runs $2 of project $1 (index journal_events_run).
const foreignEventSQL = `
SELECT source_id, run_id FROM journal_events
WHERE project = $1 AND run_id = ANY($2::text[]) AND source_id <> 'kernel'
LIMIT 1`
