package pgtest

import (
	"context"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"
)

// resyncJournalDatesSQL carries journal rows' ingested_at, as a test set
// it, to what is kept of it elsewhere: each key row's copy, and each run's
// bounds (journal_runs' first_ingested_at and ingested_before), which every
// read of a run's events is bounded by.
const resyncJournalDatesSQL = `
UPDATE journal_keys k SET ingested_at = e.ingested_at
FROM journal_events e
WHERE e.seq = k.seq AND e.ingested_at <> k.ingested_at;
UPDATE journal_runs r SET first_ingested_at = f.first, ingested_before = reckon_week_after(f.last)
FROM (SELECT project, run_id, min(ingested_at) AS first, max(ingested_at) AS last
      FROM journal_events GROUP BY project, run_id) f
WHERE r.project = f.project AND r.run_id = f.run_id
  AND (r.first_ingested_at <> f.first OR r.ingested_before <> reckon_week_after(f.last))`

// RedateJournal runs update, a statement that sets journal_events'
// ingested_at (a test dating events as if journaled on its own clock),
// with args, and then carries the new dates to the key table and the runs
// index, as the ingest would have written them.
func RedateJournal(t testing.TB, db interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
}, update string, args ...any) {
	t.Helper()
	ctx := context.Background()
	if _, err := db.Exec(ctx, update, args...); err != nil {
		t.Fatalf("pgtest: redate the journal: %v", err)
	}
	if _, err := db.Exec(ctx, resyncJournalDatesSQL); err != nil {
		t.Fatalf("pgtest: redate the journal: %v", err)
	}
}

// AnalyzeJournalSQL analyzes the journal as autovacuum leaves it: each
// partition that holds rows, never the partitioned table itself nor the
// empty partitions made ahead (which autovacuum does not analyze until
// rows come), and the key table and runs index. A plan test that ran
// ANALYZE journal_events would make the empty partitions known empty,
// and their plans sequential scans, a state a running journal is not in.
const AnalyzeJournalSQL = `DO $$
DECLARE
    p regclass;
    has boolean;
BEGIN
    FOR p IN SELECT i.inhrelid::regclass FROM pg_inherits i WHERE i.inhparent = 'journal_events'::regclass LOOP
        EXECUTE format('SELECT EXISTS (SELECT 1 FROM %s)', p) INTO has;
        IF has THEN
            EXECUTE format('ANALYZE %s', p);
        END IF;
    END LOOP;
    ANALYZE journal_keys;
    ANALYZE journal_runs;
END $$`
