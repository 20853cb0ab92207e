package operations

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/seed-7bc021c3/reckon/internal/pgtest"
	"github.com/seed-7bc021c3/reckon/kernel/pgplan"
)

// TestListingPlanReadsTheOpenIndex: the listing and Projects read the open
// set through journal_events_open_ops from the floor of ts, with the
// window (ts or ingested_at) as a filter over it, and never walk the
// journal: planned for their parameters and as the generic plan a
// prepared statement settles on, over an analyzed journal of settled
// history with a few open operations.
func TestListingPlanReadsTheOpenIndex(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := pgtest.New(t)
	now := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	for _, q := range []string{
		benchHistorySQL,
		`INSERT INTO journal_events (source_id, event_id, project, run_id, type, ts, actor, data,
    payload_digest, operation_id, open)
SELECT 'agent-x', 'open-' || g, 'acme', 'open-run', 'tool.started', $3::timestamptz - g * interval '1 hour',
    'agent', '{}', '\x00', 'op-' || g, true
FROM generate_series($1::int, $2::int) g`,
		pgtest.AnalyzeJournalSQL,
	} {
		var args []any
		switch q {
		case benchHistorySQL:
			args = []any{int64(0), int64(1000), now}
		case pgtest.AnalyzeJournalSQL:
		default:
			args = []any{1, 50, now}
		}
		if _, err := s.Pool.Exec(ctx, q, args...); err != nil {
			t.Fatalf("%s: %v", strings.Fields(q)[0], err)
		}
	}
	conn, since, floor := windowConn(t, s, now)
	// The open set is read through its index with ts bounded in the index
	// condition, not walked whole and filtered.
	check := func(what, plan string) {
		t.Helper()
		lines := strings.Split(plan, "\n")
		bounded := false
		for i, l := range lines {
			if strings.Contains(l, "journal_events_open_ops") {
				for _, c := range lines[i+1:] {
					if strings.Contains(c, "Index Cond:") {
						bounded = strings.Contains(c, "(ts >= ")
						break
					}
				}
				break
			}
		}
		if strings.Contains(plan, "Seq Scan on journal_events") || !bounded {
			t.Errorf("%s: not a range of journal_events_open_ops from the floor of ts:\n%s", what, plan)
		}
	}
	for _, mode := range []string{"auto", "force_generic_plan"} {
		if _, err := conn.Exec(ctx, `SET plan_cache_mode = `+mode); err != nil {
			t.Fatal(err)
		}
		if _, err := conn.Exec(ctx, `PREPARE list AS `+listSQL); err != nil {
			t.Fatal(err)
		}
		if _, err := conn.Exec(ctx, `PREPARE projects AS `+projectsSQL); err != nil {
			t.Fatal(err)
		}
		check(mode+": listing, first page", pgtest.Explain(t, conn, fmt.Sprintf(`EXECUTE list('acme', %s, '', %s, 0, 51, %s)`, lit(since), lit(floor), lit(floor))))
		check(mode+": listing, one run", pgtest.Explain(t, conn, fmt.Sprintf(`EXECUTE list('acme', %s, 'open-run', %s, 0, 51, %s)`, lit(since), lit(floor), lit(floor))))
		check(mode+": projects", pgtest.Explain(t, conn, fmt.Sprintf(`EXECUTE projects(%s, %s)`, lit(since), lit(floor))))
		if _, err := conn.Exec(ctx, `DEALLOCATE list; DEALLOCATE projects`); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := conn.Exec(ctx, `RESET plan_cache_mode`); err != nil {
		t.Fatal(err)
	}
}

// TestRunUnchangedGuardReadsByIndex: QueueReconcileAll's guard reads the
// outbox by the run's pending index and the journal by the operation
// index, on a plan made while the outbox held one row and kept as it grew
// (the sweep's lock connections make their plans at the start of a sweep
// whose walls then fill the outbox): no sequential scan of either.
func TestRunUnchangedGuardReadsByIndex(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := pgtest.New(t)
	tx := s.Tx(t)
	for _, q := range []string{
		`INSERT INTO kernel_event_outbox (source_id, event_id, event, payload_digest)
VALUES ('s', 'e-0', '{"project":"p","run_id":"r-1","type":"tool.started","data":{"operation_id":"op-1"}}', '\x00')`,
		`INSERT INTO journal_events (source_id, event_id, project, run_id, type, ts, actor, data, payload_digest, operation_id)
SELECT 'agent-x', 'j-' || g, 'p', 'r-' || (g % 300), 'tool.started', now(), 'agent', '{}', '\x00', 'op-' || (g % 7)
FROM generate_series(1, 3000) g`,
		`ANALYZE kernel_event_outbox`, pgtest.AnalyzeJournalSQL,
	} {
		if _, err := tx.Exec(ctx, q); err != nil {
			t.Fatal(err)
		}
	}
	guard := func() {
		t.Helper()
		var b pgx.Batch
		pgplan.Force(&b, "")
		// Unchanged: the journal's events of op-1 in r-1 and the run's
		// pending row are the ones read.
		b.Queue(readUnchangedSQL, "p", "r-1", []string{"op-1"}, []string{"agent-x", "agent-x"}, []string{"j-1", "j-2101"}, []string{"s"}, []string{"e-0"})
		pgplan.Restore(&b)
		if err := tx.SendBatch(ctx, &b).Close(); err != nil {
			t.Fatal(err)
		}
	}
	// More than the five custom plans PostgreSQL makes before it settles
	// on a generic one.
	for range 7 {
		guard()
	}
	if _, err := tx.Exec(ctx, `INSERT INTO kernel_event_outbox (source_id, event_id, event, payload_digest)
SELECT 's', 'e-' || g, jsonb_build_object('project', 'p', 'run_id', 'other-' || (g % 300), 'type', 'tool.started',
    'data', jsonb_build_object('operation_id', 'op-' || (g % 7))), '\x00'
FROM generate_series(1, 6000) g`); err != nil {
		t.Fatal(err)
	}
	scans := func() (seq int64) {
		t.Helper()
		if err := tx.QueryRow(ctx, `SELECT sum(seq_scan) FROM pg_stat_xact_user_tables
WHERE schemaname = current_schema() AND relname IN ('kernel_event_outbox', 'journal_events')`).Scan(&seq); err != nil {
			t.Fatal(err)
		}
		return seq
	}
	before := scans()
	guard()
	if n := scans() - before; n != 0 {
		t.Errorf("the guard made %d sequential scans of the outbox and the journal; want none", n)
	}
}

// TestRunsPlansReadTheirIndexes: a page of runs is an index range of the
// runs index in the list's order (all runs, one status, one run's
// children: each its own index), and the page's operation counts and a
// run's operations read the journal by index, never a sequential scan of
// either table: planned for their parameters and as the generic plan a
// prepared statement settles on, over an analyzed journal of history.
func TestRunsPlansReadTheirIndexes(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := pgtest.New(t)
	now := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	for _, q := range []string{benchHistorySQL, `UPDATE journal_runs SET status = 'awaiting' WHERE run_id IN ('h10', 'h20')`,
		pgtest.AnalyzeJournalSQL, `ANALYZE journal_runs`} {
		var args []any
		if q == benchHistorySQL {
			args = []any{int64(0), int64(2000), now}
		}
		if _, err := s.Pool.Exec(ctx, q, args...); err != nil {
			t.Fatalf("%s: %v", strings.Fields(q)[0], err)
		}
	}
	conn, err := s.Pool.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Release()
	for _, mode := range []string{"auto", "force_generic_plan"} {
		if _, err := conn.Exec(ctx, `SET plan_cache_mode = `+mode); err != nil {
			t.Fatal(err)
		}
		for _, c := range []struct{ name, sql, exec, index string }{
			{"runs", runsSQL, `EXECUTE runs('acme', 9223372036854775807, 51)`, "journal_runs_listed"},
			{"status", runsOfStatusSQL, `EXECUTE status('acme', 9223372036854775807, 51, 'awaiting')`, "journal_runs_status"},
			{"children", runsOfParentSQL, `EXECUTE children('acme', 9223372036854775807, 51, 'h10', '')`, "journal_runs_children"},
			{"counts", runCountsSQL, `EXECUTE counts('acme', ARRAY['h10', 'h20'])`, "journal_events_operation"},
			{"operations", runOperationsSQL, `EXECUTE operations('acme', 'h10', 0, 101)`, "journal_events_run"},
		} {
			if _, err := conn.Exec(ctx, `PREPARE `+c.name+` AS `+c.sql); err != nil {
				t.Fatalf("%s: %v", c.name, err)
			}
			plan := pgtest.Explain(t, conn, c.exec)
			if strings.Contains(plan, "Seq Scan on journal_") || !strings.Contains(plan, " "+c.index+" ") {
				t.Errorf("%s, %s: not read through %s:\n%s", mode, c.name, c.index, plan)
			}
			if _, err := conn.Exec(ctx, `DEALLOCATE `+c.name); err != nil {
				t.Fatal(err)
			}
		}
	}
	if _, err := conn.Exec(ctx, `RESET plan_cache_mode`); err != nil {
		t.Fatal(err)
	}
}

// TestGuardPlan: the retry guard finds the earlier calls with an effect
// key through journal_events_effect_key (migration 00060), planned for its
// parameters and as a generic plan, over a journal of many calls of the
// same tool with other arguments: never a walk of the journal.
func TestGuardPlan(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := pgtest.New(t)
	now := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	guardHistory(t, s, now)
	conn, since, floor := windowConn(t, s, now)
	for _, mode := range []string{"auto", "force_generic_plan"} {
		if _, err := conn.Exec(ctx, `SET plan_cache_mode = `+mode); err != nil {
			t.Fatal(err)
		}
		if _, err := conn.Exec(ctx, `PREPARE guard AS `+guardTwinsSQL); err != nil {
			t.Fatal(err)
		}
		plan := pgtest.Explain(t, conn, fmt.Sprintf(`EXECUTE guard('acme', 'payments.refund', '{"order":"77"}', %s, %s, '', 20)`, lit(since), lit(floor)))
		if !strings.Contains(plan, "journal_events_effect_key") || strings.Contains(plan, "Seq Scan on journal_events") {
			t.Errorf("%s: the guard does not read journal_events_effect_key:\n%s", mode, plan)
		}
		if _, err := conn.Exec(ctx, `DEALLOCATE guard`); err != nil {
			t.Fatal(err)
		}
	}
}

// windowConn is a connection of s for EXPLAINs (released at the test's
// end) and the default window's start and floor of ts at now.
func windowConn(t *testing.T, s *pgtest.Schema, now time.Time) (*pgxpool.Conn, time.Time, time.Time) {
	t.Helper()
	conn, err := s.Pool.Acquire(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(conn.Release)
	since, floor := (&Service{cfg: Config{Window: DefaultWindow}}).window(now)
	return conn, since, floor
}

// lit is ts as an SQL literal.
func lit(ts time.Time) string { return "'" + ts.Format(time.RFC3339Nano) + "'" }

// BenchmarkGuard is the retry guard's answer over a journal of 20,000
// calls of one tool in one project, each with its own arguments, one of
// them failed uncertain: the p50 and p99 of a hold (the twin found) and of
// a proceed (no twin), as the HTTP route's service call.
func BenchmarkGuard(b *testing.B) {
	ctx := context.Background()
	s := pgtest.New(b)
	now := time.Now().UTC()
	guardHistory(b, s, now)
	svc := New(s.Pool, Config{})
	for _, c := range []struct {
		name, args, want string
	}{{"hold", `{"order":"777"}`, GuardHold}, {"proceed", `{"order":"none"}`, GuardProceed}} {
		b.Run(c.name, func(b *testing.B) {
			lat := make([]time.Duration, 0, b.N)
			for b.Loop() {
				t0 := time.Now()
				ans, err := svc.Guard(ctx, GuardParams{Project: "acme", Tool: "payments.refund", Args: json.RawMessage(c.args)})
				lat = append(lat, time.Since(t0))
				if err != nil || ans.Decision != c.want {
					b.Fatalf("%+v %v", ans, err)
				}
			}
			sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
			b.ReportMetric(float64(lat[len(lat)/2].Microseconds()), "p50-µs")
			b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds()), "p99-µs")
		})
	}
}

// guardHistory journals 20,000 unsettled calls of payments.refund in
// project acme, each with its own order, dated back from now, and
// analyzes the journal.
func guardHistory(t testing.TB, s *pgtest.Schema, now time.Time) {
	t.Helper()
	ctx := context.Background()
	if _, err := s.Pool.Exec(ctx, `INSERT INTO journal_events (source_id, event_id, project, run_id, type, ts, actor, data,
    payload_digest, operation_id, settles, open)
SELECT 'agent-x', 'g-' || g, 'acme', 'run-' || (g / 10), 'tool.started', $1::timestamptz - g * interval '1 second', 'agent',
    jsonb_build_object('operation_id', 'op-' || g, 'tool', 'payments.refund', 'args', jsonb_build_object('order', g::text)),
    '\x00', 'op-' || g, false, true
FROM generate_series(1, 20000) g`, now); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Pool.Exec(ctx, pgtest.AnalyzeJournalSQL); err != nil {
		t.Fatal(err)
	}
}
