package journal

// All of the journal's SQL, in one reviewed place.

// ingestSQL writes a batch in one round trip. Inputs arrive as parallel
// arrays; the insert skips existing keys; the settle step clears the open
// hint of tool.started rows whose operation an inserted event settles; the
// final select reports, per input row, whether it was inserted and otherwise
// the stored digest to compare with.
const ingestSQL = `
WITH input AS (
    SELECT * FROM unnest(
        $1::text[], $2::text[], $3::text[], $4::text[], $5::text[], $6::timestamptz[],
        $7::text[], $8::text[], $9::text[], $10::jsonb[], $11::bytea[], $12::text[],
        $13::bool[], $14::bool[], $15::int[])
    AS i(source_id, event_id, project, run_id, type, ts, actor, parent_source_id,
         parent_event_id, data, payload_digest, operation_id, settles, open_in_batch, ord)
),
ins AS (
    INSERT INTO journal_events (source_id, event_id, project, run_id, type, ts, actor,
        parent_source_id, parent_event_id, data, payload_digest, operation_id, settles, open)
    SELECT i.source_id, i.event_id, i.project, i.run_id, i.type, i.ts, i.actor,
        i.parent_source_id, i.parent_event_id, i.data, i.payload_digest, i.operation_id, i.settles,
        i.type = 'tool.started' AND i.open_in_batch AND NOT EXISTS (
            SELECT 1 FROM journal_events t
            WHERE t.project = i.project AND t.run_id = i.run_id
              AND t.operation_id = i.operation_id AND t.settles)
    FROM input i
    ORDER BY i.ord
    ON CONFLICT (source_id, event_id) DO NOTHING
    RETURNING source_id, event_id, project, run_id, operation_id, settles
),
settle AS (
    UPDATE journal_events t SET open = false
    FROM (SELECT DISTINCT project, run_id, operation_id FROM ins WHERE settles) s
    WHERE t.type = 'tool.started' AND t.open
      AND t.project = s.project AND t.run_id = s.run_id AND t.operation_id = s.operation_id
    RETURNING 1
)
SELECT i.ord, ins.event_id IS NOT NULL,
    CASE WHEN ins.event_id IS NULL THEN (
        SELECT e.payload_digest FROM journal_events e
        WHERE e.source_id = i.source_id AND e.event_id = i.event_id) END
FROM input i
LEFT JOIN ins ON ins.source_id = i.source_id AND ins.event_id = i.event_id
ORDER BY i.ord`

// digestsSQL re-reads stored digests for keys a concurrent writer committed
// after the ingest statement took its snapshot.
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
