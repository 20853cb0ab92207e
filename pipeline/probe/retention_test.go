package probe

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/seed-7bc021c3/reckon/internal/pgtest"
	"github.com/seed-7bc021c3/reckon/kernel"
	"github.com/seed-7bc021c3/reckon/kernel/manifest"
	"github.com/seed-7bc021c3/reckon/kernel/operations"
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
	db := pgtest.New(t)
	ctx := context.Background()
	root, ws := diffWorkspace(t, db)
	st := manifest.Store{Pool: db.Pool}
	record := func(op string) *kernel.WorkspaceManifest {
		t.Helper()
		m, err := manifest.Take(ctx, ws, manifest.Options{})
		if err == nil {
			m, err = st.Put(ctx, manifest.Key{Project: "acme", RunID: "run-1", OperationID: op, Phase: manifest.PhaseBefore}, m)
		}
		if err != nil {
			t.Fatal(err)
		}
		s := m.Summary()
		return &s
	}
	started := time.Now().Add(-time.Hour)
	cmd := func(id string, m *kernel.WorkspaceManifest) StartedOp {
		return StartedOp{OperationID: id, Tool: kernel.ToolRunCommand, StartedAt: started, Args: []byte(`{"command":"x","timeout_s":30}`), Manifest: m, Answered: true}
	}
	p := Diff{Root: root, Owners: operations.Owners{Pool: db.Pool}, Manifests: st}
	check := func(name string, run Run, id, want, detail string) {
		t.Helper()
		ev, ok := p.Probe(ctx, run, pipeline.WallOperation{OperationID: id, Tool: kernel.ToolRunCommand, State: "failed_uncertain", StartedAt: started, JournaledAt: journaled(started),
			StartedKey: kernel.EventKey{SourceID: kernel.SourceKernel, EventID: "acme/run-1/" + id + "/started"}})
		if !ok || ev.Finding != want || !strings.Contains(ev.Detail, detail) {
			t.Errorf("%s: ok=%v %s %q, want %s containing %q", name, ok, ev.Finding, ev.Detail, want, detail)
		}
	}
	m1, m2, m3 := record("op-1"), record("op-2"), record("op-3")
	run := clocked(Run{Project: "acme", RunID: "run-1", Ended: true, Started: []StartedOp{cmd("op-1", m1), cmd("op-2", m2), cmd("op-3", m3)}})
	check("op-1 kept", run, "op-1", pipeline.FindingNone, "recorded before the later operation op-2")
	check("op-2 kept", run, "op-2", pipeline.FindingNone, "recorded before the later operation op-3")
	// The later operation's manifest (the comparison point) is pruned.
	ageAndPrune(t, db.Pool, "kernel_workspace_manifests", "op-2")
	check("comparison point pruned", run, "op-1", pipeline.FindingInconclusive, "before the later operation op-2: not stored")
	// The operation's own manifest (the baseline) is pruned.
	check("baseline pruned", run, "op-2", pipeline.FindingInconclusive, "recorded before op-2: not stored")
	// Evidence within the retention is kept and still decides.
	if err := os.WriteFile(filepath.Join(ws, "out.txt"), []byte("x\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	check("newer kept", run, "op-3", pipeline.FindingOccurred, "out.txt")
}
