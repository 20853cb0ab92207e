package runner

import (
	"context"
	"testing"

	"github.com/seed-7bc021c3/reckon/kernel"
	"github.com/seed-7bc021c3/reckon/kernel/manifest"
)

// TestWorkspaceManifestsAroundCommands checks that a run records a
// manifest before each run_command and after each completed one: the
// events carry digest and counts, the stored entries match the digests,
// and the stored manifests tell which path the command changed.
func TestWorkspaceManifestsAroundCommands(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOpts{})
	evs, err := e.run("r1", Plan{Steps: []Step{cmd("echo one > a.txt"), cmd("mkdir -p d && echo two > d/b.txt")}})
	if err != nil {
		t.Fatalf("run failed: %v", err)
	}
	wantShape(t, evs, "run.started", "tool.started op-1", "tool.completed op-1", "tool.started op-2", "tool.completed op-2", "run.completed")
	summary := func(ev kernel.Event) *kernel.WorkspaceManifest {
		t.Helper()
		var d struct {
			WorkspaceManifest *kernel.WorkspaceManifest `json:"workspace_manifest"`
		}
		if err := ev.DecodeData(&d); err != nil || d.WorkspaceManifest == nil || d.WorkspaceManifest.Digest == "" {
			t.Fatalf("%s %s carries no workspace manifest (%v): %s", ev.Type, ev.EventID, err, ev.Data)
		}
		return d.WorkspaceManifest
	}
	st := manifest.Store{Pool: e.pool.Pool}
	stored := func(op, phase string, want *kernel.WorkspaceManifest) manifest.Manifest {
		t.Helper()
		m, ok, err := st.Get(context.Background(), manifest.Key{Project: e.project, RunID: "r1", OperationID: op, Phase: phase})
		if err != nil || !ok {
			t.Fatalf("manifest %s %s: ok=%v %v", op, phase, ok, err)
		}
		if got := m.Summary(); got != *want {
			t.Fatalf("manifest %s %s: stored %+v, event %+v", op, phase, got, *want)
		}
		return m
	}
	b1 := stored("op-1", manifest.PhaseBefore, summary(evs[1]))
	a1 := stored("op-1", manifest.PhaseAfter, summary(evs[2]))
	b2 := stored("op-2", manifest.PhaseBefore, summary(evs[3]))
	a2 := stored("op-2", manifest.PhaseAfter, summary(evs[4]))
	if s := summary(evs[1]); s.Files != 0 || s.Dirs != 0 {
		t.Fatalf("the first manifest of a fresh workspace is not empty: %+v", s)
	}
	if got := manifest.Compare(b1, a1).Paths(); len(got) != 1 || got[0] != "a.txt" {
		t.Fatalf("op-1 changed %v, want [a.txt]", got)
	}
	if !manifest.Compare(a1, b2).Equal() {
		t.Fatalf("nothing ran between op-1 and op-2, yet %v", manifest.Compare(a1, b2))
	}
	if got := manifest.Compare(b2, a2).Paths(); len(got) != 2 || got[0] != "d" || got[1] != "d/b.txt" {
		t.Fatalf("op-2 changed %v, want [d d/b.txt]", got)
	}
}
