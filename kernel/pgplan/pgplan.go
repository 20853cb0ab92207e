// Package pgplan runs a prepared statement on its cached generic plan.
//
// PostgreSQL plans a prepared statement afresh for its parameters (a
// "custom plan") as long as the generic plan's estimate looks dearer than
// the custom plans it has made. For the batch writes of the journal and the
// outbox it always does: an unnest of an array parameter is estimated at
// 100 rows, a batch of one at one row. Replanning then costs about 0.3 ms
// per call, most of what a single event costs the database. Their generic
// plans have the same shape at every batch size (index probes, one insert,
// joins on the batch's own rows), so the statements that Queue runs skip
// the replanning. The journal's TestIngestPlan checks that its generic plan
// reads the journal through indexes; the outbox's enqueue reads no table.
package pgplan

import (
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/seed-7bc021c3/reckon/kernel"
)

// ForceSQL switches the rest of the transaction to generic plans, keeping
// the mode it replaced in a setting of our own for RestoreSQL.
const ForceSQL = `SELECT set_config('reckon.saved_plan_cache_mode', current_setting('plan_cache_mode'), true),
    set_config('plan_cache_mode', 'force_generic_plan', true)`

// RestoreSQL puts back the plan_cache_mode ForceSQL replaced.
const RestoreSQL = `SELECT set_config('plan_cache_mode', current_setting('reckon.saved_plan_cache_mode'), true)`

// Queue queues sql with args on b to run on its generic plan, between
// ForceSQL and RestoreSQL, and returns its queued query for the caller's
// result handling. The three go in the batch's one round trip. Both
// settings are local to the transaction: in a caller's transaction the mode
// is as it was after the batch; on a pool or a connection outside one, the
// batch's implicit transaction ends with it. A batch that fails rolls the
// settings back with everything else.
func Queue(b *pgx.Batch, sql string, args ...any) *pgx.QueuedQuery {
	b.Queue(ForceSQL)
	q := b.Queue(sql, args...)
	b.Queue(RestoreSQL)
	return q
}

// QueueInserted is Queue for the journal's and the outbox's batch
// inserts, whose rows are the (source_id, event_id) keys they inserted:
// each is added to into when the batch's results are read.
func QueueInserted(b *pgx.Batch, into map[kernel.EventKey]bool, sql string, args ...any) {
	Queue(b, sql, args...).Query(func(rows pgx.Rows) error {
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
