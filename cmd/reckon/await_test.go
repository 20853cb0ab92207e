package main

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"go.temporal.io/sdk/client"

	"github.com/seed-7bc021c3/reckon/internal/app"
	"github.com/seed-7bc021c3/reckon/internal/reckontest"
	"github.com/seed-7bc021c3/reckon/internal/sandboxtest"
	"github.com/seed-7bc021c3/reckon/kernel"
	"github.com/seed-7bc021c3/reckon/kernel/operations"
	"github.com/seed-7bc021c3/reckon/kernel/runner"
	"github.com/seed-7bc021c3/reckon/platform/config"
	"github.com/seed-7bc021c3/reckon/tool/sandbox"
)

// TestAwaitAcrossAWorkerSIGKILL: two runs whose first command commits its
// effect and then faults wait for its settlement; their `reckon worker`
// process is killed with SIGKILL while they wait. The pipeline's resumer
// (the production wiring: app.NewResumer over the sweeper) has one run
// triaged, where the postcondition probe proves the effect, and the other
// waits for an operator's ruling. Both are signalled while no worker runs;
// a new worker process resumes them from their histories, and neither
// command runs again: each effects.txt holds one line per operation.
func TestAwaitAcrossAWorkerSIGKILL(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	conn := connectTemporal(ctx, t, "await-kill")
	b := reckontest.Setup(t, reckontest.Config{RealClock: true, Publish: true})
	dataDir := sandboxtest.Dir(t)
	queue := fmt.Sprintf("await-kill-%d", time.Now().UnixNano())
	_, bwrapErr := exec.LookPath("bwrap")
	// Every workspace manifest is cut short (as for a workspace too big to
	// walk in its budget), so only the declared postcondition can prove an
	// effect: the run without one waits for the operator.
	env := reckonEnv(b.Schema.URL, conn, "await-kill", queue, dataDir,
		"RECKON_LOG_LEVEL=error", "RECKON_TOKENS=", "KERNEL_FAULT_AFTER_EFFECT=op-1", "KERNEL_FAULT_BEFORE_EFFECT=",
		"RECKON_MANIFEST_BUDGET=1ns")
	if bwrapErr != nil {
		env = append(env, "RECKON_SANDBOX_UNCONFINED=1")
	}
	var logs reckontest.Buffer
	defer func() {
		if t.Failed() {
			t.Logf("worker output:\n%s", logs.String())
		}
	}()
	startWorker := func() *exec.Cmd {
		cmd := exec.Command(os.Args[0], "worker")
		cmd.Env, cmd.Stderr = env, &logs
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		return cmd
	}
	core := awaitCore(ctx, t, b.Schema.URL, dataDir, bwrapErr != nil)
	ops := core.OperationsService(conn.Client)
	starter := &runner.Starter{Pool: b.Schema.Pool, Journal: b.Journal, Client: conn.Client, TaskQueue: queue, DataDir: dataDir,
		Tools: runner.NewTools(sandbox.NewRunCommand(sandbox.Config{Unconfined: bwrapErr != nil}))}

	w := startWorker()
	for _, run := range []string{"proved", "ruled"} {
		if _, _, err := starter.Start(ctx, runner.StartParams{Project: "acme", RunID: run, Plan: awaitPlan(run == "proved")}); err != nil {
			t.Fatal(err)
		}
	}
	for _, run := range []string{"proved", "ruled"} {
		waitFor(t, starter, run, func(v runner.RunView) bool { return v.Status == runner.StatusAwaiting })
	}
	if err := w.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = w.Wait()

	// The pipeline role, with no worker anywhere: the waits are triaged,
	// the operator rules on what the probe could not see, and both runs
	// are signalled.
	sw, err := core.NewSweeper(ops)
	if err != nil {
		t.Fatal(err)
	}
	rctx, stopResumer := context.WithCancel(ctx)
	resumed := make(chan struct{})
	go func() { defer close(resumed); _ = core.NewResumer(conn.Client, sw).Run(rctx) }()
	defer func() { stopResumer(); <-resumed }()
	waitFor(t, starter, "ruled", func(v runner.RunView) bool { return hasType(v, kernel.TypeSupervisorVerdict) })
	if _, err := ops.Reconcile(ctx, operations.ReconcileParams{Project: "acme", RunID: "ruled", OperationID: "op-1",
		Effect: kernel.EffectOccurred, Note: "effects.txt holds op-1", Basis: kernel.BasisOperator, Actor: kernel.OperatorActor("ann")}); err != nil {
		t.Fatal(err)
	}
	for _, run := range []string{"proved", "ruled"} {
		reckontest.Eventually(t, 60*time.Second, run+" signalled", func() bool { return signalled(ctx, t, conn.Client, run) })
	}

	final := startWorker()
	defer func() { _ = final.Process.Kill(); _ = final.Wait() }()
	for run, basis := range map[string]string{"proved": kernel.BasisProbe, "ruled": kernel.BasisOperator} {
		if err := conn.Client.GetWorkflow(ctx, kernel.WorkflowID("acme", run), "").Get(ctx, nil); err != nil {
			t.Fatalf("%s: %v", run, err)
		}
		v := waitFor(t, starter, run, func(v runner.RunView) bool {
			return v.Status == runner.StatusCompleted && hasType(v, kernel.TypeRunCompleted)
		})
		n := 0
		for _, ev := range v.Events {
			if ev.Type != kernel.TypeRunResumed {
				continue
			}
			n++
			var d kernel.RunResumed
			if err := ev.DecodeData(&d); err != nil || d.Effect != kernel.EffectOccurred || d.Basis != basis {
				t.Fatalf("%s: run.resumed %s, want occurred on basis %s", run, ev.Data, basis)
			}
		}
		if n != 1 {
			t.Fatalf("%s: %d run.resumed events, want 1", run, n)
		}
		ws, _ := starter.Workspace("acme", run)
		if got, _ := os.ReadFile(filepath.Join(ws, "effects.txt")); string(got) != "op-1\nop-2\n" {
			t.Fatalf("%s: effects.txt = %q: want each command once across fault, wait, kill and resume", run, got)
		}
	}
}

