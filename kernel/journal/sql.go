package journal

// All of the journal's SQL, in one reviewed place.

// checkAgentEventsSQL goes ahead of ingestSQL in a batch of agents'
// events (migration 00030): it raises RK001 when one of the runs $2 of
// projects $1 (the events' runs and every run they descend from) is a
// kernel or gateway run or is being started or claimed
// (reckon_refuse_kernel_runs, migrations 00028 and 00029), and RK002 when a
// run $4 of project $3 belongs to a source other than $5 of the same entry,
// claiming it for that source when nobody owns it yet (entries in the
// events' order, so the first claims) -- a run nobody has claimed belongs
// to the owner of its nearest owned ancestor (migration 00032); and,
// first of all, RK003 when a source $5 is the MCP gateway's (migration
// 00031). Each aborts the batch's implicit transaction.
const checkAgentEventsSQL = `SELECT reckon_check_agent_events($1::text[], $2::text[], $3::text[], $4::text[], $5::text[])`

// ingestSQL writes a batch in one round trip. Inputs arrive as parallel
// arrays. The batch's keys go into the key table first (keyStepSQL): a
// key already there is skipped, and only the events whose keys were
// written go into journal_events, in the batch's order (journal order
// follows it); the settle step clears the open hint of tool.started
// rows whose operation an inserted event settles. It returns the keys it
// inserted and nothing else: every other key is a repeat or a conflict,
// whose stored digest digestsSQL reads afterwards, so the common all-new
// batch pays for no join of the input against what was inserted.
//
// The key table holds the idempotency key because journal_events is
// partitioned by ingested_at, and PostgreSQL refuses a unique constraint
// that leaves the partition key out (docs/scaling.md#the-idempotency-key).
// The key row and its event are written in one statement, with the same
// seq (drawn ahead, in the batch's order: a skipped key leaves a gap) and
// ingested_at (the transaction's), so one is never without the other but
// for a dropped partition's keys, kept on purpose.
// TestIngestAnswersLikeFlatJournal.
//
// The settle step looks each settled operation's events up (LATERAL,
// kept from being flattened into a join by OFFSET 0, so the batch's
// operations drive) by the operation index alone: the type and open tests
// stay outside the subquery, where the partial index of open tool.started
// rows cannot serve them. It then updates by seq. As a join, a generic
// plan made while the journal was small walks every open tool.started of
// the journal for each settling operation of the batch.
//
// The open hint's test is a scalar subquery with LIMIT 1, not NOT EXISTS:
// the planner may turn an EXISTS in a select list into a hashed subplan
// that reads every settling row of the journal once per batch; a scalar
// subquery is always an index probe per tool.started. TestIngestPlan.
var ingestSQL = `
WITH input AS MATERIALIZED (
    SELECT nextval('journal_events_seq') AS seq, i.*,
        jr.first_ingested_at AS run_first, jr.ingested_before AS run_before
    FROM unnest(
        $1::text[], $2::text[], $3::text[], $4::text[], $5::text[], $6::timestamptz[],
        $7::text[], $8::text[], $9::text[], $10::jsonb[], $11::bytea[], $12::text[],
        $13::bool[], $14::bool[], $15::int[])
    AS i(source_id, event_id, project, run_id, type, ts, actor, parent_source_id,
         parent_event_id, data, payload_digest, operation_id, settles, open_in_batch, ord)
    LEFT JOIN journal_runs jr ON jr.project = i.project AND jr.run_id = i.run_id
    ORDER BY i.ord
),
k AS (
    INSERT INTO journal_keys (source_id, event_id, project, run_id, seq, payload_digest)
    SELECT i.source_id, i.event_id, i.project, i.run_id, i.seq, i.payload_digest
    FROM input i
    ORDER BY i.ord
    ON CONFLICT (source_id, event_id) DO NOTHING
    RETURNING source_id, event_id
),
ins AS (
    INSERT INTO journal_events (seq, source_id, event_id, project, run_id, type, ts, actor,
        parent_source_id, parent_event_id, data, payload_digest, operation_id, settles, open)
    OVERRIDING SYSTEM VALUE
    SELECT i.seq, i.source_id, i.event_id, i.project, i.run_id, i.type, i.ts, i.actor,
        i.parent_source_id, i.parent_event_id, i.data, i.payload_digest, i.operation_id, i.settles,
        i.type = 'tool.started' AND i.open_in_batch AND ` + unsettledInJournalSQL + `
    FROM input i
    JOIN k ON k.source_id = i.source_id AND k.event_id = i.event_id
    ORDER BY i.ord
    RETURNING source_id, event_id, project, run_id, operation_id, settles
),
` + settleStep("input")

