package probe

import (
	"context"
	"encoding/json"
	"fmt"
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

// diffWorkspace makes acme/run-1 a kernel run with a workspace under root
// holding keep.txt, and returns root and the workspace.
func diffWorkspace(t *testing.T, db *pgtest.Schema) (root, ws string) {
	t.Helper()
	kernelRuns(t, db.Pool, "acme", "run-1")
	root = t.TempDir()
	ws = filepath.Join(root, "acme", "run-1")
	if err := os.MkdirAll(ws, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(ws, "keep.txt"), []byte("keep\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	return root, ws
}

// TestDiffProbe walks the probe's rules on a real workspace with manifests
// stored as the kernel's worker stores them.
func TestDiffProbe(t *testing.T) {
	t.Parallel()
	db := pgtest.New(t)
	ctx := context.Background()
	root, ws := diffWorkspace(t, db)
	st := manifest.Store{Pool: db.Pool}
	recordTaken := func(op string) (*kernel.WorkspaceManifest, time.Time) {
		t.Helper()
		m, err := manifest.Take(ctx, ws, manifest.Options{})
		if err != nil {
			t.Fatal(err)
		}
		if m, err = st.Put(ctx, manifest.Key{Project: "acme", RunID: "run-1", OperationID: op, Phase: manifest.PhaseBefore}, m); err != nil {
			t.Fatal(err)
		}
		s := m.Summary()
		return &s, m.TakenAt
	}
	record := func(op string) *kernel.WorkspaceManifest {
		t.Helper()
		s, _ := recordTaken(op)
		return s
	}
	started := time.Now().Add(-time.Hour)
	cmd := func(id string, m *kernel.WorkspaceManifest, answered bool) StartedOp {
		return StartedOp{OperationID: id, Tool: kernel.ToolRunCommand, StartedAt: started, Args: []byte(`{"command":"x","timeout_s":30}`), Manifest: m, Answered: answered}
	}
	p := Diff{Root: root, Owners: operations.Owners{Pool: db.Pool}, Manifests: st}
	op := func(id, state string) pipeline.WallOperation {
		return pipeline.WallOperation{OperationID: id, Tool: kernel.ToolRunCommand, State: state, StartedAt: started, JournaledAt: journaled(started),
			StartedKey: kernel.EventKey{SourceID: kernel.SourceKernel, EventID: "acme/run-1/" + id + "/started"}}
	}
	check := func(name string, run Run, o pipeline.WallOperation, want, detail string) {
		t.Helper()
		ev, ok := p.Probe(ctx, run, o)
		if !ok || ev.Finding != want || !strings.Contains(ev.Detail, detail) {
			t.Errorf("%s: ok=%v %s %q, want %s containing %q", name, ok, ev.Finding, ev.Detail, want, detail)
		}
	}

	m1 := record("op-1")
	// Nothing changed since op-1's manifest; the run is over.
	ended := clocked(Run{Project: "acme", RunID: "run-1", Ended: true, Started: []StartedOp{cmd("op-1", m1, true)}})
	check("unchanged", ended, op("op-1", "failed_uncertain"), pipeline.FindingNone, "no durable effect")
	// The run may still be running: nothing either way.
	running := ended
	running.Ended = false
	check("running", running, op("op-1", "failed_uncertain"), pipeline.FindingInconclusive, "may still be running")
	// Unconfined: never none.
	unconf := clocked(Run{Project: "acme", RunID: "run-1", Ended: true, Started: []StartedOp{cmd("op-1", m1, true)}})
	unconf.Started[0].Unconfined = true
	check("unconfined", unconf, op("op-1", "failed_uncertain"), pipeline.FindingInconclusive, "unconfined")
	// A lost worker (not answered) whose timeout has not passed: deferred.
	young := clocked(Run{Project: "acme", RunID: "run-1", Ended: true, Started: []StartedOp{cmd("op-1", m1, false)}})
	young.Started[0].StartedAt = time.Now()
	yo := op("op-1", "crash_window")
	ev, _ := p.Probe(ctx, young, yo)
	if ev.Finding != pipeline.FindingInconclusive || ev.RecheckAfter == nil {
		t.Errorf("a possibly running command: %s recheck %v", ev.Finding, ev.RecheckAfter)
	}

	// op-1 writes a file; then op-2 (its re-issue) starts.
	if err := os.WriteFile(filepath.Join(ws, "out.txt"), []byte("x\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	check("changed", ended, op("op-1", "failed_uncertain"), pipeline.FindingOccurred, "out.txt")
	m2 := record("op-2")
	// op-2 writes the same file again: op-1 is still told apart by op-2's
	// before-manifest, and op-2 (compared with now) changed out.txt too.
	if err := os.WriteFile(filepath.Join(ws, "out.txt"), []byte("y\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	reissued := clocked(Run{Project: "acme", RunID: "run-1", Ended: true, Started: []StartedOp{cmd("op-1", m1, true), cmd("op-2", m2, true)}})
	check("original vs re-issue", reissued, op("op-1", "failed_uncertain"), pipeline.FindingOccurred, "recorded before the later operation op-2 differs from the manifest recorded before op-1: out.txt")
	check("re-issue vs now", reissued, op("op-2", "failed_uncertain"), pipeline.FindingOccurred, "out.txt")
	// An original faulted before its effect: equal to the re-issue's
	// before-manifest.
	m3 := record("op-3")
	m4 := record("op-4")
	before := clocked(Run{Project: "acme", RunID: "run-1", Ended: true, Started: []StartedOp{cmd("op-3", m3, true), cmd("op-4", m4, true)}})
	check("original before its effect", before, op("op-3", "failed_uncertain"), pipeline.FindingNone, "recorded before the later operation op-4")
	// An earlier operation that may still be running spoils attribution.
	lost := clocked(Run{Project: "acme", RunID: "run-1", Ended: true, Started: []StartedOp{cmd("op-2", m2, false), cmd("op-3", m3, true), cmd("op-4", m4, true)}})
	lost.Started[0].StartedAt = time.Now()
	check("earlier still running", lost, op("op-3", "failed_uncertain"), pipeline.FindingInconclusive, "earlier operation op-2")
	// An earlier command that ran unconfined, however long ago and
	// answered: a process it left outside its group may have made the
	// change.
	unconfEarlier := clocked(Run{Project: "acme", RunID: "run-1", Ended: true, Started: []StartedOp{cmd("op-2", m2, true), cmd("op-3", m3, true), cmd("op-4", m4, true)}})
	unconfEarlier.Started[0].Unconfined = true
	check("earlier unconfined", unconfEarlier, op("op-3", "failed_uncertain"), pipeline.FindingInconclusive, "earlier operation op-2")
	// An earlier operation the activity gave up on (not answered: a
	// heartbeat timeout while its worker lived) that could act until just
	// after op-5's before-manifest — over by the comparison point, op-6's
	// before-manifest, but not by op-5's baseline: the change may be its
	// write, so nothing is attributed to op-5.
	m5, taken5 := recordTaken("op-5")
	if err := os.WriteFile(filepath.Join(ws, "late.txt"), []byte("z\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	time.Sleep(50 * time.Millisecond)
	m6, taken6 := recordTaken("op-6")
	gaveUp := cmd("op-e", m1, false)
	gaveUp.StartedAt = taken5.Add(10 * time.Millisecond).Add(-actBound(gaveUp, p.Grace))
	if end := gaveUp.StartedAt.Add(actBound(gaveUp, p.Grace)); !end.After(taken5) || end.After(taken6) {
		t.Fatalf("op-e's bound %s must lie between op-5's manifest (%s) and op-6's (%s)", end, taken5, taken6)
	}
	late := clocked(Run{Project: "acme", RunID: "run-1", Ended: true, Started: []StartedOp{gaveUp, cmd("op-5", m5, true), cmd("op-6", m6, true)}})
	check("earlier over by the comparison point only", late, op("op-5", "failed_uncertain"), pipeline.FindingInconclusive, "earlier operation op-e")
	// Answered, it could not act after op-5's baseline: the change is op-5's.
	late.Started[0].Answered = true
	check("earlier answered", late, op("op-5", "failed_uncertain"), pipeline.FindingOccurred, "late.txt")
	// A digest that is not the stored manifest's proves nothing.
	forged := clocked(Run{Project: "acme", RunID: "run-1", Ended: true, Started: []StartedOp{cmd("op-4", &kernel.WorkspaceManifest{Digest: "00"}, true)}})
	check("forged digest", forged, op("op-4", "failed_uncertain"), pipeline.FindingInconclusive, "digest")
	// An agent-reported operation, or one without a manifest: not applicable.
	agent := op("op-4", "failed_uncertain")
	agent.StartedKey.SourceID = "agent-x"
	if _, ok := p.Probe(ctx, before, agent); ok {
		t.Error("the probe applied to an agent's operation")
	}
	if _, ok := p.Probe(ctx, clocked(Run{Project: "acme", RunID: "run-1", Ended: true, Started: []StartedOp{cmd("op-1", nil, true)}}), op("op-1", "failed_uncertain")); ok {
		t.Error("the probe applied without a manifest")
	}
	// The command chose how many paths it made and how long their names
	// are: the evidence stays under the reconciliation's cap, or the wall
	// could never be recorded.
	long := strings.Repeat("n", 240)
	for i := range 2000 {
		if err := os.WriteFile(filepath.Join(ws, fmt.Sprintf("%s-%04d", long, i)), nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	many := clocked(Run{Project: "acme", RunID: "run-1", Ended: true, Started: []StartedOp{cmd("op-4", m4, true)}})
	ev, _ = p.Probe(ctx, many, op("op-4", "failed_uncertain"))
	raw, err := json.Marshal(ev)
	if err != nil {
		t.Fatal(err)
	}
	if ev.Finding != pipeline.FindingOccurred || !strings.Contains(ev.Detail, "more") || len(raw) > operations.MaxEvidenceBytes {
		t.Errorf("2,000 long names: %s, %d bytes of evidence (cap %d), detail %.200q", ev.Finding, len(raw), operations.MaxEvidenceBytes, ev.Detail)
	}
	// The workspace gone: inconclusive.
	if err := os.RemoveAll(ws); err != nil {
		t.Fatal(err)
	}
	check("workspace gone", clocked(Run{Project: "acme", RunID: "run-1", Ended: true, Started: []StartedOp{cmd("op-4", m4, true)}}), op("op-4", "failed_uncertain"), pipeline.FindingInconclusive, "gone")
}
