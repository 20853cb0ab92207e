package main

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"time"

	"github.com/seed-7bc021c3/reckon/internal/app"
	"github.com/seed-7bc021c3/reckon/kernel"
	"github.com/seed-7bc021c3/reckon/kernel/runner"
)

// demoResumer runs the pipeline role's resumer of waiting runs in the
// demo's stack (its scheduled sweep is not started: the demo sweeps when
// its story says so).
func demoResumer(stack *app.Stack) error {
	sw, err := stack.NewSweeper(stack.Operations)
	if err != nil {
		return err
	}
	r := stack.NewResumer(stack.Kernel.Conn.Client, sw)
	stack.Go(func(ctx context.Context) { _ = r.Run(ctx) })
	return nil
}

// demoAwaitRun closes the loop: a payment step appends its line to
// ledger.txt, then its worker "crashes" (the demo's fault); the step says
// on_uncertain: await, so the run waits instead of failing. Its wait asks
// for a triage of the run at once; the postcondition probe finds the
// payment's line and proves the effect occurred; the run resumes with the
// next step, and the payment is not made again.
func demoAwaitRun(ctx context.Context, d *demoEnv) error {
	sum := sha256.Sum256([]byte("payment op-1\n"))
	pay := runner.Step{Tool: kernel.ToolRunCommand, OnUncertain: runner.OnUncertainAwait,
		Args:          mustJSON(map[string]any{"command": `echo "payment $RECKON_OPERATION_ID" >> ledger.txt`, "timeout_s": 30}),
		Postcondition: mustJSON(map[string]any{"path": "ledger.txt", "sha256": hex.EncodeToString(sum[:])})}
	receipt := runner.Step{Tool: kernel.ToolRunCommand,
		Args: mustJSON(map[string]any{"command": `echo "receipt $RECKON_OPERATION_ID" >> ledger.txt`, "timeout_s": 30})}
	id, err := demoStart(ctx, d, "pay-", []runner.Step{pay, receipt})
	if err != nil {
		return err
	}
	demoShowAwaiting(ctx, d, id)
	view, runErr, err := demoFinish(ctx, d, id)
	if err != nil {
		return err
	}
	if runErr != nil || view.Status != runner.StatusCompleted {
		return fmt.Errorf("run %s is %s, want completed after its wait (%v)", id, view.Status, runErr)
	}
	var since, resumed time.Time
	for _, ev := range view.Events {
		switch ev.Type {
		case kernel.TypeRunAwaiting:
			since = ev.TS
		case kernel.TypeRunResumed:
			resumed = ev.TS
		}
	}
	fmt.Fprintf(d.Out, "the run waited %s from run.awaiting to run.resumed\n", resumed.Sub(since).Round(time.Millisecond))
	path, ledger, err := d.workspaceFile(id, "ledger.txt")
	if err != nil {
		return err
	}
	fmt.Fprintf(d.Out, "workspace %s: %q — one payment, one receipt\n", path, string(ledger))
	if string(ledger) != "payment op-1\nreceipt op-2\n" {
		return fmt.Errorf("ledger.txt = %q: the payment must be made exactly once", ledger)
	}
	return nil
}

// demoShowAwaiting asks GET /v1/runs/{run_id} until the run shows it is
// waiting (or has already resumed: the probe may be quicker than the
// question) and prints what it says.
func demoShowAwaiting(ctx context.Context, d *demoEnv, id string) {
	wctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	for wctx.Err() == nil {
		m, err := demoAPI(wctx, d, http.MethodGet, "/v1/runs/"+url.PathEscape(id), url.Values{"project": {d.Project}, "limit": {"1"}}, nil)
		if err != nil {
			return
		}
		switch m["status"] {
		case runner.StatusAwaiting:
			w, _ := json.Marshal(m["awaiting"])
			fmt.Fprintf(d.Out, "GET /v1/runs/%s: \"status\": \"awaiting\", \"awaiting\": %s\n", id, w)
			return
		case runner.StatusCompleted, runner.StatusFailed:
			return
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// workspaceFile reads file name of run's workspace, as the demo's checks
// do after a run: its path and its bytes.
func (d *demoEnv) workspaceFile(run, name string) (string, []byte, error) {
	ws, err := d.Stack.Kernel.Starter.Workspace(d.Project, run)
	if err != nil {
		return "", nil, err
	}
	path := filepath.Join(ws, name)
	b, err := os.ReadFile(path)
	return path, b, err
}