// unsettledInJournalSQL is the open hint's test against the journal for
// the batch row i (see ingestSQL), bounded by the weeks of its run (i's
// run_first and run_before, RunBound's, read once per row with it).
const unsettledInJournalSQL = `(
            SELECT true FROM journal_events t
            WHERE t.project = i.project AND t.run_id = i.run_id
              AND t.operation_id = i.operation_id AND t.settles
              AND t.ingested_at >= i.run_first AND t.ingested_at < i.run_before
            LIMIT 1) IS NULL`

// RunBound is the condition that col (an ingested_at of journal_events)
// lies within the weeks of the run of the row alias row (its project and
// run_id): at or after the run's floor, its oldest event's ingested_at,
// and before the end of the week of its newest (journal_runs'
// first_ingested_at and ingested_before, kept by the journal's statement
// trigger). Every event of a run lies within them, so a read of a run's
// or an operation's events bounded by them reads only the partitions of
// the run's weeks, found at run time (partition pruning): usually one,
// however many weeks the journal keeps. A run the journal does not hold
// has no bounds, and the condition then holds no row, as the journal
// holds none of it. TestRunReadsPruneOtherPartitions.
func RunBound(col, row string) string {
	return runBound(col, row+".project", row+".run_id")
}

// RunBoundParams is RunBound for the run given as a statement's
// parameters $1 (project) and $2 (run id).
func RunBoundParams(col string) string { return runBound(col, "$1", "$2") }

func runBound(col, project, runID string) string {
	run := ` FROM journal_runs jr WHERE jr.project = ` + project + ` AND jr.run_id = ` + runID + `)`
	return col + ` >= (SELECT jr.first_ingested_at` + run + ` AND ` + col + ` < (SELECT jr.ingested_before` + run
}

// settleStep ends the ingest statements: it closes the open hints of the
// tool.started rows whose operation a row of ins settles, and returns the
// keys inserted (see ingestSQL). Its reads and its update are bounded by
// the weeks of the batch's runs (RunBound's, read with the batch's rows
// into batch, the statement's first CTE: run_first and run_before), so
// they probe only the partitions those runs were journaled in; a run new
// to the journal has no bounds yet and nothing earlier to close.
func settleStep(batch string) string {
	return `settle AS (
    UPDATE journal_events t SET open = false
    WHERE t.ingested_at >= (SELECT min(w.run_first) FROM ` + batch + ` w WHERE w.settles)
      AND t.ingested_at < (SELECT max(w.run_before) FROM ` + batch + ` w WHERE w.settles)
      AND t.seq = ANY (ARRAY(
        SELECT o.seq
        FROM (SELECT DISTINCT project, run_id, operation_id FROM ins WHERE settles) s
        JOIN (SELECT DISTINCT project, run_id, run_first, run_before FROM ` + batch + ` WHERE settles) w
          ON w.project = s.project AND w.run_id = s.run_id
        CROSS JOIN LATERAL (
            SELECT seq, type, open FROM journal_events o
            WHERE o.project = s.project AND o.run_id = s.run_id AND o.operation_id = s.operation_id
              AND o.ingested_at >= w.run_first AND o.ingested_at < w.run_before
            OFFSET 0) o
        WHERE o.type = 'tool.started' AND o.open))
    RETURNING 1
)
SELECT source_id, event_id FROM ins`
}

