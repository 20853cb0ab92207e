package webhook

// All of the webhooks' SQL, in one reviewed place.

// insertSQL writes notifications, one row per endpoint whose events name
// the notification's event (none when no endpoint does: a database
// without webhooks pays this statement and writes nothing). Parallel
// arrays: $1 msg ids, $2 events, $3 bodies, $4/$5 the key of the event
// each announces, $6 its digest or NULL. With a digest, the row is written
// only while kernel_event_outbox holds exactly that event under the key:
// an Enqueue whose event turned out a conflict announces nothing, in
// whichever way its transaction then ends. A notification already
// written (the same fact enqueued again, a retried activity) is skipped
// by (endpoint_id, msg_id).
//
// It runs between pgplan's settings (generic plan, no sequential scans):
// the endpoints are found through webhook_endpoints_events, and the
// outbox row by its unique key in a scalar subquery, an index probe per
// notification (an EXISTS may be planned as a hashed subplan over every
// key of the outbox). A statement whose only path is a sequential scan
// would be costed past the JIT threshold there, and compiled at every
// call.
const insertSQL = `
INSERT INTO webhook_deliveries (endpoint_id, msg_id, event, body)
SELECT e.id, n.msg_id, n.event, n.body
FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::text[], $6::bytea[])
    AS n(msg_id, event, body, source_id, event_id, digest)
JOIN webhook_endpoints e ON e.events @> ARRAY[n.event]
WHERE n.digest IS NULL OR (
    SELECT o.payload_digest = n.digest FROM kernel_event_outbox o
    WHERE o.source_id = n.source_id AND o.event_id = n.event_id)
ON CONFLICT (endpoint_id, msg_id) DO NOTHING`

// undeliveredOfOthersSQL counts the undelivered rows of endpoints other
// than $1: what Register drops with them.
const undeliveredOfOthersSQL = `
SELECT count(*) FROM webhook_deliveries
WHERE delivered_at IS NULL AND endpoint_id <> ALL ($1::text[])`

// dropOthersSQL unregisters the endpoints other than $1, and (ON DELETE
// CASCADE) their rows.
const dropOthersSQL = `DELETE FROM webhook_endpoints WHERE id <> ALL ($1::text[])`

// registerSQL registers one endpoint ($1) for the events $2.
const registerSQL = `
INSERT INTO webhook_endpoints (id, events) VALUES ($1, $2)
ON CONFLICT (id) DO UPDATE SET events = EXCLUDED.events
WHERE webhook_endpoints.events IS DISTINCT FROM EXCLUDED.events`

// claimSQL leases a batch of due rows of the endpoints $1 for $3 seconds:
// at most $2, oldest due first, skipping rows another deliverer holds.
// The lease is next_attempt_at moved past the attempt's timeout, so the
// claim's transaction ends at once and the HTTP calls happen outside
// any; a deliverer that dies mid-attempt leaves its rows due again when
// the lease ends (delivered again, under the same webhook-id). From the
// partial index webhook_deliveries_due.
const claimSQL = `
UPDATE webhook_deliveries d SET next_attempt_at = now() + make_interval(secs => $3)
WHERE d.id = ANY (ARRAY(
    SELECT u.id FROM webhook_deliveries u
    WHERE u.delivered_at IS NULL AND u.next_attempt_at <= now() AND u.endpoint_id = ANY ($1::text[])
    ORDER BY u.next_attempt_at, u.id
    LIMIT $2
    FOR UPDATE SKIP LOCKED))
RETURNING d.id, d.endpoint_id, d.msg_id, d.body, d.attempts`

// deliveredSQL marks rows $1 delivered, with the receiver's statuses $2.
const deliveredSQL = `
UPDATE webhook_deliveries d
SET delivered_at = now(), attempts = d.attempts + 1, last_status = s.status
FROM unnest($1::bigint[], $2::int[]) AS s(id, status)
WHERE d.id = ANY ($1::bigint[]) AND d.id = s.id AND d.delivered_at IS NULL`

// failedSQL schedules rows $1 for another attempt after $2 seconds each,
// with the attempt's status $3 (0: no answer) and error $4.
const failedSQL = `
UPDATE webhook_deliveries d
SET attempts = d.attempts + 1, next_attempt_at = now() + make_interval(secs => s.delay_s),
    last_status = nullif(s.status, 0), last_error = s.error
FROM unnest($1::bigint[], $2::float8[], $3::int[], $4::text[]) AS s(id, delay_s, status, error)
WHERE d.id = ANY ($1::bigint[]) AND d.id = s.id AND d.delivered_at IS NULL`

// postponedSQL gives rows $1, claimed but not tried (their endpoint failed
// earlier in the pass), the due time $2 seconds from now, attempts
// unchanged.
const postponedSQL = `
UPDATE webhook_deliveries SET next_attempt_at = now() + make_interval(secs => $2)
WHERE id = ANY ($1::bigint[]) AND delivered_at IS NULL`

// pruneSQL deletes rows delivered longer ago than $1 seconds, $2 at a
// time (webhook_deliveries_delivered). A delivered row is kept that long
// so that the same fact written again within it (a retried activity) is
// still recognized as sent.
const pruneSQL = `
DELETE FROM webhook_deliveries WHERE id IN (
    SELECT id FROM webhook_deliveries
    WHERE delivered_at < now() - make_interval(secs => $1)
    LIMIT $2)`

// statsSQL feeds the backlog gauges: per endpoint, the undelivered rows
// and the age of the oldest, from the partial index of undelivered rows
// (a cost that follows the backlog, as the outbox's gauges do).
const statsSQL = `
SELECT endpoint_id, count(*), EXTRACT(EPOCH FROM now() - min(created_at))
FROM webhook_deliveries WHERE delivered_at IS NULL
GROUP BY endpoint_id`
