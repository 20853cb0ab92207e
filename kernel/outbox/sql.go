package outbox

// All of the outbox's SQL, in one reviewed place.

// enqueueSQL inserts a batch of rows in the batch's order, skipping keys
// already present, and returns the keys it inserted (the table's trigger
// makes each new row pending: migration 00034); Enqueue compares the
// stored digest of every other key (enqueueRecheckSQL), so a different
// payload under an existing key is a conflict. Returning only what was
// inserted spares the common all-new batch a join of the input against
// the outbox. It runs on its generic plan (pgplan). An event without an
// operation has operation_id NULL, as in the journal (an empty string in
// the array).
const enqueueSQL = `
WITH ins AS (` + enqueueInsertSQL + `
    RETURNING source_id, event_id
)
SELECT source_id, event_id FROM ins`

// enqueueInsertSQL is the insert of enqueueSQL, which skips keys already
// enqueued (enqueueNewSQL, below, is the same without the skip). The
// events arrive as one JSON array ($8, the last parameter), not as a
// jsonb[]: pgx encodes an array element by element into a buffer it
// shrinks after every statement, copying a batch's events through a
// doubling chain twice, while one document is one append (rows.args).
// ROWS FROM zips the array's elements with the other parameters' in order.
const enqueueInsertSQL = enqueueNewSQL + `
    ON CONFLICT (source_id, event_id) DO NOTHING`

// enqueueNewSQL is enqueueInsertSQL without ON CONFLICT: it writes the
// batch on the condition that every key is new, and fails with a unique
// violation of kernel_event_outbox_key (AlreadyEnqueued) otherwise,
// aborting its transaction with nothing of the batch written.
//
// Why a second form: ON CONFLICT makes each row a speculative insertion
// (an index probe first, then the insert and a second WAL record to
// confirm it), which the common all-new batch does not need. Enqueue on a
// pool (its own transaction) tries this form first and takes enqueueSQL's
// way when it fails; QueueEnqueueNew is this form.
const enqueueNewSQL = `
    INSERT INTO kernel_event_outbox (source_id, event_id, event, payload_digest, operation_id, settles, ts)
    SELECT source_id, event_id, event, payload_digest, NULLIF(operation_id, ''), settles, ts
    FROM ROWS FROM (unnest($1::text[]), unnest($2::text[]), unnest($3::bytea[]), unnest($4::int[]),
        unnest($5::text[]), unnest($6::bool[]), unnest($7::timestamptz[]), jsonb_array_elements($8::jsonb))
        AS i(source_id, event_id, payload_digest, ord, operation_id, settles, ts, event)
    ORDER BY ord`

// outboxKeyConstraint is the unique constraint on the outbox's keys,
// which enqueueNewSQL violates when a key is already enqueued.
const outboxKeyConstraint = "kernel_event_outbox_key"

// enqueueRecheckSQL reads the stored digests of the keys enqueueSQL did
// not insert (in a statement of its own, so it also sees the rows of a
// concurrent transaction the insert waited for).
const enqueueRecheckSQL = `
SELECT source_id, event_id, payload_digest FROM kernel_event_outbox
WHERE (source_id, event_id) IN (SELECT * FROM unnest($1::text[], $2::text[]))`

// claimSQL locks a batch of due rows; rows another publisher holds are
// skipped, so publishers never wait on each other or deliver the same row
// concurrently.
const claimSQL = `
SELECT o.id, o.event, o.attempts FROM kernel_event_outbox o` + claimDueSQL

// claimDueSQL is the claims' choice of rows: due, oldest first, a batch
// of $1, skipping rows another publisher holds. The lock is on the row's
// kernel_event_outbox_undelivered row, which is what delivery and parking
// delete and a retry updates; nothing else writes an undelivered outbox
// row. The outbox rows are then fetched by id (see below on why not by a
// join). It runs on its generic plan without sequential
// scans (claimStatement).
const claimDueSQL = `
WHERE o.id = ANY (ARRAY(
    SELECT u.id FROM kernel_event_outbox_undelivered u
    WHERE u.next_attempt_at <= now()
    ORDER BY u.id
    LIMIT $1
    FOR UPDATE SKIP LOCKED))
ORDER BY o.id`

