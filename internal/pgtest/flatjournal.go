package pgtest

// FlatIngestSQL is the ingest statement of the journal before it was
// partitioned (migration 00080): the key unique in journal_events itself,
// with kernel/journal's ingestSQL parameters. It is the reference that
// kernel/journal's TestIngestAnswersLikeFlatJournal holds the partitioned
// journal's answers and rows to, and that make bench-scale
// (internal/benchscale) measures the partitioned journal's ingest against,
// on a schema migrated to 00075.
const FlatIngestSQL = `
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

// FlatDigestsSQL is the journal's read of stored digests before the key
// table.
const FlatDigestsSQL = `
SELECT source_id, event_id, payload_digest FROM journal_events
WHERE (source_id, event_id) IN (SELECT * FROM unnest($1::text[], $2::text[]))`
