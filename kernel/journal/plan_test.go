package journal

import (
	"context"
	"fmt"
	"regexp"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/seed-7bc021c3/reckon/internal/pgtest"
	"github.com/seed-7bc021c3/reckon/kernel/pgplan"
)

// TestIngestPlan checks the plans the ingest statement runs on: planned
// for its parameters while the journal has no statistics, and the cached
// generic plan (pgplan) once it is analyzed and large. Every read of
// journal_events is an index probe, none a sequential scan, and operations
// are looked up by the operation index: a NOT EXISTS form of the open
// test may plan as a hashed subplan reading every settling row of the
// journal per batch, and a generic plan made on the empty journal may look
// operations up through (project, type, ts), walking the whole project.
func TestIngestPlan(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := pgtest.New(t)
	tx := s.Tx(t)

	// On an empty, never analyzed journal (a fresh installation, or a
	// connection opened before the first events) every index looks alike
	// to the planner, and a generic plan made then would be kept as the
	// journal grows: the statement must be planned for its parameters.
	var mode string
	if err := tx.QueryRow(ctx, pgplan.ForceSQL, plannedTable, pgplan.MinAnalyzedRows).Scan(nil, nil, &mode, nil); err != nil {
		t.Fatal(err)
	}
	if mode != "auto" {
		t.Errorf("on an empty journal the ingest statement would run with plan_cache_mode %q, want auto", mode)
	}
	if _, err := tx.Exec(ctx, pgplan.RestoreSQL); err != nil {
		t.Fatal(err)
	}

	seedPlanJournal(t, tx)
	if _, err := tx.Exec(ctx, "PREPARE ingest AS "+ingestSQL); err != nil {
		t.Fatal(err)
	}
	// A batch of 500 tool.started, open in their batch; planned for its
	// parameters too (force_custom_plan), which is where the NOT EXISTS
	// form turned into a scan of the journal.
	n := "ARRAY[500]"
	big := `(array_fill('s'::text, ` + n + `), array_fill('x'::text, ` + n + `), array_fill('p'::text, ` + n + `),
		array_fill('r-1'::text, ` + n + `), array_fill('tool.started'::text, ` + n + `),
		array_fill('2026-12-01T00:00:00Z'::timestamptz, ` + n + `), array_fill('agent'::text, ` + n + `),
		array_fill(NULL::text, ` + n + `), array_fill(NULL::text, ` + n + `), array_fill('{}'::jsonb, ` + n + `),
		array_fill('\x00'::bytea, ` + n + `), array_fill('op-x'::text, ` + n + `), array_fill(false, ` + n + `),
		array_fill(true, ` + n + `), array_fill(0, ` + n + `))`
	if _, err := tx.Exec(ctx, "SET LOCAL plan_cache_mode = force_custom_plan"); err != nil {
		t.Fatal(err)
	}
	explain(t, tx, "a batch of 500, custom plan", big)
	if err := tx.QueryRow(ctx, pgplan.ForceSQL, plannedTable, pgplan.MinAnalyzedRows).Scan(nil, nil, &mode, nil); err != nil || mode != "force_generic_plan" {
		t.Fatalf("on an analyzed journal of 40,000 events the mode is %q (%v), want force_generic_plan", mode, err)
	}
	explain(t, tx, "a batch of 500, generic plan", big)
	for i, args := range []string{
		// One event, a tool.started still open in its batch.
		`('{s}', '{x-1}', '{p}', '{r-1}', '{tool.started}', '{2026-12-01T00:00:00Z}', '{agent}', '{NULL}', '{NULL}',
		  '{"{}"}', '{"\\x00"}', '{op-x}', '{f}', '{t}', '{0}')`,
		settlingPair,
	} {
		explain(t, tx, fmt.Sprintf("batch %d, generic plan", i), args)
	}

	// A copied batch's settle step (settleCopiedSQL): 250 operations of
	// a run the journal held before the batch, on both plans, looked up
	// by the operation index alone; the run's rows counted on the run
	// index, no further than the batch's count and one.
	if _, err := tx.Exec(ctx, "PREPARE settle_copied AS "+settleCopiedSQL); err != nil {
		t.Fatal(err)
	}
	var opIDs string
	if err := tx.QueryRow(ctx, `SELECT array_agg('op-' || g)::text FROM generate_series(1, 250) g`).Scan(&opIDs); err != nil {
		t.Fatal(err)
	}
	// Run r-1 holds 100 rows; a batch that wrote 50 of them leaves it
	// older, so the statement would look its operations up.
	ops := `(array_fill('p'::text, ARRAY[250]), array_fill('r-1'::text, ARRAY[250]), '` + opIDs + `',
		'{p}', '{r-1}', '{50}')`
	// The older runs' count is the one read of the run index, under its
	// LIMIT; checkIndexes's test is for the rest.
	count := regexp.MustCompile(`(?m)^\s*->  Limit .*\n(\s+InitPlan .*\n\s*->  Index Scan using journal_runs_pkey .*\n\s+Index Cond: .*\n)*\s*->  Append .*\n\s*->  Index (Only )?Scan using journal_events_run on journal_events j(_\d+)? `)
	runScan := regexp.MustCompile(`(?m)^\s*->  Index (Only )?Scan using journal_events_run on journal_events j(_\d+)? .*$`)
	for _, mode := range []string{"force_custom_plan", "force_generic_plan"} {
		if _, err := tx.Exec(ctx, "SET LOCAL plan_cache_mode = "+mode); err != nil {
			t.Fatal(err)
		}
		what := "a copied batch's 250 operations, " + mode
		plan := pgtest.Explain(t, tx, "EXECUTE settle_copied"+ops)
		if !count.MatchString(plan) {
			t.Errorf("%s: the older runs are not counted on the run index under a limit:\n%s", what, plan)
		}
		checkIndexes(t, what, runScan.ReplaceAllString(plan, ""))
		// The settling test is asked per open row found, as a subplan:
		// as a join (an EXISTS made a semi join) the planner may hash
		// every settling row of the journal, whatever it chose here.
		if strings.Contains(plan, " Join") {
			t.Errorf("%s: the settling test is a join, not a probe per open row:\n%s", what, plan)
		}
	}

	// The in-process publisher's delivery (ingestOutboxSQL) shares the
	// open test and the settle step, and reads its rows from the outbox by
	// id: 500 claimed rows, starts and the completions that settle them.
	if _, err := tx.Exec(ctx, `INSERT INTO kernel_event_outbox (source_id, event_id, event, payload_digest, operation_id, settles, ts)
SELECT 's', 'o-' || g, jsonb_build_object('project', 'p', 'run_id', 'r-1', 'actor', 'agent', 'data', '{}'::jsonb,
    'type', CASE WHEN g % 2 = 0 THEN 'tool.started' ELSE 'tool.completed' END),
    '\x00', 'op-o' || (g / 2), g % 2 = 1, now()
FROM generate_series(1, 20000) g`); err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(ctx, `ANALYZE kernel_event_outbox`); err != nil {
		t.Fatal(err)
	}
	// Both forms: the one tried first, without ON CONFLICT, and the one
	// that skips keys already journaled.
	if _, err := tx.Exec(ctx, "PREPARE ingest_outbox AS "+ingestOutboxSQL); err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(ctx, "PREPARE ingest_outbox_new AS "+ingestOutboxNewSQL); err != nil {
		t.Fatal(err)
	}
	var ids string
	if err := tx.QueryRow(ctx, `SELECT array_agg(id)::text FROM (SELECT id FROM kernel_event_outbox ORDER BY id LIMIT 500) o`).Scan(&ids); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ mode, stmt string }{
		{"force_custom_plan", "ingest_outbox"}, {"force_generic_plan", "ingest_outbox"},
		{"force_custom_plan", "ingest_outbox_new"}, {"force_generic_plan", "ingest_outbox_new"},
	} {
		mode := c.mode
		if _, err := tx.Exec(ctx, "SET LOCAL plan_cache_mode = "+mode); err != nil {
			t.Fatal(err)
		}
		what := "500 outbox rows, " + c.stmt + ", " + mode
		plan := explainStatement(t, tx, what, "EXECUTE "+c.stmt+"('"+ids+"')")
		if conflict := strings.Contains(plan, "Conflict"); conflict != (c.stmt == "ingest_outbox") {
			t.Errorf("%s: ON CONFLICT in the plan is %v:\n%s", what, conflict, plan)
		}
		if strings.Contains(plan, "Seq Scan on kernel_event_outbox") {
			t.Errorf("%s: the rows are read from the outbox by a sequential scan:\n%s", what, plan)
		}
		// The batch's own settled operations are joined once; searched
		// per row (a CTE scan in a subplan) a batch of n costs n².
		if strings.Contains(plan, "CTE Scan on src b") {
			t.Errorf("%s: each row searches the batch for its settling event:\n%s", what, plan)
		}
	}
}

