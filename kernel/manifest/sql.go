package manifest

// putSQL stores a manifest; the first write of a key wins (see Store.Put).
const putSQL = `
INSERT INTO kernel_workspace_manifests
    (project, run_id, operation_id, phase, taken_at, digest, files, dirs, other, bytes, hashed, truncated, entries)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13)
ON CONFLICT DO NOTHING`

const getSQL = `
SELECT taken_at, truncated, entries FROM kernel_workspace_manifests
WHERE project = $1 AND run_id = $2 AND operation_id = $3 AND phase = $4`

const latestSQL = `
SELECT taken_at, truncated, entries FROM kernel_workspace_manifests
WHERE project = $1 AND run_id = $2
ORDER BY taken_at DESC LIMIT 1`

// newestSQL finds the most recent manifest taken after $1, backwards along
// kernel_workspace_manifests_taken_at.
const newestSQL = `
SELECT project, run_id, operation_id, phase, taken_at FROM kernel_workspace_manifests
WHERE taken_at > $1
ORDER BY taken_at DESC LIMIT 1`

// pruneSQL deletes at most $2 manifests taken more than $1 seconds ago by
// the database's clock, found through kernel_workspace_manifests_taken_at
// (migration 00026) so a batch never scans the table.
const pruneSQL = `
DELETE FROM kernel_workspace_manifests WHERE (project, run_id, operation_id, phase) IN (
    SELECT project, run_id, operation_id, phase FROM kernel_workspace_manifests
    WHERE taken_at < now() - make_interval(secs => $1)
    LIMIT $2)`
