package pgplan_test

import (
	"context"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/seed-7bc021c3/reckon/internal/pgtest"
	"github.com/seed-7bc021c3/reckon/kernel/pgplan"
)

// TestQueue: the queued statement runs with force_generic_plan, and the
// mode is as it was afterwards, both in a caller's transaction (its own
// setting kept) and on a connection outside one (the default back).
func TestQueue(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := pgtest.New(t)
	mode := func(q interface {
		SendBatch(context.Context, *pgx.Batch) pgx.BatchResults
	}) string {
		b := &pgx.Batch{}
		var got string
		pgplan.Queue(b, `SELECT current_setting('plan_cache_mode')`).QueryRow(func(r pgx.Row) error { return r.Scan(&got) })
		if err := q.SendBatch(ctx, b).Close(); err != nil {
			t.Fatal(err)
		}
		return got
	}
	current := func(q interface {
		QueryRow(context.Context, string, ...any) pgx.Row
	}) string {
		var m string
		if err := q.QueryRow(ctx, `SELECT current_setting('plan_cache_mode')`).Scan(&m); err != nil {
			t.Fatal(err)
		}
		return m
	}

	conn, err := s.Pool.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Release()
	if got := mode(conn); got != "force_generic_plan" {
		t.Errorf("outside a transaction the statement ran with %q", got)
	}
	if got := current(conn); got != "auto" {
		t.Errorf("outside a transaction the connection is left with %q, want auto", got)
	}

	tx, err := conn.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback(ctx) }()
	if _, err := tx.Exec(ctx, "SET LOCAL plan_cache_mode = force_custom_plan"); err != nil {
		t.Fatal(err)
	}
	if got := mode(tx); got != "force_generic_plan" {
		t.Errorf("in a transaction the statement ran with %q", got)
	}
	if got := current(tx); got != "force_custom_plan" {
		t.Errorf("the caller's transaction is left with %q, want its own force_custom_plan", got)
	}

	// A failing statement rolls the batch back, settings included.
	b := &pgx.Batch{}
	pgplan.Queue(b, `SELECT 1/0`)
	if err := tx.SendBatch(ctx, b).Close(); err == nil {
		t.Fatal("1/0 did not fail")
	}
	if err := tx.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	if got := current(conn); got != "auto" {
		t.Errorf("after a failed batch the connection is left with %q, want auto", got)
	}
}
