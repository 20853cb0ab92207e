package triage

// All of the sweep's own SQL, in one reviewed place.

// tryLockSQL takes the per-run triage lock on the session (held across the
// model call, released by unlockSQL). The two-key form keeps triage locks in
// a key space of their own: classid is a constant, objid hashes the run.
// Advisory locks are database-wide, so the key includes the schema: two
// installations in one database (or two tests) never block each other.
const tryLockSQL = `SELECT pg_try_advisory_lock($1::int4, hashtext(current_schema() || ':' || $2))`

const unlockSQL = `SELECT pg_advisory_unlock($1::int4, hashtext(current_schema() || ':' || $2))`

// triageLockClass is the advisory-lock classid of triage locks ("rkn1").
const triageLockClass = 0x726b6e31

// pendingVerdictsSQL lists operations of a run whose operation.reconciled is
// enqueued but not yet delivered to the journal: the listing (over the
// journal) still shows them unsettled, yet they are settled. Read BEFORE the
// listing: a row delivered in between is then visible in the journal, since
// the publisher marks a row delivered only after the journal committed it.
const pendingVerdictsSQL = `
SELECT DISTINCT event->'data'->>'operation_id' FROM kernel_event_outbox
WHERE delivered_at IS NULL AND parked_at IS NULL
  AND event->>'type' = 'operation.reconciled'
  AND event->>'project' = $1 AND event->>'run_id' = $2`
