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