// claimKeysSQL is claimSQL for a journal that reads the rows itself
// (OutboxJournal): the rows' keys instead of their events, and whether a
// row lacks the prepared columns (enqueued before migration 00027).
const claimKeysSQL = `
SELECT o.id, o.attempts, o.source_id, o.event_id, o.settles IS NULL FROM kernel_event_outbox o` + claimDueSQL

// The statements that read outbox rows chosen in
// kernel_event_outbox_undelivered fetch them by the ids, as an array
// (o.id = ANY (ARRAY(SELECT u.id …))), not by a join. On their generic
// plans the planner estimates the undelivered rows at a tenth of the
// table or more and merge-joins the two primary keys, walking every
// delivered row of the retention before the first undelivered one; a
// lateral lookup per row is estimated so dear that a large backlog
// switches on JIT compilation.

// claimedSQL reads the events of rows already claimed (locked by this
// transaction), in claim order, with claimSQL's columns.
const claimedSQL = `
SELECT id, event, attempts FROM kernel_event_outbox WHERE id = ANY ($1::bigint[]) ORDER BY id`

// The batch updates repeat their ids as o.id = ANY($1): without it the
// planner hash-joins the unnest against a sequential scan of the whole
// outbox, whose delivered rows stay for the retention period, so every
// batch would cost a scan of a day of history.

// markDeliveredSQL marks rows delivered: it deletes their undelivered
// rows, in the transaction that wrote them to the journal (or right after
// the journal's answer). The outbox rows themselves are not written: the
// journal's row under the same key records the delivery (migration 00034
// says why).
const markDeliveredSQL = `
DELETE FROM kernel_event_outbox_undelivered WHERE id = ANY($1::bigint[])`

// parkSQL parks rows ($1) with their reasons ($2): no longer pending, and
// listed for an operator. It returns what the conflict.parked webhook
// says of each row parked (Publisher.park): its key, its event's project,
// run and type (empty for a row that holds no event object), the reason
// and the time.
const parkSQL = `
WITH gone AS (
    DELETE FROM kernel_event_outbox_undelivered WHERE id = ANY($1::bigint[])
)
UPDATE kernel_event_outbox o SET parked_at = now(), park_reason = s.reason, delivery_status = 'conflict'
FROM unnest($1::bigint[], $2::text[]) AS s(id, reason)
WHERE o.id = ANY($1::bigint[]) AND o.id = s.id
RETURNING o.source_id, o.event_id, coalesce(o.event->>'project', ''), coalesce(o.event->>'run_id', ''),
    coalesce(o.event->>'type', ''), s.reason, o.parked_at`

// retryLaterSQL schedules rows ($1) for another attempt after their
// delays ($2, seconds; on their undelivered rows, which the claim reads)
// with their reasons ($3, on the outbox rows, with the attempts): a failed
// batch, whose rows share one, or the rows of a batch the journal refused
// one by one (deliverAround).
const retryLaterSQL = `
WITH later AS (
    UPDATE kernel_event_outbox_undelivered u
    SET next_attempt_at = now() + make_interval(secs => s.delay_s)
    FROM unnest($1::bigint[], $2::float8[]) AS s(id, delay_s)
    WHERE u.id = ANY($1::bigint[]) AND u.id = s.id
)
UPDATE kernel_event_outbox o
SET attempts = o.attempts + 1, last_error = s.reason
FROM unnest($1::bigint[], $3::text[]) AS s(id, reason)
WHERE o.id = ANY($1::bigint[]) AND o.id = s.id`

// pruneSQL deletes delivered rows enqueued longer ago than the retention
// (by kernel_event_outbox_created), a bounded batch at a time so it never
// holds long locks. Delivered: neither undelivered nor parked.
const pruneSQL = `
DELETE FROM kernel_event_outbox WHERE id IN (
    SELECT o.id FROM kernel_event_outbox o
    WHERE o.created_at < now() - make_interval(secs => $1) AND o.parked_at IS NULL
      AND NOT EXISTS (SELECT 1 FROM kernel_event_outbox_undelivered u WHERE u.id = o.id)
    LIMIT $2)`

