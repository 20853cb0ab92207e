package runner

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/worker"

	"github.com/seed-7bc021c3/reckon/internal/pgtest"
	"github.com/seed-7bc021c3/reckon/internal/reckontest"
	"github.com/seed-7bc021c3/reckon/internal/sandboxtest"
	"github.com/seed-7bc021c3/reckon/kernel"
	"github.com/seed-7bc021c3/reckon/kernel/fault"
	"github.com/seed-7bc021c3/reckon/kernel/journal"
	"github.com/seed-7bc021c3/reckon/platform/temporalx"
	"github.com/seed-7bc021c3/reckon/tool/sandbox"
)

// One embedded, real Temporal server serves the whole package; each test
// has its own task queue, project, PostgreSQL schema and worker.
var temporalConn *temporalx.Conn

func TestMain(m *testing.M) {
	conn, err := temporalx.Connect(context.Background(), temporalx.Config{Namespace: "reckon-test", Log: zerolog.Nop()})
	if err != nil {
		fmt.Fprintln(os.Stderr, "start embedded temporal:", err)
		os.Exit(1)
	}
	temporalConn = conn
	code := m.Run()
	conn.Close()
	if code == 0 {
		if err := reckontest.FindLeaks(reckontest.TemporalLeaks()...); err != nil {
			fmt.Fprintln(os.Stderr, "goleak:", err)
			code = 1
		}
	}
	os.Exit(code)
}

func randID(prefix string) string {
	var b [4]byte
	_, _ = rand.Read(b[:])
	return prefix + hex.EncodeToString(b[:])
}

// unconfined reports whether tests must run run_command without bubblewrap
// (only where bwrap is missing; the sandbox has its own tests).
func unconfined() bool {
	_, err := exec.LookPath("bwrap")
	return err != nil
}

// env is one test's kernel: schema, publisher, worker, starter.
type env struct {
	t       testing.TB
	b       *reckontest.Bundle
	project string
	pool    *pgtest.Schema
	journal *journal.Store
	starter *Starter
	// acts, queue and w are the worker's, for a test that stops it and
	// starts another (stopWorker, startWorker).
	acts  *Activities
	queue string
	w     worker.Worker
}

type envOpts struct {
	// unconfined runs run_command without bubblewrap, as
	// RECKON_SANDBOX_UNCONFINED=1 does.
	unconfined bool
	fault      fault.Config
	timeouts   Timeouts
	extra      []kernel.Tool
	// model answers agent runs' model turns (AgentModel); the starter
	// then takes agent runs, of model "scripted" by default.
	model *AgentModel
	// snapshot, when set, replaces the SnapshotWorkspace activity the
	// worker runs (given the real one), to play a worker that dies in it.
	snapshot func(real func(context.Context, SnapshotInput) (*kernel.WorkspaceManifest, error)) func(context.Context, SnapshotInput) (*kernel.WorkspaceManifest, error)
}

// snapshotOverride registers everything as Register does, except that the
// SnapshotWorkspace activity is swapped for a test's.
type snapshotOverride struct {
	worker.Worker
	snapshot func(context.Context, SnapshotInput) (*kernel.WorkspaceManifest, error)
}

func (r snapshotOverride) RegisterActivityWithOptions(a any, o activity.RegisterOptions) {
	if o.Name == ActSnapshotWorkspace {
		a = r.snapshot
	}
	r.Worker.RegisterActivityWithOptions(a, o)
}

