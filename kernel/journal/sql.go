package journal

// All of the journal's SQL, in one reviewed place.

// ingestSQL writes a batch in one round trip. Inputs arrive as parallel
// arrays; the insert skips existing keys, in the batch's order (journal
// order follows it); the settle step clears the open hint of tool.started
// rows whose operation an inserted event settles. It returns the keys it
// inserted and nothing else: every other key is a repeat or a conflict,
// whose stored digest digestsSQL reads afterwards, so the common all-new
// batch pays for no join of the input against what was inserted.
//
// The settle step looks each settled operation's events up (LATERAL,
// kept from being flattened into a join by OFFSET 0, so the batch's
// operations drive) by the operation index alone: the type and open tests
// stay outside the subquery, where the partial index of open tool.started
// rows cannot serve them. It then updates by seq.
// As a join, a plan made while the journal was small, which the generic
// plan keeps, walked every open tool.started of the journal (and every
// dead index entry of one) for each settling operation of the batch: one
// statement of a 1,000-event batch took 10 s at 100,000 events.
//
// The open hint's test is a scalar subquery with LIMIT 1, not NOT EXISTS:
// the planner may turn an EXISTS in a select list into a hashed subplan,
// which reads every settling row of the journal once per batch (17 ms at
// 100,000 events, growing with the journal); a scalar subquery is always
// an index probe per tool.started.
const ingestSQL = `
WITH ins AS (
    INSERT INTO journal_events (source_id, event_id, project, run_id, type, ts, actor,
        parent_source_id, parent_event_id, data, payload_digest, operation_id, settles, open)
    SELECT i.source_id, i.event_id, i.project, i.run_id, i.type, i.ts, i.actor,
        i.parent_source_id, i.parent_event_id, i.data, i.payload_digest, i.operation_id, i.settles,
        i.type = 'tool.started' AND i.open_in_batch AND (
            SELECT true FROM journal_events t
            WHERE t.project = i.project AND t.run_id = i.run_id
              AND t.operation_id = i.operation_id AND t.settles
            LIMIT 1) IS NULL
    FROM unnest(
        $1::text[], $2::text[], $3::text[], $4::text[], $5::text[], $6::timestamptz[],
        $7::text[], $8::text[], $9::text[], $10::jsonb[], $11::bytea[], $12::text[],
        $13::bool[], $14::bool[], $15::int[])
    AS i(source_id, event_id, project, run_id, type, ts, actor, parent_source_id,
         parent_event_id, data, payload_digest, operation_id, settles, open_in_batch, ord)
    ORDER BY i.ord
    ON CONFLICT (source_id, event_id) DO NOTHING
    RETURNING source_id, event_id, project, run_id, operation_id, settles
),
settle AS (
    UPDATE journal_events t SET open = false
    WHERE t.seq = ANY (ARRAY(
        SELECT o.seq
        FROM (SELECT DISTINCT project, run_id, operation_id FROM ins WHERE settles) s
        CROSS JOIN LATERAL (
            SELECT seq, type, open FROM journal_events o
            WHERE o.project = s.project AND o.run_id = s.run_id AND o.operation_id = s.operation_id
            OFFSET 0) o
        WHERE o.type = 'tool.started' AND o.open))
    RETURNING 1
)
SELECT source_id, event_id FROM ins`

// digestsSQL reads the stored digests of the keys ingestSQL did not insert
// (in a statement of its own, so it also sees a concurrent writer's rows
// that the insert waited for).
const digestsSQL = `
SELECT source_id, event_id, payload_digest FROM journal_events
WHERE (source_id, event_id) IN (SELECT * FROM unnest($1::text[], $2::text[]))`

const eventColumns = `source_id, event_id, project, run_id, type, ts, actor,
    parent_source_id, parent_event_id, data, seq`

// runEventsSQL lists a run's events in journal order.
const runEventsSQL = `SELECT ` + eventColumns + ` FROM journal_events
WHERE project = $1 AND run_id = $2 ORDER BY seq`

// runEventsPageSQL lists a page of a run's events after seq $3.
const runEventsPageSQL = `SELECT ` + eventColumns + ` FROM journal_events
WHERE project = $1 AND run_id = $2 AND seq > $3 ORDER BY seq LIMIT $4`

// runTerminalSQL is a run's newest run.completed or run.failed, and
// whether the journal has any event of the run at all.
const runTerminalSQL = `SELECT
  EXISTS (SELECT 1 FROM journal_events WHERE project = $1 AND run_id = $2),
  (SELECT type FROM journal_events WHERE project = $1 AND run_id = $2
     AND type IN ('run.completed', 'run.failed') ORDER BY seq DESC LIMIT 1)`

// typeEventsSQL lists a project's events of one type, newest first, from the
// (project, type, ts) index.
const typeEventsSQL = `SELECT ` + eventColumns + ` FROM journal_events
WHERE project = $1 AND type = $2 AND ts >= $3 ORDER BY ts DESC, seq DESC LIMIT $4`

// eventSQL reads one event by key.
const eventSQL = `SELECT ` + eventColumns + ` FROM journal_events
WHERE source_id = $1 AND event_id = $2`

// repairOpenSQL clears open hints that a race left behind: a settling event
// committed concurrently with its tool.started, each invisible to the other's
// statement. Bounded by the open set, which the listing keeps small.
const repairOpenSQL = `
UPDATE journal_events s SET open = false
WHERE s.type = 'tool.started' AND s.open AND EXISTS (
    SELECT 1 FROM journal_events t
    WHERE t.project = s.project AND t.run_id = s.run_id
      AND t.operation_id = s.operation_id AND t.settles)`

// operationEventsSQL lists one operation's events in journal order (index
// on project, run_id, operation_id).
const operationEventsSQL = `SELECT ` + eventColumns + ` FROM journal_events
WHERE project = $1 AND run_id = $2 AND operation_id = $3 ORDER BY seq`

// operationsEventsSQL is operationEventsSQL for several operations of one
// run (same index).
const operationsEventsSQL = `SELECT ` + eventColumns + ` FROM journal_events
WHERE project = $1 AND run_id = $2 AND operation_id = ANY($3::text[]) ORDER BY seq`

// verdictsNamingSQL lists a run's supervisor.verdict events that name the
// operation $3, in journal order.
const verdictsNamingSQL = `SELECT ` + eventColumns + ` FROM journal_events
WHERE project = $1 AND run_id = $2 AND type = 'supervisor.verdict'
  AND data->'operation_ids' @> jsonb_build_array($3::text)
ORDER BY seq`
