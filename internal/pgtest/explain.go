package pgtest

import (
	"context"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
)

// Plan returns PostgreSQL's plan of q with args, as the planner would
// choose it on a large table: sequential scans are priced out for the
// transaction (a test table is small enough that the planner would scan
// it whatever its indexes), so a plan without an index scan means the
// statement has no index to use.
func (s *Schema) Plan(t testing.TB, q string, args ...any) string {
	t.Helper()
	ctx := context.Background()
	tx, err := s.Pool.Begin(ctx)
	if err != nil {
		t.Fatalf("pgtest: plan: %v", err)
	}
	defer func() { _ = tx.Rollback(ctx) }()
	if _, err := tx.Exec(ctx, "SET LOCAL enable_seqscan = off"); err != nil {
		t.Fatalf("pgtest: plan: %v", err)
	}
	return Explain(t, tx, q, args...)
}

// Explain returns the plan of q with args as db plans it (a transaction
// whose settings the test chose; q may be EXECUTE of a prepared
// statement), one line of EXPLAIN's output per line.
func Explain(t testing.TB, db interface {
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
}, q string, args ...any) string {
	t.Helper()
	rows, err := db.Query(context.Background(), "EXPLAIN "+q, args...)
	if err != nil {
		t.Fatalf("pgtest: explain: %v", err)
	}
	lines, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatalf("pgtest: explain: %v", err)
	}
	return strings.Join(lines, "\n")
}
