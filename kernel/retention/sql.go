package retention

import "github.com/seed-7bc021c3/reckon/kernel/journal"

// All of the journal retention's SQL, in one reviewed place
// (docs/scaling.md#time-partitions-and-retention). The evidence retention's
// statements live with their stores (kernel/manifest, kernel/priorstate).

// journalLockSQL and journalUnlockSQL bracket one journal maintenance pass
// on its connection: a session advisory lock keyed by the schema, so that
// of the publishers of every process one extends and drops at a time (two
// would create the same partition, or detach the same one, and one fail).
// The try form never waits: a pass another process is making is skipped.
const (
	journalLockSQL   = `SELECT pg_try_advisory_lock(hashtextextended('reckon journal retention ' || current_schema(), 0))`
	journalUnlockSQL = `SELECT pg_advisory_unlock(hashtextextended('reckon journal retention ' || current_schema(), 0))`
)

// extendSQL creates the weekly partitions up to the week holding $1
// (migrations/functions/reckon_journal_partitions.sql).
const extendSQL = `SELECT reckon_journal_extend($1)`

// partitionsSQL lists the journal's partitions, oldest first, the default
// partition among them (its bounds null), with the planner's estimate of
// their rows (the log's figure; a count would read the whole partition).
const partitionsSQL = `
SELECT p.name, p.lower_bound, p.upper_bound, p.is_default,
       greatest(c.reltuples, 0)::bigint
FROM reckon_journal_partitions() p
JOIN pg_class c ON c.oid = to_regclass(quote_ident(p.name))
ORDER BY p.upper_bound NULLS FIRST`

// defaultRowsSQL says whether the default partition holds a row: it takes
// what no weekly partition's range holds, so a row there means the
// partitions were not extended in time.
const defaultRowsSQL = `SELECT EXISTS (SELECT 1 FROM journal_events_default)`

// mattersSQL lists the runs that hold their partitions back: each run with
// an operation the listing shows, and each run the runs index says is
// awaiting. The first half is the listing's rule (kernel/operations
// projectsSQL) for every project at once: a tool.started with the open
// hint, inside the window by its ts or its ingested_at ($1, the window's
// start), that no event of the same operation settles. It leaves out the
// listing's floor on ts, so it holds a superset of what the listing can
// show, never less. The settling probe is bounded by the run's weeks, as
// every by-run read of the journal is (journal.RunBound).
// TestJournalHoldsPartitionOfListedOperation, TestJournalHoldsAwaitingRun.
var mattersSQL = `
SELECT s.project, s.run_id FROM journal_events s
WHERE s.type = 'tool.started' AND s.open
  AND (s.ts >= $1 OR s.ingested_at >= $1)
  AND NOT EXISTS (
      SELECT 1 FROM journal_events t
      WHERE t.project = s.project AND t.run_id = s.run_id AND t.operation_id = s.operation_id
        AND t.settles AND ` + journal.RunBound("t.ingested_at", "s") + `)
UNION
SELECT project, run_id FROM journal_runs WHERE status = 'awaiting'`

// holdersSQL keeps, of the runs $1/$2, those with an event ingested in
// [$3, $4), the range of one partition ($3 null for the oldest, which
// starts at MINVALUE): run-time pruning reads that partition alone, by its
// run index.
const holdersSQL = `
SELECT m.project, m.run_id
FROM unnest($1::text[], $2::text[]) AS m(project, run_id)
WHERE EXISTS (SELECT 1 FROM journal_events e
              WHERE e.project = m.project AND e.run_id = m.run_id
                AND e.ingested_at >= coalesce($3::timestamptz, '-infinity') AND e.ingested_at < $4)
ORDER BY 1, 2`

// runsBeforeSQL lists the runs whose first event was ingested before $1:
// those a partition ending at $1 may have held every event of. Read before
// the drop's lock (no new row can land before $1, which is past), so the
// lock is held for the probes alone.
const runsBeforeSQL = `SELECT project, run_id FROM journal_runs WHERE first_ingested_at < $1`

// exportSQL is the COPY of a partition's rows in journal order; %s is the
// partition's quoted name. CSV with a header names the columns, so the
// file loads back into any table of the journal's columns
// (docs/configuration.md, RECKON_JOURNAL_EXPORT_DIR).
const exportSQL = `COPY (SELECT * FROM %s ORDER BY seq) TO STDOUT WITH (FORMAT csv, HEADER)`

// The drop's transaction (Journal.drop). lockTimeoutSQL bounds the wait
// for the journal's lock: DETACH needs it exclusively, and a request
// queued behind a long read would stop every ingest and read behind it;
// past the timeout the pass gives up and the next one tries again.
// lockJournalSQL takes that lock first, so that nothing is journaled
// between the last check of the holding runs and the detach.
const (
	lockTimeoutSQL   = `SET LOCAL lock_timeout = '2s'`
	lockJournalSQL   = `LOCK TABLE ONLY journal_events IN ACCESS EXCLUSIVE MODE`
	detachSQL        = `ALTER TABLE journal_events DETACH PARTITION %s`
	dropPartitionSQL = `DROP TABLE %s`
)

// orphanRunsSQL deletes, of the runs $1/$2, those the journal no longer
// holds an event of (run in the drop's transaction, after the detach):
// the runs index lists runs of the journal, and a run whose every event
// was dropped is gone from it. Under the drop's lock no event of them can
// be journaled meanwhile; one journaled afterwards creates its run's row
// again. TestJournalDropsAndExportsOldPartition.
const orphanRunsSQL = `
DELETE FROM journal_runs r
USING unnest($1::text[], $2::text[]) AS c(project, run_id)
WHERE r.project = c.project AND r.run_id = c.run_id
  AND NOT EXISTS (SELECT 1 FROM journal_events e
                  WHERE e.project = r.project AND e.run_id = r.run_id
                    AND e.ingested_at >= r.first_ingested_at AND e.ingested_at < r.ingested_before)`

// keyPagesSQL is the key table's size in pages, the extent of the key
// sweep's walk.
const keyPagesSQL = `SELECT pg_relation_size('journal_keys') / current_setting('block_size')::bigint`

// pruneKeysSQL deletes the key rows ingested before $3 in the pages
// [$1, $2) of the key table, a TID range scan: the key table has no index
// on ingested_at, so the sweep walks the table once, a bounded range of
// pages per statement, rather than rescanning it from the start for each
// batch. TestJournalKeyHorizon.
const pruneKeysSQL = `
DELETE FROM journal_keys
WHERE ctid >= format('(%s,0)', $1::bigint)::tid AND ctid < format('(%s,0)', $2::bigint)::tid
  AND ingested_at < $3`
