package runner

// insertRunSQL records a started run; no row comes back when the run id
// is taken.
const insertRunSQL = `
INSERT INTO kernel_runs (project, run_id, plan, plan_digest, workflow_id)
VALUES ($1, $2, $3, $4, $5)
ON CONFLICT (project, run_id) DO NOTHING
RETURNING true`

const runDigestSQL = `SELECT plan_digest FROM kernel_runs WHERE project = $1 AND run_id = $2`