// settleCopiedSQL ends a batch written with COPY (Store.ingestCopy),
// whose rows carry only the open hint the batch itself gives them (a
// tool.started is open unless the batch settles its operation): for each
// operation $1..$3, it closes every open tool.started once the journal,
// the batch's rows included, holds a settling event of the operation. That
// is what ingestSQL leaves, in one statement after the insert rather than
// inside it: the hints of earlier tool.started rows the batch settles, and
// those of the batch's own when a settling event was already journaled.
//
// Only the operations of runs that hold rows other than the batch's are
// looked up ("older", $4..$6: each run of the batch that holds one of the
// operations $1..$3 and its count of copied rows): in a run the batch
// began, the batch's own rows are all there is. The count stops at one
// more than the batch's, so the test costs at most the batch's own rows;
// why a concurrent writer cannot make it skip a run:
// docs/internals.md#journal. TestCopySettlesEarlierRows,
// TestCopiedRunsCountsOnlyLookedUpRuns.
//
// Each operation's events are looked up by the operation index alone, as
// in settleStepSQL, and the settling event's test is a scalar subquery
// with LIMIT 1 (as in unsettledInJournalSQL), asked only of the open
// tool.started rows found (the second OFFSET 0 keeps the planner from
// asking it of every operation first): as an EXISTS the planner may make
// it a hash semi join over every settling row of the journal.
var settleCopiedSQL = `
WITH older AS MATERIALIZED (
    SELECT r.project, r.run_id
    FROM unnest($4::text[], $5::text[], $6::int[]) AS r(project, run_id, copied)
    WHERE (SELECT count(*) FROM (
               SELECT FROM journal_events j
               WHERE j.project = r.project AND j.run_id = r.run_id
                 AND ` + RunBound("j.ingested_at", "r") + `
               LIMIT r.copied + 1) n) > r.copied)
UPDATE journal_events t SET open = false
WHERE t.ingested_at >= (
        SELECT min(jr.first_ingested_at) FROM journal_runs jr
        WHERE (jr.project, jr.run_id) IN (SELECT project, run_id FROM older))
  AND t.ingested_at < (
        SELECT max(jr.ingested_before) FROM journal_runs jr
        WHERE (jr.project, jr.run_id) IN (SELECT project, run_id FROM older))
  AND t.seq = ANY (ARRAY(
    SELECT c.seq FROM (
        SELECT o.seq, s.project, s.run_id, s.operation_id
        FROM (
            SELECT * FROM unnest($1::text[], $2::text[], $3::text[]) AS s(project, run_id, operation_id)
            WHERE (SELECT true FROM older
                   WHERE older.project = s.project AND older.run_id = s.run_id LIMIT 1)
            OFFSET 0) s
        CROSS JOIN LATERAL (
            SELECT seq, type, open FROM journal_events o
            WHERE o.project = s.project AND o.run_id = s.run_id AND o.operation_id = s.operation_id
              AND ` + RunBound("o.ingested_at", "s") + `
            OFFSET 0) o
        WHERE o.type = 'tool.started' AND o.open
        OFFSET 0) c
    WHERE (SELECT true FROM journal_events x
           WHERE x.project = c.project AND x.run_id = c.run_id
             AND x.operation_id = c.operation_id AND x.settles
             AND ` + RunBound("x.ingested_at", "c") + `
           LIMIT 1)))`

// reserveSeqsSQL draws $1 journal sequence numbers, in order, for a
// copied batch (Store.ingestCopy), which writes each key row and its event
// with the same seq.
const reserveSeqsSQL = `SELECT nextval('journal_events_seq') FROM generate_series(1, $1::int)`

// digestsSQL reads the stored digests of the keys ingestSQL did not insert
// (in a statement of its own, so it also sees a concurrent writer's rows
// that the insert waited for).
const digestsSQL = `
SELECT source_id, event_id, payload_digest FROM journal_keys
WHERE (source_id, event_id) IN (SELECT * FROM unnest($1::text[], $2::text[]))`

const eventColumns = `source_id, event_id, project, run_id, type, ts, actor,
    parent_source_id, parent_event_id, data, seq, ingested_at`

// runEventsSQL lists a run's events in journal order. Every read of a
// run's events is bounded by its floor (runFloorParams).
var runEventsSQL = `SELECT ` + eventColumns + ` FROM journal_events
WHERE project = $1 AND run_id = $2 AND ` + RunBoundParams("ingested_at") + ` ORDER BY seq`

// runEventsPageSQL lists a page of a run's events after seq $3.
var runEventsPageSQL = `SELECT ` + eventColumns + ` FROM journal_events
WHERE project = $1 AND run_id = $2 AND ` + RunBoundParams("ingested_at") + ` AND seq > $3 ORDER BY seq LIMIT $4`

