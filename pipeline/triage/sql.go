package triage

// All of the sweep's own SQL, in one reviewed place.

// tryLockSQL takes the per-run triage lock on the session (held across the
// model call, released by unlockSQL). The two-key form keeps triage locks in
// a key space of their own: classid is a constant, objid hashes the run.
// Advisory locks are database-wide, so the key includes the schema: two
// installations in one database (or two tests) never block each other.
const tryLockSQL = `SELECT pg_try_advisory_lock($1::int4, hashtext(current_schema() || ':' || $2))`

const unlockSQL = `SELECT pg_advisory_unlock($1::int4, hashtext(current_schema() || ':' || $2))`

// commitUnlockSQL commits the run's last wall and then releases the run's
// triage lock, in one round trip: the statements of a simple query run in
// order and an error (a failed commit) skips the rest, so the lock is
// never released before the wall is committed. The lock connection's
// session holds no other advisory lock (a run's lock at a time, released
// before the connection goes back to the lock pool), so unlocking all is
// unlocking the run. Its one result hides COMMIT's tag, which says
// ROLLBACK only for a transaction already aborted by an error: record
// commits only when every statement succeeded.
const commitUnlockSQL = `COMMIT; ` + unlockAllSQL

// unlockAllSQL releases the lock connection's session locks: the run's
// triage lock, the only one it holds (see commitUnlockSQL).
const unlockAllSQL = `SELECT pg_advisory_unlock_all()`

// triageLockClass is the advisory-lock classid of triage locks ("rkn1").
const triageLockClass = 0x726b6e31
