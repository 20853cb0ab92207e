package outbox

import (
	"context"
	"strings"
	"testing"

	"github.com/seed-7bc021c3/reckon/internal/pgtest"
)

// TestPendingUsesTheIndex checks, under a prepared statement's generic
// plan (what pgx's statement cache ends up running), that reading a run's
// or an operation's pending events is an index lookup on run_id (and
// operation_id), not a filter over every pending row of the project: the
// one-statement form ("$2 is empty OR run_id = $2") planned so.
func TestPendingUsesTheIndex(t *testing.T) {
	t.Parallel()
	// Table statistics as of a backlog: the planner then prefers the
	// partial index to a sequential scan, as it does in production.
	checkPendingPlans(t, true, "force_generic_plan")
}

// TestPendingUsesTheIndexOnStaleStatistics: the same with statistics
// taken while the outbox was empty and a backlog since (a fresh database,
// or a sweep whose walls fill the outbox faster than autovacuum analyzes
// it). Ordered by id, the planner walked every pending row in id order
// to spare sorting a run's few: 3 ms instead of 0.16 ms per read with
// 6,000 rows pending, on each of the sweep's two reads per wall.
func TestPendingUsesTheIndexOnStaleStatistics(t *testing.T) {
	t.Parallel()
	for _, mode := range []string{"force_custom_plan", "force_generic_plan"} {
		t.Run(mode, func(t *testing.T) {
			t.Parallel()
			checkPendingPlans(t, false, mode)
		})
	}
}

// checkPendingPlans fills the outbox with 6,000 pending rows (analyzed
// after, or before while it is empty) and checks that the plans of the
// run's and the operation's pending reads look run_id (and operation_id)
// up in the index, under plan_cache_mode planMode.
func checkPendingPlans(t *testing.T, analyzeBacklog bool, planMode string) {
	t.Helper()
	ctx := context.Background()
	s := pgtest.New(t)
	tx, err := s.Pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback(ctx) }()
	fill := func() {
		if _, err := tx.Exec(ctx, `INSERT INTO kernel_event_outbox (source_id, event_id, event, payload_digest)
SELECT 's', 'e-' || g, jsonb_build_object('project', 'p', 'run_id', 'r-' || (g % 300), 'type', 'tool.started',
    'data', jsonb_build_object('operation_id', 'op-' || (g % 7))), '\x00'
FROM generate_series(1, 6000) g`); err != nil {
			t.Fatal(err)
		}
	}
	if analyzeBacklog {
		fill()
	}
	if _, err := tx.Exec(ctx, `ANALYZE kernel_event_outbox`); err != nil {
		t.Fatal(err)
	}
	if !analyzeBacklog {
		fill()
	}
	if _, err := tx.Exec(ctx, `SET LOCAL plan_cache_mode = `+planMode); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name, sql, args string
		want            []string
	}{
		{"run", pendingRunSQL, `('p', 'r-1', NULL)`, []string{"run_id"}},
		{"operation", pendingOperationSQL, `('p', 'r-1', 'op-1', NULL)`, []string{"run_id", "operation_id"}},
	} {
		if _, err := tx.Exec(ctx, "PREPARE pending_"+c.name+" AS "+c.sql); err != nil {
			t.Fatal(err)
		}
		plan := pgtest.Explain(t, tx, "EXECUTE pending_"+c.name+c.args)
		var cond strings.Builder
		for _, line := range strings.Split(plan, "\n") {
			if strings.Contains(line, "Index Cond") {
				cond.WriteString(line)
			}
		}
		for _, col := range c.want {
			if !strings.Contains(cond.String(), col) {
				t.Errorf("%s: the plan (%s) does not look %s up in the index:\n%s", c.name, planMode, col, plan)
			}
		}
	}
}

// TestPendingPlanMadeOnASmallOutbox: the reads of pending rows first run
// while the outbox is nearly empty (statistics say so too: analyzed
// empty), and the plan they cache then serves an outbox of 6,000 rows —
// a triage sweep's lock connections, new each sweep, read twice per wall
// an outbox the sweep's own walls fill. Left to the planner, that plan was
// a sequential scan of every row, 1 ms a read at 6,000 rows; the reads
// must stay index scans. Counted by PostgreSQL itself (the transaction's
// own scan counts), through the functions reckon calls.
func TestPendingPlanMadeOnASmallOutbox(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := pgtest.New(t)
	tx, err := s.Pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback(ctx) }()
	if _, err := tx.Exec(ctx, `ANALYZE kernel_event_outbox`); err != nil {
		t.Fatal(err)
	}
	filters := []PendingFilter{
		{Project: "p", RunID: "r-1"},
		{Project: "p", RunID: "r-1", Types: []string{"operation.reconciled"}},
		{Project: "p", RunID: "r-1", OperationID: "op-1"},
	}
	read := func() {
		t.Helper()
		for _, f := range filters {
			if _, err := Pending(ctx, tx, f); err != nil {
				t.Fatal(err)
			}
		}
	}
	// More than the five custom plans PostgreSQL makes before it settles
	// on a generic one.
	for range 7 {
		read()
	}
	if _, err := tx.Exec(ctx, `INSERT INTO kernel_event_outbox (source_id, event_id, event, payload_digest)
SELECT 's', 'e-' || g, jsonb_build_object('project', 'p', 'run_id', 'r-' || (g % 300), 'type', 'tool.started',
    'data', jsonb_build_object('operation_id', 'op-' || (g % 7))), '\x00'
FROM generate_series(1, 6000) g`); err != nil {
		t.Fatal(err)
	}
	scans := func() (seq, idx int64) {
		t.Helper()
		if err := tx.QueryRow(ctx, `SELECT seq_scan, COALESCE(idx_scan, 0) FROM pg_stat_xact_user_tables
WHERE schemaname = current_schema() AND relname = 'kernel_event_outbox'`).Scan(&seq, &idx); err != nil {
			t.Fatal(err)
		}
		return seq, idx
	}
	seq0, idx0 := scans()
	read()
	seq1, idx1 := scans()
	if seq1 != seq0 {
		t.Errorf("%d sequential scans of the outbox for %d reads of pending rows; want none", seq1-seq0, len(filters))
	}
	if idx1-idx0 < int64(len(filters)) {
		t.Errorf("%d index scans of the outbox for %d reads of pending rows; want one each", idx1-idx0, len(filters))
	}
}
