package pgplan_test

import (
	"context"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/seed-7bc021c3/reckon/internal/pgtest"
	"github.com/seed-7bc021c3/reckon/kernel/pgplan"
)

// TestQueue: the queued statement runs with force_generic_plan (when the
// table it reads is analyzed and large) and no sequential scans, and both
// settings are as they were afterwards, both in a caller's transaction (its own
// setting kept) and on a connection outside one (the default back).
func TestQueue(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := pgtest.New(t)
	modeReading := func(q interface {
		SendBatch(context.Context, *pgx.Batch) pgx.BatchResults
	}, reads string) string {
		b := &pgx.Batch{}
		var got string
		pgplan.Queue(b, reads, `SELECT current_setting('plan_cache_mode') || ' ' || current_setting('enable_seqscan')`).QueryRow(func(r pgx.Row) error { return r.Scan(&got) })
		if err := q.SendBatch(ctx, b).Close(); err != nil {
			t.Fatal(err)
		}
		return got
	}
	mode := func(q interface {
		SendBatch(context.Context, *pgx.Batch) pgx.BatchResults
	}) string {
		return modeReading(q, "")
	}
	current := func(q interface {
		QueryRow(context.Context, string, ...any) pgx.Row
	}) string {
		var m string
		if err := q.QueryRow(ctx, `SELECT current_setting('plan_cache_mode') || ' ' || current_setting('enable_seqscan')`).Scan(&m); err != nil {
			t.Fatal(err)
		}
		return m
	}

	// A statement reading a table forces the generic plan only once the
	// table is known to hold MinAnalyzedRows rows.
	if _, err := s.Pool.Exec(ctx, `CREATE TABLE small (n int); CREATE TABLE big AS SELECT g FROM generate_series(1, 20000) g`); err != nil {
		t.Fatal(err)
	}
	if got := modeReading(s.Pool, "small"); got != "auto off" {
		t.Errorf("reading a table never analyzed, the statement ran with %q, want auto off", got)
	}
	if got := modeReading(s.Pool, "big"); got != "auto off" {
		t.Errorf("reading a large table not yet analyzed, the statement ran with %q, want auto off", got)
	}
	if _, err := s.Pool.Exec(ctx, `ANALYZE big`); err != nil {
		t.Fatal(err)
	}
	if got := modeReading(s.Pool, "big"); got != "force_generic_plan off" {
		t.Errorf("reading an analyzed table of 20,000 rows, the statement ran with %q, want force_generic_plan off", got)
	}

	conn, err := s.Pool.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Release()
	if got := mode(conn); got != "force_generic_plan off" {
		t.Errorf("outside a transaction the statement ran with %q", got)
	}
	if got := current(conn); got != "auto on" {
		t.Errorf("outside a transaction the connection is left with %q, want auto on", got)
	}

	tx, err := conn.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback(ctx) }()
	if _, err := tx.Exec(ctx, "SET LOCAL plan_cache_mode = force_custom_plan; SET LOCAL enable_seqscan = on"); err != nil {
		t.Fatal(err)
	}
	if got := mode(tx); got != "force_generic_plan off" {
		t.Errorf("in a transaction the statement ran with %q", got)
	}
	if got := current(tx); got != "force_custom_plan on" {
		t.Errorf("the caller's transaction is left with %q, want its own force_custom_plan on", got)
	}

	// A failing statement rolls the batch back, settings included.
	b := &pgx.Batch{}
	pgplan.Queue(b, "", `SELECT 1/0`)
	if err := tx.SendBatch(ctx, b).Close(); err == nil {
		t.Fatal("1/0 did not fail")
	}
	if err := tx.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	if got := current(conn); got != "auto on" {
		t.Errorf("after a failed batch the connection is left with %q, want auto on", got)
	}
}