// awaitPlan appends op-1 (declaring effects.txt's content when
// postcondition is set) and waits on an uncertain failure, then appends
// op-2.
func awaitPlan(postcondition bool) runner.Plan {
	step := func(await string) runner.Step {
		return runner.Step{Tool: kernel.ToolRunCommand, OnUncertain: await,
			Args: json.RawMessage(`{"command": "echo \"$RECKON_OPERATION_ID\" >> effects.txt", "timeout_s": 30}`)}
	}
	first := step(runner.OnUncertainAwait)
	if postcondition {
		sum := sha256.Sum256([]byte("op-1\n"))
		first.Postcondition = json.RawMessage(`{"path": "effects.txt", "sha256": "` + hex.EncodeToString(sum[:]) + `"}`)
	}
	return runner.Plan{Steps: []runner.Step{first, step("")}}
}

// awaitCore is the core of the pipeline role on the test's schema and
// data directory.
func awaitCore(ctx context.Context, t *testing.T, dbURL, dataDir string, unconfined bool) *app.Core {
	t.Helper()
	vars := map[string]string{"DATABASE_URL": dbURL, "RECKON_DATA_DIR": dataDir, "RECKON_LOG_LEVEL": "error"}
	if unconfined {
		vars["RECKON_SANDBOX_UNCONFINED"] = "1"
	}
	cfg, err := config.LoadFrom(func(k string) string { return vars[k] })
	if err != nil {
		t.Fatal(err)
	}
	core, err := app.NewCore(ctx, cfg, false)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(core.Close)
	return core
}

// waitFor polls the run's view until cond holds and returns it.
func waitFor(t *testing.T, s *runner.Starter, runID string, cond func(runner.RunView) bool) runner.RunView {
	t.Helper()
	var v runner.RunView
	reckontest.Eventually(t, 60*time.Second, "run "+runID, func() bool {
		var err error
		if v, err = s.View(context.Background(), "acme", runID, runner.EventPage{Limit: runner.MaxEventLimit}); err != nil {
			t.Fatal(err)
		}
		return cond(v)
	})
	return v
}

func hasType(v runner.RunView, typ string) bool {
	for _, ev := range v.Events {
		if ev.Type == typ {
			return true
		}
	}
	return false
}

// signalled reports whether the run's history holds a signal.
func signalled(ctx context.Context, t *testing.T, c client.Client, runID string) bool {
	t.Helper()
	it := c.GetWorkflowHistory(ctx, kernel.WorkflowID("acme", runID), "", false, 0)
	for it.HasNext() {
		he, err := it.Next()
		if err != nil {
			t.Fatal(err)
		}
		if he.GetWorkflowExecutionSignaledEventAttributes() != nil {
			return true
		}
	}
	return false
}
