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

// workspaceRig is acme/run-1 as a kernel run with a workspace under root
// holding keep.txt, its manifests stored as the kernel's worker stores
// them, and the run_command operations a probe is asked about, all started
// an hour ago.
type workspaceRig struct {
	ctx      context.Context
	db       *pgtest.Schema
	root, ws string
	st       manifest.Store
	started  time.Time
}

func newWorkspaceRig(t *testing.T) *workspaceRig {
	t.Helper()
	db := pgtest.New(t)
	kernelRuns(t, db.Pool, "acme", "run-1")
	root := t.TempDir()
	r := &workspaceRig{ctx: context.Background(), db: db, root: root, ws: filepath.Join(root, "acme", "run-1"),
		st: manifest.Store{Pool: db.Pool}, started: time.Now().Add(-time.Hour)}
	if err := os.MkdirAll(r.ws, 0o755); err != nil {
		t.Fatal(err)
	}
	r.write(t, "keep.txt", "keep\n")
	return r
}

// write writes content to the workspace file name.
func (r *workspaceRig) write(t *testing.T, name, content string) {
	t.Helper()
	if err := os.WriteFile(filepath.Join(r.ws, name), []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

// record takes and stores the manifest before op, within limits (zero:
// the defaults), and returns its summary and when it was taken.
func (r *workspaceRig) record(t *testing.T, op string, limits manifest.Limits) (*kernel.WorkspaceManifest, time.Time) {
	t.Helper()
	m, err := manifest.Take(r.ctx, r.ws, manifest.Options{Limits: limits})
	if err == nil {
		m, err = r.st.Put(r.ctx, manifest.Key{Project: "acme", RunID: "run-1", OperationID: op, Phase: manifest.PhaseBefore}, m)
	}
	if err != nil {
		t.Fatal(err)
	}
	s := m.Summary()
	return &s, m.TakenAt
}

// manifest records the manifest before op with the default limits.
func (r *workspaceRig) manifest(t *testing.T, op string) *kernel.WorkspaceManifest {
	t.Helper()
	m, _ := r.record(t, op, manifest.Limits{})
	return m
}

// cmd is run_command operation id as the run's history holds it.
func (r *workspaceRig) cmd(id string, m *kernel.WorkspaceManifest, answered bool) StartedOp {
	return StartedOp{OperationID: id, Tool: kernel.ToolRunCommand, StartedAt: r.started, Args: []byte(`{"command":"x","timeout_s":30}`), Manifest: m, Answered: answered}
}

// run is the ended run with ops in the order they started, read with the
// database clock at now().
func (r *workspaceRig) run(ops ...StartedOp) Run {
	return clocked(Run{Project: "acme", RunID: "run-1", Ended: true, Started: ops})
}

// op is the kernel's operation id on the wall, in state, its tool.started
// committed when it started.
func (r *workspaceRig) op(id, state string) pipeline.WallOperation {
	return pipeline.WallOperation{OperationID: id, Tool: kernel.ToolRunCommand, State: state, StartedAt: r.started, JournaledAt: journaled(r.started),
		StartedKey: kernel.EventKey{SourceID: kernel.SourceKernel, EventID: "acme/run-1/" + id + "/started"}}
}

// diff is the diff probe over the rig's workspace and manifests.
func (r *workspaceRig) diff() Diff {
	return Diff{Root: r.root, Owners: operations.Owners{Pool: r.db.Pool}, Manifests: r.st}
}

// checkOp fails the test unless p applies to o on run and finds want with
// a detail containing detail.
func (r *workspaceRig) checkOp(t *testing.T, p Probe, name string, run Run, o pipeline.WallOperation, want, detail string) {
	t.Helper()
	ev, ok := p.Probe(r.ctx, run, o)
	checkEvidence(t, name, ev, ok, want, detail)
}

// check is checkOp for operation id, failed uncertain.
func (r *workspaceRig) check(t *testing.T, p Probe, name string, run Run, id, want, detail string) {
	t.Helper()
	r.checkOp(t, p, name, run, r.op(id, "failed_uncertain"), want, detail)
}

// TestDiffProbe walks the probe's rules on a real workspace with manifests
// stored as the kernel's worker stores them.
func TestDiffProbe(t *testing.T) {
	t.Parallel()
	r := newWorkspaceRig(t)
	p := r.diff()

	m1 := r.manifest(t, "op-1")
	// Nothing changed since op-1's manifest; the run is over.
	ended := r.run(r.cmd("op-1", m1, true))
	r.check(t, p, "unchanged", ended, "op-1", pipeline.FindingNone, "no durable effect")
	// The run may still be running: nothing either way.
	running := ended
	running.Ended = false
	r.check(t, p, "running", running, "op-1", pipeline.FindingInconclusive, "may still be running")
	// Unconfined: never none.
	unconf := r.run(r.cmd("op-1", m1, true))
	unconf.Started[0].Unconfined = true
	r.check(t, p, "unconfined", unconf, "op-1", pipeline.FindingInconclusive, "unconfined")
	// A lost worker (not answered) whose timeout has not passed: deferred.
	young := r.run(r.cmd("op-1", m1, false))
	young.Started[0].StartedAt = time.Now()
	ev, _ := p.Probe(r.ctx, young, r.op("op-1", "crash_window"))
	if ev.Finding != pipeline.FindingInconclusive || ev.RecheckAfter == nil {
		t.Errorf("a possibly running command: %s recheck %v", ev.Finding, ev.RecheckAfter)
	}

	// op-1 writes a file; then op-2 (its re-issue) starts.
	r.write(t, "out.txt", "x\n")
	r.check(t, p, "changed", ended, "op-1", pipeline.FindingOccurred, "out.txt")
	m2 := r.manifest(t, "op-2")
	// op-2 writes the same file again: op-1 is still told apart by op-2's
	// before-manifest, and op-2 (compared with now) changed out.txt too.
	r.write(t, "out.txt", "y\n")
	reissued := r.run(r.cmd("op-1", m1, true), r.cmd("op-2", m2, true))
	r.check(t, p, "original vs re-issue", reissued, "op-1", pipeline.FindingOccurred, "recorded before the later operation op-2 differs from the manifest recorded before op-1: out.txt")
	r.check(t, p, "re-issue vs now", reissued, "op-2", pipeline.FindingOccurred, "out.txt")
	// An original faulted before its effect: equal to the re-issue's
	// before-manifest.
	m3 := r.manifest(t, "op-3")
	m4 := r.manifest(t, "op-4")
	before := r.run(r.cmd("op-3", m3, true), r.cmd("op-4", m4, true))
	r.check(t, p, "original before its effect", before, "op-3", pipeline.FindingNone, "recorded before the later operation op-4")
	// An earlier operation that may still be running spoils attribution.
	lost := r.run(r.cmd("op-2", m2, false), r.cmd("op-3", m3, true), r.cmd("op-4", m4, true))
	lost.Started[0].StartedAt = time.Now()
	r.check(t, p, "earlier still running", lost, "op-3", pipeline.FindingInconclusive, "earlier operation op-2")
	// An earlier command that ran unconfined, however long ago and
	// answered: a process it left outside its group may have made the
	// change.
	unconfEarlier := r.run(r.cmd("op-2", m2, true), r.cmd("op-3", m3, true), r.cmd("op-4", m4, true))
	unconfEarlier.Started[0].Unconfined = true
	r.check(t, p, "earlier unconfined", unconfEarlier, "op-3", pipeline.FindingInconclusive, "earlier operation op-2")
	checkEarlierGaveUp(t, r, p, m1)
	// A digest that is not the stored manifest's proves nothing.
	forged := r.run(r.cmd("op-4", &kernel.WorkspaceManifest{Digest: "00"}, true))
	r.check(t, p, "forged digest", forged, "op-4", pipeline.FindingInconclusive, "digest")
	// An agent-reported operation, or one without a manifest: not applicable.
	agent := r.op("op-4", "failed_uncertain")
	agent.StartedKey.SourceID = "agent-x"
	if _, ok := p.Probe(r.ctx, before, agent); ok {
		t.Error("the probe applied to an agent's operation")
	}
	if _, ok := p.Probe(r.ctx, r.run(r.cmd("op-1", nil, true)), r.op("op-1", "failed_uncertain")); ok {
		t.Error("the probe applied without a manifest")
	}
	checkManyLongNames(t, r, p, m4)
	// The workspace gone: inconclusive.
	if err := os.RemoveAll(r.ws); err != nil {
		t.Fatal(err)
	}
	r.check(t, p, "workspace gone", r.run(r.cmd("op-4", m4, true)), "op-4", pipeline.FindingInconclusive, "gone")
}

// checkEarlierGaveUp: an earlier operation the activity gave up on (not
// answered: a heartbeat timeout while its worker lived) that could act
// until just after op-5's before-manifest — over by the comparison point,
// op-6's before-manifest, but not by op-5's baseline: the change may be
// its write, so nothing is attributed to op-5. Answered, it could not act
// after op-5's baseline: the change is op-5's.
func checkEarlierGaveUp(t *testing.T, r *workspaceRig, p Diff, m1 *kernel.WorkspaceManifest) {
	t.Helper()
	m5, taken5 := r.record(t, "op-5", manifest.Limits{})
	r.write(t, "late.txt", "z\n")
	time.Sleep(50 * time.Millisecond)
	m6, taken6 := r.record(t, "op-6", manifest.Limits{})
	gaveUp := r.cmd("op-e", m1, false)
	gaveUp.StartedAt = taken5.Add(10 * time.Millisecond).Add(-actBound(gaveUp, p.Grace))
	if end := gaveUp.StartedAt.Add(actBound(gaveUp, p.Grace)); !end.After(taken5) || end.After(taken6) {
		t.Fatalf("op-e's bound %s must lie between op-5's manifest (%s) and op-6's (%s)", end, taken5, taken6)
	}
	late := r.run(gaveUp, r.cmd("op-5", m5, true), r.cmd("op-6", m6, true))
	r.check(t, p, "earlier over by the comparison point only", late, "op-5", pipeline.FindingInconclusive, "earlier operation op-e")
	late.Started[0].Answered = true
	r.check(t, p, "earlier answered", late, "op-5", pipeline.FindingOccurred, "late.txt")
}

// checkManyLongNames: the command chose how many paths it made and how
// long their names are: the evidence stays under the reconciliation's
// cap, or the wall could never be recorded.
func checkManyLongNames(t *testing.T, r *workspaceRig, p Diff, m4 *kernel.WorkspaceManifest) {
	t.Helper()
	long := strings.Repeat("n", 240)
	for i := range 2000 {
		r.write(t, fmt.Sprintf("%s-%04d", long, i), "")
	}
	ev, _ := p.Probe(r.ctx, r.run(r.cmd("op-4", m4, true)), r.op("op-4", "failed_uncertain"))
	raw, err := json.Marshal(ev)
	if err != nil {
		t.Fatal(err)
	}
	if ev.Finding != pipeline.FindingOccurred || !strings.Contains(ev.Detail, "more") || len(raw) > operations.MaxEvidenceBytes {
		t.Errorf("2,000 long names: %s, %d bytes of evidence (cap %d), detail %.200q", ev.Finding, len(raw), operations.MaxEvidenceBytes, ev.Detail)
	}
}
