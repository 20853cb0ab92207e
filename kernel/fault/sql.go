package fault

// claimSQL records a fault only when none of this kind exists for the run
// yet: the first matching execution per run fires, later ones run normally.
// The primary key (project, run_id, operation_id) keeps a redelivered
// activity of the same operation from recording twice.
const claimSQL = `
INSERT INTO kernel_fault_records (project, run_id, operation_id, tool, fault, truth, detail)
SELECT $1, $2, $3, $4, $5, $6, $7
WHERE NOT EXISTS (
    SELECT 1 FROM kernel_fault_records WHERE project = $1 AND run_id = $2 AND fault = $5
)
ON CONFLICT DO NOTHING`

// observedSQL records a truth a drill observed; an existing record for the
// operation stays as it is.
const observedSQL = `
INSERT INTO kernel_fault_records (project, run_id, operation_id, tool, fault, truth, detail)
VALUES ($1, $2, $3, $4, $5, $6, $7)
ON CONFLICT DO NOTHING`

const recordsSQL = `
SELECT project, run_id, operation_id, tool, fault, truth, detail
FROM kernel_fault_records
WHERE project = $1 AND run_id = $2
ORDER BY recorded_at, operation_id`