func newEnv(t testing.TB, o envOpts) *env {
	t.Helper()
	b := reckontest.Setup(t, reckontest.Config{Publish: true, RealClock: true})
	s, j := b.Schema, b.Journal

	unconf := o.unconfined || unconfined()
	tools := NewTools(append([]kernel.Tool{sandbox.NewRunCommand(sandbox.Config{Unconfined: unconf})}, o.extra...)...)
	acts := &Activities{
		Pool: s.Pool, Journal: j, Tools: tools, Fault: fault.New(s.Pool, o.fault),
		Unconfined: unconf, DeliveryPoll: 20 * time.Millisecond, Log: zerolog.Nop(), Model: o.model,
	}
	queue := randID("q-")
	w := NewWorker(temporalConn.Client, queue, acts)
	if o.snapshot != nil {
		w = worker.New(temporalConn.Client, queue, worker.Options{
			MaxHeartbeatThrottleInterval: maxHeartbeatThrottle,
			StickyScheduleToStartTimeout: stickyScheduleToStart,
		})
		Register(snapshotOverride{Worker: w, snapshot: o.snapshot(acts.SnapshotWorkspace)}, acts)
	}
	if err := w.Start(); err != nil {
		t.Fatal(err)
	}
	e := &env{
		t: t, b: b, project: randID("p-"), pool: s, journal: j, acts: acts, queue: queue, w: w,
		starter: &Starter{
			Pool: s.Pool, Journal: j, Client: temporalConn.Client, TaskQueue: queue,
			DataDir: sandboxtest.Dir(t), Tools: tools, Timeouts: o.timeouts,
		},
	}
	if o.model != nil {
		e.starter.AgentModel = "scripted"
	}
	t.Cleanup(func() {
		if e.w != nil {
			e.w.Stop()
		}
	})
	return e
}

// stopWorker stops the test's worker, as a worker that dies does: its
// runs stay where they are until another worker takes them.
func (e *env) stopWorker() {
	e.t.Helper()
	e.w.Stop()
	e.w = nil
}

// startWorker starts a new worker on the test's task queue; it knows
// nothing of the runs but their histories.
func (e *env) startWorker() {
	e.t.Helper()
	e.w = NewWorker(temporalConn.Client, e.queue, e.acts)
	if err := e.w.Start(); err != nil {
		e.t.Fatal(err)
	}
}

// run starts the plan unchecked and waits for the run to end; it returns
// the workflow's error (nil when the run completed) and the run's events
// once all of them reached the journal.
func (e *env) run(runID string, plan Plan) ([]kernel.Event, error) {
	e.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if _, _, err := e.starter.StartUnchecked(ctx, StartParams{Project: e.project, RunID: runID, Plan: plan}); err != nil {
		e.t.Fatalf("start %s: %v", runID, err)
	}
	err := e.wait(ctx, runID)
	return e.events(runID), err
}

func (e *env) wait(ctx context.Context, runID string) error {
	e.t.Helper()
	return temporalConn.Client.GetWorkflow(ctx, kernel.WorkflowID(e.project, runID), "").Get(ctx, nil)
}

// events waits until the run's outbox rows are delivered and reads them.
func (e *env) events(runID string) []kernel.Event {
	e.t.Helper()
	e.b.WaitDelivered(e.project, runID)
	return e.b.RunEvents(e.project, runID)
}

func (e *env) workspace(runID string) string {
	ws, err := e.starter.Workspace(e.project, runID)
	if err != nil {
		e.t.Fatal(err)
	}
	return ws
}

func (e *env) readFile(runID, name string) string {
	e.t.Helper()
	b, err := os.ReadFile(filepath.Join(e.workspace(runID), name))
	if err != nil {
		e.t.Fatalf("workspace file: %v", err)
	}
	return string(b)
}

// shape renders events as "type op key=value..." lines for assertions.
func shape(evs []kernel.Event) []string {
	var out []string
	for _, ev := range evs {
		s := ev.Type
		if op := ev.OperationID(); op != "" {
			s += " " + op
		}
		if ev.Type == kernel.TypeToolFailed {
			var d kernel.ToolFailed
			_ = ev.DecodeData(&d)
			s += " " + d.ErrorType + " effect=" + d.Effect
		}
		out = append(out, s)
	}
	return out
}

func wantShape(t *testing.T, evs []kernel.Event, want ...string) {
	t.Helper()
	got := shape(evs)
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("events:\n  %s\nwant:\n  %s", strings.Join(got, "\n  "), strings.Join(want, "\n  "))
	}
}

func data(t *testing.T, ev kernel.Event) map[string]any {
	t.Helper()
	var m map[string]any
	if err := ev.DecodeData(&m); err != nil {
		t.Fatal(err)
	}
	return m
}

func cmd(command string) Step {
	return Step{Tool: "run_command", Args: []byte(fmt.Sprintf(`{"command": %q, "timeout_s": 30}`, command))}
}
