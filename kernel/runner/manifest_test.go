package runner

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"go.temporal.io/sdk/activity"

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

// TestSnapshotOfADeadWorkerIsRetried plays a worker that dies while it
// walks the workspace after a command (a SIGKILL just after the command
// ends): the first attempt of the after-snapshot never answers and never
// heartbeats. The run must go on within the tool heartbeat timeout, the
// retry taking the manifest, not stall for the snapshot's whole two-minute
// StartToClose (TestWorkerSIGKILLDuringRunCommand hit that at random).
func TestSnapshotOfADeadWorkerIsRetried(t *testing.T) {
	t.Parallel()
	var stalled atomic.Int32
	release := make(chan struct{})
	e := newEnv(t, envOpts{
		timeouts: Timeouts{ToolHeartbeat: time.Second},
		snapshot: func(real func(context.Context, SnapshotInput) (*kernel.WorkspaceManifest, error)) func(context.Context, SnapshotInput) (*kernel.WorkspaceManifest, error) {
			return func(ctx context.Context, in SnapshotInput) (*kernel.WorkspaceManifest, error) {
				if in.Phase == manifest.PhaseAfter && activity.GetInfo(ctx).Attempt == 1 {
					stalled.Add(1)
					select {
					case <-ctx.Done():
					case <-release:
					}
					return nil, errors.New("the worker died")
				}
				return real(ctx, in)
			}
		},
	})
	t.Cleanup(func() { close(release) }) // before the worker stops (cleanups run last-in first)
	evs, err := e.run("r1", Plan{Steps: []Step{cmd("echo one > a.txt")}})
	if err != nil {
		t.Fatalf("run failed or stalled: %v", err)
	}
	if stalled.Load() != 1 {
		t.Fatalf("the after-snapshot's first attempt ran %d times, want 1", stalled.Load())
	}
	wantShape(t, evs, "run.started", "tool.started op-1", "tool.completed op-1", "run.completed")
	var done kernel.ToolCompleted
	if err := evs[2].DecodeData(&done); err != nil || done.WorkspaceManifest == nil || done.WorkspaceManifest.Files != 1 {
		t.Fatalf("tool.completed carries no after-manifest of the one file (%v): %s", err, evs[2].Data)
	}
}

// TestSnapshotsOnlyAroundWorkspaceTools: the starter lists the plan's
// workspace-writing tools in the run's input, and only their calls get a
// snapshot activity; a tool that cannot touch the workspace (here a no-op
// tool, as an MCP tool without a workspace root) costs no activity round
// trip for manifests.
func TestSnapshotsOnlyAroundWorkspaceTools(t *testing.T) {
	t.Parallel()
	noop := &noopTool{ran: map[string]time.Time{}}
	e := newEnv(t, envOpts{extra: []kernel.Tool{noop}})
	evs, err := e.run("r1", Plan{Steps: []Step{{Tool: "noop"}, cmd("echo one > a.txt"), {Tool: "noop"}}})
	if err != nil {
		t.Fatalf("run failed: %v", err)
	}
	wantShape(t, evs, "run.started", "tool.started op-1", "tool.completed op-1", "tool.started op-2", "tool.completed op-2",
		"tool.started op-3", "tool.completed op-3", "run.completed")
	it := temporalConn.Client.GetWorkflowHistory(context.Background(), kernel.WorkflowID(e.project, "r1"), "", false, 0)
	snapshots := 0
	for it.HasNext() {
		ev, err := it.Next()
		if err != nil {
			t.Fatal(err)
		}
		if a := ev.GetActivityTaskScheduledEventAttributes(); a != nil && a.GetActivityType().GetName() == ActSnapshotWorkspace {
			snapshots++
		}
	}
	if snapshots != 2 {
		t.Fatalf("%d snapshot activities, want 2 (before and after the one run_command)", snapshots)
	}
	for _, i := range []int{1, 5} {
		var d struct {
			WorkspaceManifest *kernel.WorkspaceManifest `json:"workspace_manifest"`
		}
		if err := evs[i].DecodeData(&d); err != nil || d.WorkspaceManifest != nil {
			t.Fatalf("%s of the no-op tool carries a manifest (%v): %s", evs[i].EventID, err, evs[i].Data)
		}
	}
}
