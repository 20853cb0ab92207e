// Package pgplan runs a prepared statement on its cached generic plan.
//
// PostgreSQL plans a prepared statement afresh for its parameters (a
// "custom plan") while the generic plan's estimate looks dearer, which for
// the batch writes of the journal and the outbox is always (an unnest of
// an array parameter is estimated at 100 rows): the replanning is most of
// what a single event costs the database. Their generic plans have the
// same shape at every batch size, so the statements Queue runs skip it.
//
// A generic plan lives until the statistics of a table it reads change,
// and on a table the planner knows nothing about (empty, never analyzed)
// every index looks alike. So the generic plan is only forced once the
// table a statement reads has been analyzed with at least MinAnalyzedRows
// rows (pg_class.reltuples); until then the statement is planned for its
// parameters as usual. Sequential scans are switched off for the
// statement as well. The journal's TestIngestPlan checks both sides.
package pgplan

import (
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/seed-7bc021c3/reckon/kernel"
)

// MinAnalyzedRows is the size a table must be known to have before its
// statements run on generic plans.
const MinAnalyzedRows = 10_000

// saveSettingsSQL keeps the two settings ForceSQL and forceAlwaysSQL
// replace in settings of our own, for RestoreSQL.
const saveSettingsSQL = `SELECT set_config('reckon.saved_plan_cache_mode', current_setting('plan_cache_mode'), true),
    set_config('reckon.saved_enable_seqscan', current_setting('enable_seqscan'), true),`

// ForceSQL switches the rest of the transaction to generic plans when the
// table $1 (” for a statement that reads none) has statistics of at least
// $2 rows, and off sequential scans, keeping the settings it replaced in
// settings of our own for RestoreSQL.
const ForceSQL = saveSettingsSQL + `
    set_config('plan_cache_mode', CASE
        WHEN $1::text = '' OR (SELECT reltuples FROM pg_class WHERE oid = to_regclass($1::text)) >= $2::float4
        THEN 'force_generic_plan' ELSE current_setting('plan_cache_mode') END, true),
    set_config('enable_seqscan', 'off', true)`

// forceAlwaysSQL is ForceSQL for a statement that reads no table that
// must be known large first (Queue with reads ”), without parameters.
// ForceSQL's parameters keep PostgreSQL planning it afresh for each call
// (its custom plan, which folds the empty name away, always looks cheaper
// than the generic one), while this one's one plan is cached.
const forceAlwaysSQL = saveSettingsSQL + `
    set_config('plan_cache_mode', 'force_generic_plan', true),
    set_config('enable_seqscan', 'off', true)`

// RestoreSQL puts back the settings ForceSQL replaced.
const RestoreSQL = `SELECT set_config('plan_cache_mode', current_setting('reckon.saved_plan_cache_mode'), true),
    set_config('enable_seqscan', current_setting('reckon.saved_enable_seqscan'), true)`

// Queue queues sql with args on b to run on its generic plan (once the
// table it reads, reads, is known to be large; ” when it reads none) and
// without sequential scans, between ForceSQL and RestoreSQL, and returns
// its queued query for the caller's result handling. The three go in the
// batch's one round trip. Both settings are local to the transaction: in
// a caller's transaction the mode is as it was after the batch; on a pool
// or a connection outside one, the batch's implicit transaction ends with
// it. A batch that fails rolls the settings back with everything else.
func Queue(b *pgx.Batch, reads, sql string, args ...any) *pgx.QueuedQuery {
	Force(b, reads)
	q := b.Queue(sql, args...)
	Restore(b)
	return q
}

// Force queues on b what Queue queues before its statement: the statements
// queued after it, up to Restore, run on their generic plans (once reads,
// ” for none, is known to be large) and without sequential scans. For
// several statements in a row, one Force and one Restore around them
// spare the two settings statements Queue pays per statement.
func Force(b *pgx.Batch, reads string) {
	if reads == "" {
		b.Queue(forceAlwaysSQL)
	} else {
		b.Queue(ForceSQL, reads, MinAnalyzedRows)
	}
}

// Restore queues the statement that ends what Force began.
func Restore(b *pgx.Batch) {
	b.Queue(RestoreSQL)
}

// QueueInserted is Queue for the journal's and the outbox's batch
// inserts, whose rows are the (source_id, event_id) keys they inserted:
// each is added to into when the batch's results are read.
func QueueInserted(b *pgx.Batch, into map[kernel.EventKey]bool, reads, sql string, args ...any) {
	Queue(b, reads, sql, args...).Query(func(rows pgx.Rows) error {
		for rows.Next() {
			var k kernel.EventKey
			if err := rows.Scan(&k.SourceID, &k.EventID); err != nil {
				return fmt.Errorf("scan an inserted key: %w", err)
			}
			into[k] = true
		}
		return rows.Err()
	})
}
