package main

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/seed-7bc021c3/reckon/adapter/httpapi"
	"github.com/seed-7bc021c3/reckon/evals"
	"github.com/seed-7bc021c3/reckon/kernel"
	"github.com/seed-7bc021c3/reckon/kernel/outbox"
	"github.com/seed-7bc021c3/reckon/kernel/runner"
	"github.com/seed-7bc021c3/reckon/pipeline/supervisor"
)

// demoFailingRun starts a run whose only consequential step is faulted
// after its effect, without on_uncertain: the run stops, and the declared
// postcondition lets the supervisor's workspace probe prove the effect.
func demoFailingRun(ctx context.Context, d *demoEnv) error {
	// No postcondition: the workspace-diff probe proves the effect from
	// the manifest the kernel recorded before the call.
	step := demoWriteStep("report.txt", "quarterly report\n")
	step.Postcondition = nil
	view, _, err := demoRun(ctx, d, "report-", []runner.Step{step})
	if err != nil {
		return err
	}
	id := view.RunID
	if view.Status != runner.StatusFailed {
		return fmt.Errorf("run %s is %s, want failed (the fault stops it)", id, view.Status)
	}
	return nil
}

// demoAPI calls the stack's own API with the demo's operator token,
// through the `reckon ops` client; a non-2xx answer is an error.
func demoAPI(ctx context.Context, d *demoEnv, method, path string, q url.Values, body any) (map[string]any, error) {
	c := &opsClient{base: d.Stack.APIURL(), token: d.Stack.GeneratedToken, http: http.DefaultClient}
	raw, _, err := c.do(ctx, method, path, q, body, nil)
	if err != nil {
		return nil, fmt.Errorf("%s %s: %w", method, path, err)
	}
	var m map[string]any
	if err := json.Unmarshal(raw, &m); err != nil {
		return nil, fmt.Errorf("%s %s: not a JSON object: %s", method, path, raw)
	}
	return m, nil
}

func demoListing(ctx context.Context, d *demoEnv) error {
	m, err := demoAPI(ctx, d, http.MethodGet, httpapi.PathOperations, url.Values{"project": {d.Project}}, nil)
	if err != nil {
		return err
	}
	ops, _ := m["operations"].([]any)
	fmt.Fprintf(d.Out, "%d unresolved operation(s), degraded=%v; the first item as the API returns it:\n", len(ops), m["degraded"])
	if len(ops) > 0 {
		fmt.Fprint(d.Out, "  ")
		if err := writeJSON(d.Out, ops[0], "  ", "  "); err != nil {
			return err
		}
	}
	return nil
}

// demoAttention prints the operator's queue.
func demoAttention(ctx context.Context, d *demoEnv) error {
	n, err := demoQueue(ctx, d, true)
	if err != nil {
		return err
	}
	fmt.Fprintf(d.Out, "operator's queue: %d operation(s) waiting for a person\n", n)
	return nil
}

// demoQueue reads the operator's queue, printing its items when show is set.
func demoQueue(ctx context.Context, d *demoEnv, show bool) (int, error) {
	m, err := demoAPI(ctx, d, http.MethodGet, httpapi.PathAttention, url.Values{"project": {d.Project}}, nil)
	if err != nil {
		return 0, err
	}
	ops, _ := m["operations"].([]any)
	for _, o := range ops {
		it, _ := o.(map[string]any)
		if show {
			fmt.Fprintf(d.Out, "  %v/%v  %v  effect=%v reason=%v supervisor=%v\n", it["run_id"], it["operation_id"], it["tool"], it["effect"], it["reason"], it["supervisor"])
		}
	}
	return len(ops), nil
}

// demoOverride has an operator settle the first run's faulted operation
// with the workspace file as evidence — an override of the supervisor's
// verdict (supersedes names the supervisor's event), whether that verdict
// was a probe's proof or an `unknown` left for a person — and prints the
// operation's history.
func demoOverride(ctx context.Context, d *demoEnv) error {
	if len(d.Runs) == 0 {
		return errors.New("no run to reconcile")
	}
	run := d.Runs[0]
	path, proof, err := d.workspaceFile(run, "proof.txt")
	if err != nil {
		return fmt.Errorf("the drill's proof.txt: %w", err)
	}
	sum := sha256.Sum256(proof)
	req := map[string]any{
		"project": d.Project, "run_id": run, "operation_id": "op-1", "effect": "occurred",
		"note":     "proof.txt is in the run's workspace with the content op-1 was asked to write; op-1-r1 rewrote the same bytes",
		"evidence": map[string]any{"path": path, "sha256": hex.EncodeToString(sum[:])},
	}
	m, err := demoAPI(ctx, d, http.MethodPost, httpapi.PathReconcile, nil, req)
	if err != nil {
		return err
	}
	data, _ := m["data"].(map[string]any)
	fmt.Fprintf(d.Out, "operator verdict %v: effect=%v basis=%v supersedes=%s\n", m["event_id"], data["effect"], data["basis"], supersededKey(data))
	wctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	if err := outbox.WaitDelivered(wctx, d.Stack.Pool, d.Project, run, 20*time.Millisecond); err != nil {
		return err
	}
	m, err = demoAPI(ctx, d, http.MethodGet, httpapi.PathHistory,
		url.Values{"project": {d.Project}, "run_id": {run}, "operation_id": {"op-1"}}, nil)
	if err != nil {
		return err
	}
	evs, _ := m["events"].([]any)
	fmt.Fprintf(d.Out, "history of %s/op-1 (who decided what, on which basis):\n", run)
	for _, e := range evs {
		ev, _ := e.(map[string]any)
		data, _ := ev["data"].(map[string]any)
		var extra []string
		for _, k := range []string{"effect", "basis", "error_type"} {
			if v, ok := data[k]; ok {
				extra = append(extra, fmt.Sprintf("%s=%v", k, v))
			}
		}
		if k := supersededKey(data); k != "" {
			extra = append(extra, "supersedes="+k)
		}
		fmt.Fprintf(d.Out, "  %-22v %-20v %s\n", ev["type"], ev["actor"], strings.Join(extra, " "))
	}
	n, err := demoQueue(ctx, d, false)
	if err != nil {
		return err
	}
	fmt.Fprintf(d.Out, "operator's queue after the override: %d operation(s)\n", n)
	return nil
}

// supersededKey is the key of the reconciliation that a reconciliation's
// data (as the API answered it) says it supersedes, spelt as `reckon ops`
// prints it (kernel.EventKey.String); "" when it supersedes none.
func supersededKey(data map[string]any) string {
	raw, err := json.Marshal(data)
	if err != nil {
		return ""
	}
	var d kernel.Reconciliation
	if json.Unmarshal(raw, &d) != nil || d.Supersedes == nil {
		return ""
	}
	return d.Supersedes.String()
}

// demoEval scores the built-in supervisor on the committed fixtures (from
// the repository root, where `make demo` runs).
func demoEval(ctx context.Context, d *demoEnv) error {
	dir := "evals/fixtures"
	fx, err := evals.LoadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		fmt.Fprintf(d.Out, "no %s here (run the demo from the repository root to see the eval score)\n", dir)
		return nil
	}
	if err != nil {
		return err
	}
	rep, err := evals.Score(ctx, supervisor.Builtin{}, fx, evals.ScoreParams{})
	if err != nil {
		return err
	}
	rep.Fixtures = dir
	return evals.PrintSummary(d.Out, rep)
}