// seedPlanJournal fills the journal of TestIngestPlan with 40,000 events
// over four weeks: the current partition, the two made ahead and the
// default one, each analyzed with rows (an empty partition analyzed as
// empty would be read by a sequential scan, at no cost while it is empty),
// and their key rows.
func seedPlanJournal(t *testing.T, tx pgx.Tx) {
	t.Helper()
	ctx := context.Background()
	if _, err := tx.Exec(ctx, `INSERT INTO journal_events (source_id, event_id, project, run_id, type, ts, actor,
    data, payload_digest, operation_id, settles, open, ingested_at)
SELECT 's', 'e-' || g, 'p', 'r-' || (g / 100), CASE WHEN g % 2 = 0 THEN 'tool.started' ELSE 'tool.completed' END,
    now(), 'agent', '{}', '\x00', 'op-' || (g / 2), g % 2 = 1, g % 2 = 0 AND g > 39000,
    now() + (g / 100 % 4) * interval '7 days'
FROM generate_series(1, 40000) g`); err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(ctx, `INSERT INTO journal_keys (source_id, event_id, project, run_id, seq, ingested_at, payload_digest)
SELECT source_id, event_id, project, run_id, seq, ingested_at, payload_digest FROM journal_events`); err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(ctx, `ANALYZE journal_events; ANALYZE journal_keys`); err != nil {
		t.Fatal(err)
	}
}

