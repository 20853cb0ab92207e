package outbox

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/seed-7bc021c3/reckon/internal/pgtest"
	"github.com/seed-7bc021c3/reckon/kernel"
	"github.com/seed-7bc021c3/reckon/kernel/pgplan"
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
// it). Ordered by id, the planner could walk every pending row in id
// order to spare sorting a run's few, on each of the sweep's two reads
// per wall.
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
	tx := s.Tx(t)
	fill := func() {
		if _, err := tx.Exec(ctx, fillPendingSQL); err != nil {
			t.Fatal(err)
		}
	}
	if analyzeBacklog {
		fill()
	}
	if _, err := tx.Exec(ctx, `ANALYZE kernel_event_outbox, kernel_event_outbox_undelivered`); err != nil {
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

// TestReadsPlannedOnASmallOutbox: the outbox's reads by key and by run
// first run while the outbox is nearly empty (statistics say so too:
// analyzed empty), and the plans they cache then serve an outbox of 6,000
// rows — a triage sweep's lock connections, new each sweep, read twice per
// wall an outbox the sweep's own walls fill; a long-lived connection of a
// fresh installation does the same until autovacuum analyzes the table.
// Left to the planner, the pending reads' plan can be a sequential scan of
// every row. Every read must stay an index scan. Counted by PostgreSQL
// itself (the transaction's own scan counts), through the functions reckon
// calls.
func TestReadsPlannedOnASmallOutbox(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	repeated := kernel.Event{SourceID: kernel.SourceKernel, EventID: "r-1/op-1/started", Project: "p", RunID: "r-1",
		Type: kernel.TypeToolStarted, TS: time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC), Actor: "kernel",
		Data: []byte(`{"operation_id":"op-1","tool":"run_command"}`)}
	for _, c := range []struct {
		name string
		read func(t *testing.T, tx pgx.Tx)
	}{
		{"pending of a run", func(t *testing.T, tx pgx.Tx) { pending(t, tx, PendingFilter{Project: "p", RunID: "r-1"}) }},
		{"pending of a run, its caller forcing the plan", func(t *testing.T, tx pgx.Tx) {
			var (
				b    pgx.Batch
				into []kernel.Event
			)
			pgplan.Force(&b, "")
			if err := QueuePendingForced(&b, PendingFilter{Project: "p", RunID: "r-1"}, &into); err != nil {
				t.Fatal(err)
			}
			pgplan.Restore(&b)
			if err := tx.SendBatch(ctx, &b).Close(); err != nil {
				t.Fatal(err)
			}
		}},
		{"pending of a run by type", func(t *testing.T, tx pgx.Tx) {
			pending(t, tx, PendingFilter{Project: "p", RunID: "r-1", Types: []string{"operation.reconciled"}})
		}},
		{"pending of an operation", func(t *testing.T, tx pgx.Tx) {
			pending(t, tx, PendingFilter{Project: "p", RunID: "r-1", OperationID: "op-1"})
		}},
		{"pending count of runs", func(t *testing.T, tx pgx.Tx) {
			if _, err := PendingCount(ctx, tx, kernel.RunKey{Project: "p", RunID: "r-1"}, kernel.RunKey{Project: "p", RunID: "r-2"}); err != nil {
				t.Fatal(err)
			}
		}},
		{"stored event", func(t *testing.T, tx pgx.Tx) {
			if _, _, err := Stored(ctx, tx, kernel.EventKey{SourceID: "s", EventID: "e-1"}); err != nil {
				t.Fatal(err)
			}
		}},
		{"enqueue's recheck of a repeated event", func(t *testing.T, tx pgx.Tx) {
			if err := Enqueue(ctx, tx, repeated); err != nil {
				t.Fatal(err)
			}
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			s := pgtest.New(t)
			tx := s.Tx(t)
			if err := Enqueue(ctx, tx, repeated); err != nil {
				t.Fatal(err)
			}
			if _, err := tx.Exec(ctx, `ANALYZE kernel_event_outbox, kernel_event_outbox_undelivered`); err != nil {
				t.Fatal(err)
			}
			// More than the five custom plans PostgreSQL makes before it
			// settles on a generic one.
			for range 7 {
				c.read(t, tx)
			}
			if _, err := tx.Exec(ctx, fillPendingSQL); err != nil {
				t.Fatal(err)
			}
			seq0, idx0 := outboxScans(t, tx)
			c.read(t, tx)
			seq1, idx1 := outboxScans(t, tx)
			if seq1 != seq0 {
				t.Errorf("%d sequential scans of the outbox; want none", seq1-seq0)
			}
			if idx1 == idx0 {
				t.Error("no index scan of the outbox")
			}
		})
	}
}

