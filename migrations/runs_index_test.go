package migrations_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/seed-7bc021c3/reckon/internal/reckontest"
	"github.com/seed-7bc021c3/reckon/kernel"
	"github.com/seed-7bc021c3/reckon/kernel/journal"
)

// TestRunsIndexBackfill: migration 00055 indexes the runs journaled before
// it, in journal order and with what their lifecycle says, as its trigger
// indexes the runs journaled after it; Down drops the index and the
// journal takes events without it.
func TestRunsIndexBackfill(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, p := provider(t)
	if _, err := p.DownTo(ctx, 54); err != nil {
		t.Fatal(err)
	}
	// Before the partitioned journal (00080) an event is a row of the
	// table as it was; this version's journal writes it after Up.
	j := journal.New(s.Pool, nil)
	atVersion := 54
	ts := time.Date(2026, 12, 3, 0, 0, 0, 0, time.UTC)
	parent := reckontest.Run{Project: "p", RunID: "k", Source: kernel.SourceKernel}
	child := reckontest.Run{Project: "p", RunID: "k.op-1", Source: kernel.SourceKernel}
	agent := reckontest.Run{Project: "p", RunID: "a", Source: "bot"}
	ingest := func(evs ...kernel.Event) {
		t.Helper()
		if atVersion < 80 {
			insertFlat(t, s.Pool, evs...)
			return
		}
		if _, err := j.Ingest(ctx, evs); err != nil {
			t.Fatal(err)
		}
	}
	ingest(parent.RunStarted(ts), parent.Started("op-1", kernel.DelegateTool, ts))
	ingest(child.Event("run/started", kernel.TypeRunStarted, ts.Add(time.Second), kernel.RunStarted{ParentRunID: "k"}),
		child.RunFailed(ts.Add(time.Minute)))
	ingest(agent.Started("op-1", "http_post", ts.Add(2*time.Minute)))

	if _, err := p.Up(ctx); err != nil {
		t.Fatal(err)
	}
	atVersion = 80
	ingest(reckontest.Run{Project: "p", RunID: "after", Source: "bot"}.RunStarted(ts.Add(time.Hour)))
	rows, err := s.Pool.Query(ctx, `SELECT run_id || ' ' || source_id || ' ' || status || ' ' || coalesce(parent_run_id, '-') || ' ' ||
	    to_char(started_at AT TIME ZONE 'UTC', 'HH24:MI:SS') || ' ' || coalesce(to_char(ended_at AT TIME ZONE 'UTC', 'HH24:MI:SS'), '-')
	    FROM journal_runs ORDER BY listed`)
	if err != nil {
		t.Fatal(err)
	}
	got, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"k kernel running - 00:00:00 -", "k.op-1 kernel failed k 00:00:01 00:01:00",
		"a bot running - 00:02:00 -", "after bot running - 01:00:00 -"}
	if !slices.Equal(got, want) {
		t.Fatalf("runs index after 00055:\n got %q\nwant %q", got, want)
	}

	if _, err := p.DownTo(ctx, 54); err != nil {
		t.Fatal(err)
	}
	atVersion = 54
	ingest(agent.Completed("op-1", ts.Add(2*time.Hour)))
	var exists bool
	if err := s.Pool.QueryRow(ctx, `SELECT to_regclass('journal_runs') IS NOT NULL`).Scan(&exists); err != nil || exists {
		t.Fatalf("journal_runs after Down: exists %v, %v", exists, err)
	}
}

// insertFlat writes evs into the journal as a version before the key
// table (migration 00080) did: one row each, its key unique in
// journal_events itself.
func insertFlat(t *testing.T, db interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
}, evs ...kernel.Event) {
	t.Helper()
	for _, e := range evs {
		if _, err := db.Exec(context.Background(), `INSERT INTO journal_events
    (source_id, event_id, project, run_id, type, ts, actor, data, payload_digest, operation_id, settles)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8, '\x00', $8::jsonb->>'operation_id', $5 IN ('tool.completed', 'operation.reconciled'))`,
			e.SourceID, e.EventID, e.Project, e.RunID, e.Type, e.TS, e.Actor, string(e.Data)); err != nil {
			t.Fatalf("insert %s as before 00080: %v", e.Key(), err)
		}
	}
}
