package retention_test

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/seed-7bc021c3/reckon/internal/pgtest"
	"github.com/seed-7bc021c3/reckon/kernel/manifest"
	"github.com/seed-7bc021c3/reckon/kernel/priorstate"
	"github.com/seed-7bc021c3/reckon/kernel/retention"
)

// ops lists the operation ids left in table, sorted.
func ops(t *testing.T, pool *pgxpool.Pool, table string) []string {
	t.Helper()
	return pgtest.Strings(t, pool, "SELECT operation_id FROM "+table+" ORDER BY operation_id")
}

// TestPruneEvidence: rows taken longer ago than the retention go, newer
// ones stay, and no statement deletes more than a batch.
func TestPruneEvidence(t *testing.T) {
	t.Parallel()
	s := pgtest.New(t)
	ctx := context.Background()
	manifests, priors := manifest.Store{Pool: s.Pool}, priorstate.Store{Pool: s.Pool}
	const keep = 24 * time.Hour
	now := time.Now()
	// 7 old manifests and 5 old prior states (a day and a minute ago, or
	// older), 3 and 2 within the retention (a minute short of it).
	var wantManifests, wantPriors []string
	for i := range 10 {
		op := fmt.Sprintf("op-%02d", i)
		taken := now.Add(-keep - time.Minute - time.Duration(i)*time.Hour)
		if i >= 7 {
			taken, wantManifests = now.Add(-keep+time.Minute), append(wantManifests, op)
		}
		if _, err := manifests.Put(ctx, manifest.Key{Project: "p", RunID: "r", OperationID: op, Phase: manifest.PhaseBefore}, manifest.Manifest{TakenAt: taken}); err != nil {
			t.Fatal(err)
		}
	}
	for i := range 7 {
		op := fmt.Sprintf("op-%02d", i)
		taken := now.Add(-keep - time.Minute - time.Duration(i)*time.Hour)
		if i >= 5 {
			taken, wantPriors = now.Add(-keep+time.Minute), append(wantPriors, op)
		}
		if err := priors.Put(ctx, "p", "r", op, priorstate.Prior{Tool: "mcp__create_entities", TakenAt: taken}); err != nil {
			t.Fatal(err)
		}
	}
	// One statement deletes at most its batch.
	if n, err := manifests.PruneBatch(ctx, keep, 3); err != nil || n != 3 {
		t.Fatalf("one manifest batch of 3: deleted %d, %v", n, err)
	}
	if n, err := priors.PruneBatch(ctx, keep, 2); err != nil || n != 2 {
		t.Fatalf("one prior-state batch of 2: deleted %d, %v", n, err)
	}
	// The maintenance task deletes the rest (4 manifests, 3 prior states)
	// in batches of 2, and only what is older than the retention.
	if n, err := (retention.Evidence{Pool: s.Pool, Retention: keep, Batch: 2}).Prune(ctx); err != nil || n != 7 {
		t.Fatalf("prune: deleted %d, %v; want 7", n, err)
	}
	if got := ops(t, s.Pool, "kernel_workspace_manifests"); !slices.Equal(got, wantManifests) {
		t.Errorf("manifests left %v, want %v", got, wantManifests)
	}
	if got := ops(t, s.Pool, "kernel_mcp_prior_states"); !slices.Equal(got, wantPriors) {
		t.Errorf("prior states left %v, want %v", got, wantPriors)
	}
	if n, err := (retention.Evidence{Pool: s.Pool, Retention: keep}).Prune(ctx); err != nil || n != 0 {
		t.Errorf("second prune: deleted %d, %v; want nothing", n, err)
	}
	// Without a retention (a configuration not read from the environment)
	// the default, 30 days, applies: nothing here is that old.
	if n, err := (retention.Evidence{Pool: s.Pool}).Prune(ctx); err != nil || n != 0 {
		t.Errorf("zero retention deleted %d rows (%v); it must mean the default", n, err)
	}
}
