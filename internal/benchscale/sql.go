package benchscale

// All of the harness's SQL. Statements that name another schema take it
// through fmt (%s: a sanitized identifier); the others run on a pool whose
// search_path is the schema measured.

// spanSQL is the span of ingested_at the journal is spread over: from the
// Monday 00:00 UTC $1 weeks before this week's to an hour ago (so the
// listing's window holds the newest runs).
const spanSQL = `SELECT (date_trunc('week', now() AT TIME ZONE 'UTC') AT TIME ZONE 'UTC') - make_interval(weeks => $1::int),
       now() - interval '1 hour'`

// generateSQL writes the events of runs $1 to $2-1 of $3, each a
// run.started, $4 tool.started/tool.completed pairs and a run.completed,
// one second apart, the runs' first events spread evenly over the span
// $6..$7. Projects: three runs in ten go to the five big projects, the
// others round the remaining $5-5. One run in $8, picked by a hash of its
// number (so that big projects and small get their share: a residue of r
// would pick by project), leaves its last operation unsettled (no
// tool.completed; its tool.started open), so the listing and the sweep
// have work. Rows are written in run order, so seq
// follows ingested_at, as in a journal written as it goes.
const generateSQL = `
INSERT INTO journal_events (source_id, event_id, project, run_id, type, ts, actor, data,
    payload_digest, ingested_at, operation_id, settles, open)
SELECT 'agent-' || (x.pr % 16), 'r' || r || '-e' || j, 'proj-' || lpad(x.pr::text, 4, '0'), 'run-' || r, y.ty,
       y.at - interval '50 milliseconds', 'agent',
       CASE y.ty
           WHEN 'run.started' THEN jsonb_build_object('agent', 'bench-scale')
           WHEN 'tool.started' THEN jsonb_build_object('operation_id', 'op-' || y.o, 'tool', 'tool_' || (y.o % 12),
               'args', jsonb_build_object('path', '/src/pkg' || (r % 97) || '/file' || y.o || '.go', 'line', y.o * 7))
           WHEN 'tool.completed' THEN jsonb_build_object('operation_id', 'op-' || y.o,
               'result', jsonb_build_object('ok', true, 'bytes', y.o * 13))
           ELSE '{}'::jsonb END,
       sha256(convert_to('r' || r || '-e' || j || y.ty, 'UTF8')), y.at,
       CASE WHEN y.ty LIKE 'tool.%' THEN 'op-' || y.o END,
       y.ty = 'tool.completed',
       y.ty = 'tool.started' AND x.unsettled AND y.o = $4 - 1
FROM generate_series($1::bigint, $2::bigint - 1) r
CROSS JOIN LATERAL (
    SELECT CASE WHEN r % 10 < 3 THEN (r / 10) % 5 ELSE 5 + r % ($5::int - 5) END AS pr,
           $6::timestamptz + ($7::timestamptz - $6::timestamptz) * (r::float8 / $3::bigint) AS base,
           hashint8(r) % $8::int = 0 AS unsettled) x
CROSS JOIN LATERAL generate_series(0, 2 * $4::int + 1) j
CROSS JOIN LATERAL (
    SELECT CASE WHEN j = 0 THEN 'run.started' WHEN j = 2 * $4::int + 1 THEN 'run.completed'
                WHEN j % 2 = 1 THEN 'tool.started' ELSE 'tool.completed' END AS ty,
           (j - 1) / 2 AS o,
           x.base + j * interval '1 second' AS at) y
WHERE NOT (x.unsettled AND y.ty = 'tool.completed' AND y.o = $4::int - 1)
ORDER BY r, j`

// runBoundsSQL lists, as ALTER TABLE clauses, the columns the partitioned
// journal's runs index (schema %[1]s) has and the current schema's lacks:
// the run bounds every read of a run's events is bounded by (migration
// 00080), which journal_runs_track fills as the journal is written, so
// that the flat reference runs the same reads. Empty when none.
const runBoundsSQL = `
SELECT coalesce(string_agg(format('ADD COLUMN %%I %%s', a.attname, format_type(a.atttypid, a.atttypmod)), ', '), '')
FROM pg_attribute a
WHERE a.attrelid = '%[1]s.journal_runs'::regclass AND a.attnum > 0 AND NOT a.attisdropped
  AND a.attname NOT IN (SELECT column_name FROM information_schema.columns
                        WHERE table_schema = current_schema() AND table_name = 'journal_runs')`

// dropLegacySQL removes the partition migration 00080 made of the (empty)
// journal it found, which holds every ingested_at before next week: the
// partitioned journal of the measurement has a partition per week of its
// span instead, created before its rows land (weekPartitionSQL).
const dropLegacySQL = `ALTER TABLE journal_events DETACH PARTITION journal_events_legacy;
DROP TABLE journal_events_legacy`

// weekPartitionSQL creates the week from %[2]s to %[3]s (quoted literals),
// named as reckon_journal_extend names its weeks (%[1]s).
const weekPartitionSQL = `CREATE TABLE %[1]s PARTITION OF journal_events FOR VALUES FROM (%[2]s) TO (%[3]s)`

// partitionsSQL lists the journal's partitions, oldest first, with their
// row counts.
const partitionsSQL = `SELECT p.name, p.lower_bound, p.upper_bound, p.is_default FROM reckon_journal_partitions() p`