// settlingPair is the arguments of a batch of two: a start and the
// completion that settles it.
const settlingPair = `('{s,s}', '{x-2,x-3}', '{p,p}', '{r-1,r-1}', '{tool.started,tool.completed}',
		  '{2026-12-01T00:00:00Z,2026-12-01T00:00:00Z}', '{agent,agent}', '{NULL,NULL}', '{NULL,NULL}',
		  '{"{}","{}"}', '{"\\x00","\\x00"}', '{op-y,op-y}', '{f,t}', '{f,f}', '{0,1}')`

// explain fails t when the plan of the prepared ingest statement with args
// reads journal_events without an index.
func explain(t *testing.T, tx pgx.Tx, what, args string) {
	t.Helper()
	explainStatement(t, tx, what, "EXECUTE ingest"+args)
}

// explainStatement is explain for any EXECUTE of an ingest statement; it
// returns the plan.
func explainStatement(t *testing.T, tx pgx.Tx, what, execute string) string {
	t.Helper()
	plan := pgtest.Explain(t, tx, execute)
	checkIndexes(t, what, plan)
	return plan
}

// checkIndexes fails t when plan reads journal_events without an index or
// looks operations up through an index other than the operation index.
func checkIndexes(t *testing.T, what, plan string) {
	t.Helper()
	if strings.Contains(plan, "Seq Scan on journal_events") || !strings.Contains(plan, "Index") {
		t.Errorf("%s: the ingest statement reads the journal without its indexes:\n%s", what, plan)
	}
	// The open test and the settle step look operations up by the
	// operation index; any other index of the journal walks a project,
	// a run or the open set per event.
	for _, idx := range []string{"journal_events_type_ts", "journal_events_open_ops", "journal_events_run "} {
		if strings.Contains(plan, idx) {
			t.Errorf("%s: the ingest statement looks operations up through %s:\n%s", what, strings.TrimSpace(idx), plan)
		}
	}
}
