package probe

import (
	"context"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/seed-7bc021c3/reckon/kernel/retention"
	"github.com/seed-7bc021c3/reckon/pipeline"
)

// age backdates one operation's evidence in table past the default
// retention, as if it had been taken 31 days ago, then prunes as the
// maintenance loop does.
func ageAndPrune(t *testing.T, pool *pgxpool.Pool, table, opID string) {
	t.Helper()
	ctx := context.Background()
	if _, err := pool.Exec(ctx, "UPDATE "+table+" SET taken_at = now() - interval '31 days' WHERE operation_id = $1", opID); err != nil {
		t.Fatal(err)
	}
	if n, err := (retention.Evidence{Pool: pool, Retention: retention.DefaultRetention}).Prune(ctx); err != nil || n == 0 {
		t.Fatalf("prune after aging %s's %s: %d rows, %v", opID, table, n, err)
	}
}

// TestDiffAfterPruning: a pruned manifest leaves the diff probe
// inconclusive ("not stored"), never wrong, whichever of the two manifests
// it compares is gone.
func TestDiffAfterPruning(t *testing.T) {
	t.Parallel()
	r := newWorkspaceRig(t)
	p := r.diff()
	m1, m2, m3 := r.manifest(t, "op-1"), r.manifest(t, "op-2"), r.manifest(t, "op-3")
	run := r.run(r.cmd("op-1", m1, true), r.cmd("op-2", m2, true), r.cmd("op-3", m3, true))
	r.check(t, p, "op-1 kept", run, "op-1", pipeline.FindingNone, "recorded before the later operation op-2")
	r.check(t, p, "op-2 kept", run, "op-2", pipeline.FindingNone, "recorded before the later operation op-3")
	// The later operation's manifest (the comparison point) is pruned.
	ageAndPrune(t, r.db.Pool, "kernel_workspace_manifests", "op-2")
	r.check(t, p, "comparison point pruned", run, "op-1", pipeline.FindingInconclusive, "before the later operation op-2: not stored")
	// The operation's own manifest (the baseline) is pruned.
	r.check(t, p, "baseline pruned", run, "op-2", pipeline.FindingInconclusive, "recorded before op-2: not stored")
	// Evidence within the retention is kept and still decides.
	r.write(t, "out.txt", "x\n")
	r.check(t, p, "newer kept", run, "op-3", pipeline.FindingOccurred, "out.txt")
}