// replicaSQL turns the connection's triggers off for a bulk copy of rows
// (journal_runs is copied as the flat journal's triggers built it).
const replicaSQL = `SET session_replication_role = replica`

// copyEventsSQL copies the events of seq $1 to $2-1 of schema %[1]s into
// the current one, seq included.
const copyEventsSQL = `
INSERT INTO journal_events (seq, source_id, event_id, project, run_id, type, ts, actor,
    parent_source_id, parent_event_id, data, payload_digest, ingested_at, operation_id, settles, open)
OVERRIDING SYSTEM VALUE
SELECT seq, source_id, event_id, project, run_id, type, ts, actor,
    parent_source_id, parent_event_id, data, payload_digest, ingested_at, operation_id, settles, open
FROM %[1]s.journal_events WHERE seq >= $1 AND seq < $2 ORDER BY seq`

// copyKeysSQL fills the key table of the partitioned journal for the
// events of seq $1 to $2-1 of schema %[1]s, as its ingest would have.
const copyKeysSQL = `
INSERT INTO journal_keys (source_id, event_id, project, run_id, seq, ingested_at, payload_digest)
SELECT source_id, event_id, project, run_id, seq, ingested_at, payload_digest
FROM %[1]s.journal_events WHERE seq >= $1 AND seq < $2`

// copyRunsSQL copies the runs index (columns %[2]s) from schema %[1]s.
const copyRunsSQL = `INSERT INTO journal_runs (%[2]s) OVERRIDING SYSTEM VALUE SELECT %[2]s FROM %[1]s.journal_runs`

// columnsSQL lists a table's columns of the current schema in order.
const columnsSQL = `SELECT string_agg(quote_ident(column_name), ', ' ORDER BY ordinal_position)
FROM information_schema.columns WHERE table_schema = current_schema() AND table_name = $1`

// resetSequencesSQL sets the identity sequences past the copied rows.
const resetSequencesSQL = `
SELECT setval(pg_get_serial_sequence('journal_events', 'seq'), (SELECT coalesce(max(seq), 0) + 1 FROM journal_events), false),
       setval(pg_get_serial_sequence('journal_runs', 'listed'), (SELECT coalesce(max(listed), 0) + 1 FROM journal_runs), false)`

// seqRangeSQL is the journal's seq range.
const seqRangeSQL = `SELECT coalesce(min(seq), 0), coalesce(max(seq), 0) FROM journal_events`

// countEventsSQL counts the journal's events.
const countEventsSQL = `SELECT count(*) FROM journal_events`

// sizeSQL is the bytes on disk of the journal (every partition, with
// indexes and TOAST), the key table where there is one, and the runs
// index; and of the key table alone.
const sizeSQL = `
SELECT CASE WHEN (SELECT relkind FROM pg_class WHERE oid = 'journal_events'::regclass) = 'p'
            THEN (SELECT sum(pg_total_relation_size(relid)) FROM pg_partition_tree('journal_events'))::bigint
            ELSE pg_total_relation_size('journal_events') END
     + coalesce(pg_total_relation_size(to_regclass('journal_keys')), 0)
     + pg_total_relation_size('journal_runs'),
       coalesce(pg_total_relation_size(to_regclass('journal_keys')), 0)`

// vacuumSQL is the VACUUM timed after the retention drop; vacuumAnalyzeSQL
// readies a freshly loaded journal (visibility map set, statistics), so
// that both journals start the measurements alike.
const (
	vacuumSQL        = `VACUUM journal_events`
	vacuumAnalyzeSQL = `VACUUM (ANALYZE) journal_events, journal_runs`
	analyzeKeysSQL   = `VACUUM (ANALYZE) journal_keys`
)

// checkpointSQL starts each side of a measurement with no dirty pages of
// the other's left to write.
const checkpointSQL = `CHECKPOINT`

// deleteBeforeSQL is the flat journal's retention: a DELETE of the rows
// the partitioned journal's oldest partition held.
const deleteBeforeSQL = `DELETE FROM journal_events WHERE ingested_at < $1`

// countBeforeSQL counts the rows ingested before $1.
const countBeforeSQL = `SELECT count(*) FROM journal_events WHERE ingested_at < $1`

// Conversion checks (schema %[1]s is the flat journal it was copied from).
const (
	// keysMissingSQL counts the events whose key is not in journal_keys.
	keysMissingSQL = `SELECT count(*) FROM journal_events e
WHERE NOT EXISTS (SELECT 1 FROM journal_keys k WHERE k.source_id = e.source_id AND k.event_id = e.event_id)`
	// keysCountSQL counts the key table's rows.
	keysCountSQL = `SELECT count(*) FROM journal_keys`
	// differSQL counts the events of either journal not matched, one for
	// one, by an event of the other: lost or duplicated ones.
	differSQL = `SELECT
  (SELECT count(*) FROM (SELECT seq, source_id, event_id, payload_digest, ingested_at FROM journal_events
                         EXCEPT ALL SELECT seq, source_id, event_id, payload_digest, ingested_at FROM %[1]s.journal_events) a)
+ (SELECT count(*) FROM (SELECT seq, source_id, event_id, payload_digest, ingested_at FROM %[1]s.journal_events
                         EXCEPT ALL SELECT seq, source_id, event_id, payload_digest, ingested_at FROM journal_events) b)`
	// unboundRunsSQL counts the runs without a first ingested_at.
	unboundRunsSQL = `SELECT count(*) FROM journal_runs WHERE first_ingested_at IS NULL`
)
