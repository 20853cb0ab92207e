package migrations_test

import (
	"context"
	"slices"
	"testing"

	"github.com/seed-7bc021c3/reckon/internal/pgtest"
	"github.com/seed-7bc021c3/reckon/migrations"
)

// TestApplyTo checks that ApplyTo stops at the version asked for (the
// sweep leases' migration, the last before the partitioned journal) and
// that Apply then brings the schema the rest of the way.
func TestApplyTo(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := pgtest.New(t)
	// The schema, emptied: the pool's search_path names it still.
	if _, err := s.Pool.Exec(ctx, "DROP SCHEMA "+s.Name+" CASCADE; CREATE SCHEMA "+s.Name); err != nil {
		t.Fatal(err)
	}
	got, err := migrations.ApplyTo(ctx, s.Pool, 75)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) == 0 || got[len(got)-1] != 75 {
		t.Fatalf("ApplyTo(75) applied %v, want the versions up to 75", got)
	}
	if n := pgtest.Int(t, s.Pool, "SELECT count(*) FROM pg_tables WHERE schemaname = current_schema() AND tablename = 'journal_keys'"); n != 0 {
		t.Fatal("ApplyTo(75) created journal_keys, which migration 00080 creates")
	}
	rest, err := migrations.Apply(ctx, s.Pool)
	if err != nil {
		t.Fatal(err)
	}
	if slices.Contains(rest, 75) || !slices.Contains(rest, 80) {
		t.Fatalf("Apply after ApplyTo(75) applied %v, want the versions after 75", rest)
	}
	if _, err := migrations.ApplyTo(ctx, s.Pool, 0); err == nil {
		t.Fatal("ApplyTo(0) succeeded, want an error")
	}
}
