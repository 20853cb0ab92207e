package migrations_test

import (
	"context"
	"path/filepath"
	"sync"
	"testing"

	"github.com/seed-7bc021c3/reckon/internal/pgtest"
	"github.com/seed-7bc021c3/reckon/migrations"
)

// TestApplyTwiceAndConcurrently: migrations are idempotent and safe from
// several processes at once (here: several pools on one schema).
func TestApplyTwiceAndConcurrently(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := pgtest.New(t) // already migrated once
	var wg sync.WaitGroup
	errs := make([]error, 4)
	applied := make([][]int64, 4)
	for i := range errs {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			applied[i], errs[i] = migrations.Apply(ctx, s.Pool)
		}(i)
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("apply %d: %v", i, err)
		}
		if len(applied[i]) != 0 {
			t.Fatalf("apply %d re-applied %v", i, applied[i])
		}
	}
	var n int
	if err := s.Pool.QueryRow(ctx, "SELECT count(*) FROM goose_db_version WHERE version_id > 0").Scan(&n); err != nil {
		t.Fatal(err)
	}
	files, err := filepath.Glob("*.sql")
	if err != nil {
		t.Fatal(err)
	}
	if n != len(files) {
		t.Fatalf("%d migrations recorded, want one per file (%d)", n, len(files))
	}
}
