package operations

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/seed-7bc021c3/reckon/internal/pgtest"
)

// TestBacklogPlanReadsIndexes: the backlog gauges' statement, on a
// journal of 30,000 events in three projects (half the kernel's, one in
// a thousand a wait) and an
// outbox of 6,000 rows, reads the journal through
// their indexes only: never a scan of journal history.
func TestBacklogPlanReadsIndexes(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := pgtest.New(t)
	for _, q := range []string{
		`INSERT INTO journal_events (source_id, event_id, project, run_id, type, ts, actor, data, payload_digest, operation_id)
		 SELECT CASE WHEN g % 2 = 0 THEN 'kernel' ELSE 'bot' END, 'e-' || g, 'p-' || (g % 3), 'r-' || (g % 500),
		        CASE WHEN g % 1000 = 0 THEN 'run.awaiting' WHEN g % 1000 = 500 THEN 'run.resumed'
		             ELSE (ARRAY['tool.started', 'tool.completed', 'tool.failed', 'run.started', 'run.completed',
		                         'supervisor.verdict', 'operation.reconciled'])[1 + g % 7] END,
		        now() - (g || ' seconds')::interval, 'agent', '{}', '\x00', 'op-' || (g % 5000)
		 FROM generate_series(1, 30000) g`,
		`INSERT INTO kernel_event_outbox (source_id, event_id, event, payload_digest)
		 SELECT 's', 'e-' || g, '{}', '\x00' FROM generate_series(1, 6000) g`,
		pgtest.AnalyzeJournalSQL, `ANALYZE kernel_event_outbox, kernel_event_outbox_undelivered`,
	} {
		if _, err := s.Pool.Exec(ctx, q); err != nil {
			t.Fatal(err)
		}
	}
	var plan strings.Builder
	rows, err := s.Pool.Query(ctx, "EXPLAIN "+backlogSQL, time.Now().Add(-DefaultWindow), MaxKnownProjects)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var line string
		if err := rows.Scan(&line); err != nil {
			t.Fatal(err)
		}
		plan.WriteString(line + "\n")
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	for _, bad := range []string{"Seq Scan on journal_events", "Seq Scan on kernel_event_outbox", "Index Cond: (source_id = 'kernel'::text)\n"} {
		if strings.Contains(plan.String(), bad) {
			t.Fatalf("the backlog scans the journal or the outbox (%s):\n%s", strings.TrimSpace(bad), plan.String())
		}
	}
}
