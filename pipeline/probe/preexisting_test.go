package probe

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/seed-7bc021c3/reckon/internal/pgtest"
	"github.com/seed-7bc021c3/reckon/kernel"
	"github.com/seed-7bc021c3/reckon/kernel/manifest"
	"github.com/seed-7bc021c3/reckon/kernel/operations"
	"github.com/seed-7bc021c3/reckon/pipeline"
)

// A file the declared postcondition names proves the step made it only if
// it was not there already. An earlier step (its command is not the one
// under judgement, and need not declare the path) wrote proof.txt; the
// step declaring it then crashed before running. The postcondition probe
// found the file and proved "occurred", settling work that never ran —
// alone whenever the diff probe could not tell, as when the earlier step
// also filled the workspace past the manifest's caps. The kernel's
// manifest taken before the step lists the file, or cannot say.
func TestPostconditionIgnoresAFileThatWasThereBefore(t *testing.T) {
	t.Parallel()
	db := pgtest.New(t)
	ctx := context.Background()
	root, ws := diffWorkspace(t, db)
	st := manifest.Store{Pool: db.Pool}
	content := []byte("done\n")
	sum := sha256.Sum256(content)
	good := hex.EncodeToString(sum[:])
	record := func(op string, limits manifest.Limits) *kernel.WorkspaceManifest {
		t.Helper()
		m, err := manifest.Take(ctx, ws, manifest.Options{Limits: limits})
		if err != nil {
			t.Fatal(err)
		}
		if m, err = st.Put(ctx, manifest.Key{Project: "acme", RunID: "run-1", OperationID: op, Phase: manifest.PhaseBefore}, m); err != nil {
			t.Fatal(err)
		}
		s := m.Summary()
		return &s
	}
	started := time.Now().Add(-time.Hour)
	cmd := func(id string, m *kernel.WorkspaceManifest, declares string) StartedOp {
		return StartedOp{OperationID: id, Tool: kernel.ToolRunCommand, StartedAt: started, Args: []byte(`{"command":"x","timeout_s":30}`),
			Manifest: m, Answered: id == "op-1", PostconditionPath: declares}
	}
	op := func(id string) pipeline.WallOperation {
		return pipeline.WallOperation{OperationID: id, Tool: kernel.ToolRunCommand, State: "failed_uncertain", StartedAt: started, JournaledAt: journaled(started),
			Postcondition: pc("proof.txt", good), StartedKey: kernel.EventKey{SourceID: kernel.SourceKernel, EventID: "acme/run-1/" + id + "/started"}}
	}
	p := Workspace{Root: root, Owners: operations.Owners{Pool: db.Pool}, Manifests: st}

	// op-1 makes no declaration and writes proof.txt; op-2 declares it.
	m1 := record("op-1", manifest.Limits{})
	if err := os.WriteFile(filepath.Join(ws, "proof.txt"), content, 0o644); err != nil {
		t.Fatal(err)
	}
	run := clocked(Run{Project: "acme", RunID: "run-1", Ended: true, Started: []StartedOp{cmd("op-1", m1, ""), cmd("op-2", record("op-2", manifest.Limits{}), "proof.txt")}})
	if ev, ok := p.Probe(ctx, run, op("op-2")); !ok || ev.Finding != pipeline.FindingInconclusive || !strings.Contains(ev.Detail, "already lists it") {
		t.Errorf("file there before the step: ok=%v %s %q, want inconclusive", ok, ev.Finding, ev.Detail)
	}
	// A manifest that hit its caps cannot say the file was absent.
	run.Started[1] = cmd("op-3", record("op-3", manifest.Limits{MaxFiles: 1}), "proof.txt")
	if ev, ok := p.Probe(ctx, run, op("op-3")); !ok || ev.Finding != pipeline.FindingInconclusive || !strings.Contains(ev.Detail, "incomplete") {
		t.Errorf("truncated manifest before the step: ok=%v %s %q, want inconclusive", ok, ev.Finding, ev.Detail)
	}
	// The step's own file, absent from its manifest, still proves it.
	run = clocked(Run{Project: "acme", RunID: "run-1", Ended: true, Started: []StartedOp{cmd("op-1", m1, "proof.txt")}})
	if ev, ok := p.Probe(ctx, run, op("op-1")); !ok || ev.Finding != pipeline.FindingOccurred {
		t.Errorf("file the step made: ok=%v %s %q, want occurred", ok, ev.Finding, ev.Detail)
	}
}