// runTerminalSQL is a run's newest run.completed or run.failed, and
// whether the journal has any event of the run at all (its row in the
// runs index, written with its first event).
var runTerminalSQL = `SELECT
  EXISTS (SELECT 1 FROM journal_runs WHERE project = $1 AND run_id = $2),
  (SELECT type FROM journal_events WHERE project = $1 AND run_id = $2
     AND ` + RunBoundParams("ingested_at") + `
     AND type IN ('run.completed', 'run.failed') ORDER BY seq DESC LIMIT 1)`

// typeEventsSQL lists a project's events of one type, newest first, from the
// (project, type, ts) index.
const typeEventsSQL = `SELECT ` + eventColumns + ` FROM journal_events
WHERE project = $1 AND type = $2 AND ts >= $3 ORDER BY ts DESC, seq DESC LIMIT $4`

// eventSQL reads one event by key: the key table says where it lives (its
// seq and ingested_at: one partition, one probe of its primary key).
const eventSQL = `SELECT e.source_id, e.event_id, e.project, e.run_id, e.type, e.ts, e.actor,
    e.parent_source_id, e.parent_event_id, e.data, e.seq, e.ingested_at
FROM journal_keys k
JOIN journal_events e ON e.seq = k.seq AND e.ingested_at = k.ingested_at
WHERE k.source_id = $1 AND k.event_id = $2`

// repairOpenSQL clears open hints that a race left behind: a settling event
// committed concurrently with its tool.started, each invisible to the other's
// statement. Bounded by the open set, which the listing keeps small.
var repairOpenSQL = `
UPDATE journal_events s SET open = false
WHERE s.type = 'tool.started' AND s.open AND EXISTS (
    SELECT 1 FROM journal_events t
    WHERE t.project = s.project AND t.run_id = s.run_id
      AND t.operation_id = s.operation_id AND t.settles
      AND ` + RunBound("t.ingested_at", "s") + `)`

// operationEventsSQL lists one operation's events in journal order (index
// on project, run_id, operation_id).
var operationEventsSQL = `SELECT ` + eventColumns + ` FROM journal_events
WHERE project = $1 AND run_id = $2 AND operation_id = $3 AND ` + RunBoundParams("ingested_at") + ` ORDER BY seq`

// operationsEventsSQL is operationEventsSQL for several operations of one
// run (same index).
var operationsEventsSQL = `SELECT ` + eventColumns + ` FROM journal_events
WHERE project = $1 AND run_id = $2 AND operation_id = ANY($3::text[]) AND ` + RunBoundParams("ingested_at") + ` ORDER BY seq`

// verdictsNamingSQL lists a run's supervisor.verdict events that name the
// operation $3, in journal order.
var verdictsNamingSQL = `SELECT ` + eventColumns + ` FROM journal_events
WHERE project = $1 AND run_id = $2 AND type = 'supervisor.verdict'
  AND ` + RunBoundParams("ingested_at") + `
  AND data->'operation_ids' @> jsonb_build_array($3::text)
ORDER BY seq`

// ingestOutboxSQL is ingestSQL for outbox rows, read in the database: the
// in-process publisher's delivery of the rows it claimed ($1, their ids),
// in one statement and without the events leaving the server. Enqueue
// validated and prepared every row (kernel.Event.Prepare) and kept what
// the journal needs beside the event: its canonical data in the event,
// operation_id, settles and ts as the Go path sends them, so the row this
// writes is the row ingestSQL writes for the same event
// (TestInDatabaseDeliveryWritesWhatIngestWrites in kernel/outbox). Rows
// without them (enqueued before migration 00027) are not for this
// statement: the publisher sends those through ingestSQL. Journal order
// follows the outbox's id order, as the publisher's batches do. A
// tool.started is written closed when its operation is settled in the
// journal or by another row of the batch: the batch's settled operations
// are joined once (a hash join), not searched per row, which would make a
// batch of n starts cost n² comparisons.
var ingestOutboxSQL = ingestOutboxHeadSQL + `
    ORDER BY o.id
    ON CONFLICT (source_id, event_id) DO NOTHING` + ingestOutboxTailSQL

