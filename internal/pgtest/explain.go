package pgtest

import (
	"context"
	"regexp"
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
// statement), one line of EXPLAIN's output per line. Partitions and their
// indexes are named as their partitioned parents (journal_events_p20261207
// reads journal_events, its index on (project, run_id, seq) reads
// journal_events_run), so that a test asks of every partition what it
// asks of the table.
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
	return parentNames(t, db).Replace(strings.Join(lines, "\n"))
}

// partitionsSQL lists the current schema's partitions and partition
// indexes with their parents' names.
const partitionsSQL = `SELECT c.relname::text, p.relname::text
FROM pg_inherits i
JOIN pg_class c ON c.oid = i.inhrelid
JOIN pg_class p ON p.oid = i.inhparent
WHERE c.relnamespace = current_schema()::regnamespace`

// parentNames is a replacer of each partition's (and partition index's)
// name, as a whole word, by its parent's.
func parentNames(t testing.TB, db interface {
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
}) *wordReplacer {
	t.Helper()
	rows, err := db.Query(context.Background(), partitionsSQL)
	if err != nil {
		t.Fatalf("pgtest: explain: partitions: %v", err)
	}
	parent := map[string]string{}
	var child, par string
	if _, err := pgx.ForEachRow(rows, []any{&child, &par}, func() error { parent[child] = par; return nil }); err != nil {
		t.Fatalf("pgtest: explain: partitions: %v", err)
	}
	return &wordReplacer{parent: parent}
}

// wordReplacer replaces whole identifiers found in its map.
type wordReplacer struct{ parent map[string]string }

// identifier is a word of a plan that may name a relation.
var identifier = regexp.MustCompile(`[A-Za-z_][A-Za-z0-9_]*`)

// Replace returns s with each identifier of the map replaced.
func (w *wordReplacer) Replace(s string) string {
	if len(w.parent) == 0 {
		return s
	}
	return identifier.ReplaceAllStringFunc(s, func(id string) string {
		if p, ok := w.parent[id]; ok {
			return p
		}
		return id
	})
}