// fillPendingSQL writes 6,000 pending rows of project p, runs r-0 …
// r-299, operations op-0 … op-6 (the table's trigger makes them pending).
const fillPendingSQL = `
INSERT INTO kernel_event_outbox (source_id, event_id, event, payload_digest)
SELECT 's', 'e-' || g, jsonb_build_object('project', 'p', 'run_id', 'r-' || (g % 300), 'type', 'tool.started',
    'data', jsonb_build_object('operation_id', 'op-' || (g % 7))), '\x00'
FROM generate_series(1, 6000) g`

func pending(t *testing.T, tx pgx.Tx, f PendingFilter) {
	t.Helper()
	if _, err := Pending(context.Background(), tx, f); err != nil {
		t.Fatal(err)
	}
}

// outboxScans is how many sequential and index scans of the outbox and
// its undelivered rows the transaction has made.
func outboxScans(t *testing.T, tx pgx.Tx) (seq, idx int64) {
	t.Helper()
	if err := tx.QueryRow(context.Background(), `SELECT sum(seq_scan)::bigint, COALESCE(sum(idx_scan), 0)::bigint FROM pg_stat_xact_user_tables
WHERE schemaname = current_schema() AND relname IN ('kernel_event_outbox', 'kernel_event_outbox_undelivered')`).Scan(&seq, &idx); err != nil {
		t.Fatal(err)
	}
	return seq, idx
}

// TestPendingCountOfRuns: one count over several runs adds up each run's
// undelivered rows, and only theirs: not another run's, not a delivered
// or parked one, not a run of the same id in another project.
func TestPendingCountOfRuns(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := pgtest.New(t)
	t0 := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	var evs []kernel.Event
	for _, r := range []kernel.RunKey{{Project: "p", RunID: "a"}, {Project: "p", RunID: "a"}, {Project: "p", RunID: "a"}, {Project: "p", RunID: "b"}, {Project: "p", RunID: "b"}, {Project: "p", RunID: "c"}, {Project: "q", RunID: "a"}} {
		evs = append(evs, kernel.Event{SourceID: kernel.SourceKernel, EventID: fmt.Sprintf("%s/%s/%d", r.Project, r.RunID, len(evs)),
			Project: r.Project, RunID: r.RunID, Type: kernel.TypeRunCompleted, TS: t0, Actor: "kernel", Data: []byte(`{}`)})
	}
	if err := Enqueue(ctx, s.Pool, evs...); err != nil {
		t.Fatal(err)
	}
	id := func(eventID string) []int64 {
		var id int64
		if err := s.Pool.QueryRow(ctx, `SELECT id FROM kernel_event_outbox WHERE event_id = $1`, eventID).Scan(&id); err != nil {
			t.Fatal(err)
		}
		return []int64{id}
	}
	if _, err := s.Pool.Exec(ctx, markDeliveredSQL, id("p/a/0")); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Pool.Exec(ctx, parkSQL, id("p/b/3"), []string{"a test's"}); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		runs []kernel.RunKey
		want int
	}{
		{[]kernel.RunKey{{Project: "p", RunID: "a"}, {Project: "p", RunID: "b"}}, 3},
		{[]kernel.RunKey{{Project: "p", RunID: "a"}}, 2},
		{[]kernel.RunKey{{Project: "q", RunID: "a"}, {Project: "p", RunID: "c"}}, 2},
		{[]kernel.RunKey{{Project: "p", RunID: "z"}}, 0},
		{nil, 0},
	} {
		if n, err := PendingCount(ctx, s.Pool, c.runs...); err != nil || n != c.want {
			t.Errorf("PendingCount(%v) = %d, %v; want %d", c.runs, n, err, c.want)
		}
	}
}