// statsSQL feeds the backlog gauges: the rows pending and the age of the
// oldest (the first enqueued).
const statsSQL = `
SELECT s.n, COALESCE(EXTRACT(EPOCH FROM now() - (SELECT o.created_at FROM kernel_event_outbox o WHERE o.id = s.first)), 0)
FROM (SELECT count(*) AS n, min(id) AS first FROM kernel_event_outbox_undelivered) s`

const parkedCountSQL = `SELECT count(*) FROM kernel_event_outbox WHERE parked_at IS NOT NULL`

// pendingForRunsSQL counts the undelivered rows of the runs ($1 projects,
// $2 run ids, pairwise; by the event's project and run), for callers that
// must read the journal only after those runs' events have landed: one
// index lookup per run (kernel_event_outbox_undelivered_run).
const pendingForRunsSQL = `
SELECT count(*) FROM unnest($1::text[], $2::text[]) AS r(project, run_id)
JOIN kernel_event_outbox_undelivered u ON u.project = r.project AND u.run_id = r.run_id`

// parkedSQL lists parked rows for operators.
const parkedSQL = `
SELECT source_id, event_id, park_reason, parked_at FROM kernel_event_outbox
WHERE parked_at IS NOT NULL ORDER BY parked_at DESC LIMIT $1`

// beginAsyncCommitSQL begins a delivery transaction and relaxes its
// commit, in one simple query (one round trip).
const beginAsyncCommitSQL = `BEGIN; SET LOCAL synchronous_commit = off`

// pendingSQL* read pending events by the event's project and, in the
// narrower forms, its run and operation (as kernel_event_outbox_undelivered
// keeps them, from the event); $N::text[] empty matches any type. Three
// statements rather than one with ("$2 is empty OR run_id = $2"): under a
// generic plan that OR keeps the planner from using the (project, run_id,
// operation_id) index past the project (TestPendingUsesTheIndex). The
// undelivered rows are chosen first and their events fetched by id, so
// that no plan of stale statistics walks every pending row in id order to
// spare sorting the run's few (TestPendingUsesTheIndexOnStaleStatistics).
const (
	pendingSQL = `
SELECT o.event FROM kernel_event_outbox o
WHERE o.id = ANY (ARRAY(SELECT u.id FROM kernel_event_outbox_undelivered u WHERE u.project = $1))
  AND (coalesce(cardinality($2::text[]), 0) = 0 OR o.event->>'type' = ANY($2::text[]))
ORDER BY o.id`
	pendingRunSQL = `
SELECT o.event FROM kernel_event_outbox o
WHERE o.id = ANY (ARRAY(SELECT u.id FROM kernel_event_outbox_undelivered u WHERE u.project = $1 AND u.run_id = $2))
  AND (coalesce(cardinality($3::text[]), 0) = 0 OR o.event->>'type' = ANY($3::text[]))
ORDER BY o.id`
	pendingOperationSQL = `
SELECT o.event FROM kernel_event_outbox o
WHERE o.id = ANY (ARRAY(SELECT u.id FROM kernel_event_outbox_undelivered u
        WHERE u.project = $1 AND u.run_id = $2 AND u.operation_id = $3))
  AND (coalesce(cardinality($4::text[]), 0) = 0 OR o.event->>'type' = ANY($4::text[]))
ORDER BY o.id`
)

// retryingSQL lists undelivered, unparked rows whose delivery has failed
// at least once, oldest first, for operators: every undelivered row read
// by id, filtered on attempts (a listing an operator asks for, as long as
// the backlog). By id, as the claim: joined, its generic plan may merge
// the two tables' keys from the outbox's first row.
const retryingSQL = `
SELECT o.source_id, o.event_id, o.attempts, o.created_at, u.next_attempt_at, coalesce(o.last_error, '')
FROM kernel_event_outbox o
JOIN kernel_event_outbox_undelivered u ON u.id = o.id
WHERE o.id = ANY (ARRAY(SELECT id FROM kernel_event_outbox_undelivered)) AND o.attempts > 0
ORDER BY o.id
LIMIT $1`

// storedSQL reads the event enqueued under one key.
const storedSQL = `
SELECT event FROM kernel_event_outbox WHERE source_id = $1 AND event_id = $2`
