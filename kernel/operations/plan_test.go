package operations

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/seed-7bc021c3/reckon/internal/pgtest"
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
		`ANALYZE journal_events`,
	} {
		var args []any
		switch q {
		case benchHistorySQL:
			args = []any{int64(0), int64(1000), now}
		case `ANALYZE journal_events`:
		default:
			args = []any{1, 50, now}
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
	since, floor := (&Service{cfg: Config{Window: DefaultWindow}}).window(now)
	lit := func(ts time.Time) string { return "'" + ts.Format(time.RFC3339Nano) + "'" }
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
