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