// ingestOutboxTailSQL ends ingestOutboxSQL and ingestOutboxNewSQL: the
// events whose keys were written, in the outbox's order.
var ingestOutboxTailSQL = `
    RETURNING source_id, event_id
),
ins AS (
    INSERT INTO journal_events (seq, source_id, event_id, project, run_id, type, ts, actor,
        parent_source_id, parent_event_id, data, payload_digest, operation_id, settles, open)
    OVERRIDING SYSTEM VALUE
    SELECT i.seq, i.source_id, i.event_id, i.project, i.run_id, i.type, i.ts, i.event->>'actor',
        i.event->'parent_event_id'->>'source_id', i.event->'parent_event_id'->>'event_id',
        i.event->'data', i.payload_digest, i.operation_id, i.settles,
        i.type = 'tool.started' AND b.operation_id IS NULL AND ` + unsettledInJournalSQL + `
    FROM src i
    JOIN k ON k.source_id = i.source_id AND k.event_id = i.event_id
    LEFT JOIN (SELECT DISTINCT project, run_id, operation_id FROM src WHERE settles) b
        ON b.project = i.project AND b.run_id = i.run_id AND b.operation_id = i.operation_id
    ORDER BY i.id
    RETURNING source_id, event_id, project, run_id, operation_id, settles
),
` + settleStep("src")

// ingestOutboxNewSQL is ingestOutboxSQL on the condition that every row's
// key is new to the journal: without ON CONFLICT, so a key already
// journaled is a unique violation of the key table's primary key that
// aborts the statement (IngestOutboxTx then rolls back to a savepoint and
// runs ingestOutboxSQL). The in-process publisher's rows are almost always
// new; ON CONFLICT makes every row a speculative insertion (a probe of
// the key's index, the insert, a second WAL record to confirm it), which
// they do not need.
var ingestOutboxNewSQL = ingestOutboxHeadSQL + `
    ORDER BY o.id` + ingestOutboxTailSQL

// The savepoint of IngestOutboxTx's first try (ingestOutboxNewSQL).
const (
	outboxNewSavepointSQL = `SAVEPOINT reckon_outbox_new`
	outboxNewReleaseSQL   = `RELEASE SAVEPOINT reckon_outbox_new`
	outboxNewRollbackSQL  = `ROLLBACK TO SAVEPOINT reckon_outbox_new`
)

// journalKeyConstraint is the journal's unique constraint on event keys,
// the key table's primary key.
const journalKeyConstraint = "journal_keys_pkey"

// PostgreSQL's SQLSTATEs the journal's writes answer by code.
const (
	uniqueViolation      = "23505"
	deadlockDetected     = "40P01"
	serializationFailure = "40001"
)

// ingestOutboxHeadSQL begins ingestOutboxSQL and ingestOutboxNewSQL: the
// outbox rows, and the insert of their keys.
const ingestOutboxHeadSQL = `
WITH src AS MATERIALIZED (
    SELECT nextval('journal_events_seq') AS seq, o.*, jr.first_ingested_at AS run_first, jr.ingested_before AS run_before
    FROM (SELECT o.id, o.source_id, o.event_id, o.event, o.payload_digest, o.operation_id, o.settles, o.ts,
              o.event->>'project' AS project, o.event->>'run_id' AS run_id, o.event->>'type' AS type
          FROM kernel_event_outbox o
          WHERE o.id = ANY ($1::bigint[])) o
    LEFT JOIN journal_runs jr ON jr.project = o.project AND jr.run_id = o.run_id
    ORDER BY o.id
),
k AS (
    INSERT INTO journal_keys (source_id, event_id, project, run_id, seq, payload_digest)
    SELECT o.source_id, o.event_id, o.project, o.run_id, o.seq, o.payload_digest
    FROM src o`

// outboxDigestsSQL reads, for outbox rows ingestOutboxSQL did not insert,
// whether the journal's row under the same key has the same digest
// (repeated) or another (conflict); a key the journal lacks is not
// returned.
const outboxDigestsSQL = `
SELECT o.id, j.payload_digest = o.payload_digest
FROM kernel_event_outbox o
JOIN journal_keys j ON j.source_id = o.source_id AND j.event_id = o.event_id
WHERE o.id = ANY ($1::bigint[])`

// plannedTable is the table whose statistics decide when the journal's
// writes run on their generic plans (pgplan): the key table, one row per
// event like the journal, because autovacuum analyzes the partitions of
// journal_events but never the partitioned table itself, whose own
// statistics would stay empty.
const plannedTable = "journal_keys"
