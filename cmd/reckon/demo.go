package main

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/seed-7bc021c3/reckon/internal/app"
	"github.com/seed-7bc021c3/reckon/internal/fakeopenai"
	"github.com/seed-7bc021c3/reckon/kernel"
	"github.com/seed-7bc021c3/reckon/kernel/fault"
	"github.com/seed-7bc021c3/reckon/kernel/outbox"
	"github.com/seed-7bc021c3/reckon/kernel/runner"
	"github.com/seed-7bc021c3/reckon/tool/sandbox"
)

// demoEnv is what demo steps share: the running stack and what earlier
// steps produced.
type demoEnv struct {
	Stack   *app.Stack
	Out     io.Writer
	Project string
	// Runs lists the run ids started so far, in order.
	Runs []string
	// Model is the scripted model of the demo's agent run.
	Model *fakeopenai.AgentModel
}

// demoStep is one step of the demo.
type demoStep struct {
	name string
	run  func(ctx context.Context, d *demoEnv) error
}

// demoSteps is the demo, in the order it runs: the story of the README's
// "Two commands". The steps' functions live beside the part of the
// system they show (demo_api.go, demo_triage.go); the order lives here.
var demoSteps = []demoStep{
	{"run a plan whose first run_command faults after its effect", demoDrillRun},
	{"a second run: its only step writes report.txt (no postcondition declared), then the worker crashes (no re-issue: the run fails)", demoFailingRun},
	{"the operations listing, through the HTTP API (GET /v1/agent/operations)", demoListing},
	{"triage: one supervisor sweep over the project's uncertain operations", demoTriage},
	{"the operator's queue: what the supervisor left for a person (GET /v1/agent/operations/attention)", demoAttention},
	{"an operator overrides the supervisor's verdict with evidence of their own (POST /v1/agent/operations/reconcile), then reads the history", demoOverride},
	{"a run that waits (on_uncertain: await): its payment faults after its effect, the run asks for a triage of itself, the probe proves the effect, and the run resumes without paying again", demoAwaitRun},
	{"the retry guard in the MCP gateway: an agent's timed-out call is retried; the retry is held, not sent; after an operator's ruling a third identical call is answered \"already happened\"", demoGuardRun},
	{"an agent run: a scripted model writes NOTES.md through run_command, the worker crashes after the effect, the run waits, the probe proves the write, and the model is told so and finishes without writing again", demoAgentRun},
	{"eval: the built-in supervisor scored on the committed drill fixtures", demoEval},
}

// demoOut is where the demo prints (tests capture it).
var demoOut io.Writer = os.Stdout

// demoFault is the in-process fault the demo runs with: the first
// run_command of every run commits its effect, then its worker "crashes".
var demoFault = fault.Config{AfterEffect: kernel.ToolRunCommand}

func runDemo(ctx context.Context, args []string) error {
	s, err := prologue(flag.NewFlagSet("demo", flag.ContinueOnError), args)
	if err != nil {
		return err
	}
	cfg := s.cfg
	// A free port: a running `reckon dev` keeps its own. The demo talks to
	// its own API with a token it generates, whatever RECKON_TOKENS says.
	cfg.HTTPAddr = "127.0.0.1:0"
	cfg.Tokens, cfg.TokensFile = "", ""
	// Plain HTTP on loopback whatever RECKON_TLS_* say: the demo's client
	// is its own, and the certificate may be for another host.
	cfg.TLSCertFile, cfg.TLSKeyFile = "", ""
	if os.Getenv("RECKON_LOG_LEVEL") == "" {
		// The demo's own output is the point; failures come back as errors.
		cfg.LogLevel = "disabled"
	}
	if !cfg.SandboxUnconfined {
		if err := sandbox.Available(""); err != nil {
			return fmt.Errorf("%v\n(install bubblewrap, e.g. `make deps`, or run with RECKON_SANDBOX_UNCONFINED=1)", err)
		}
	}
	model := demoScriptedModel()
	defer model.Close()
	cfg.AgentBaseURL, cfg.AgentModel, cfg.AgentAPIKey = model.URL, demoModelName, ""
	f := demoFault
	stack, err := app.StartDev(ctx, cfg, app.DevConfig{
		Outbox: outbox.Config{PollInterval: 20 * time.Millisecond},
		// In memory: a `reckon dev` may hold the SQLite file of the data dir.
		Kernel: app.KernelConfig{InMemory: true, Fault: &f},
	})
	if err != nil {
		return err
	}
	defer stack.Close()
	if err := demoResumer(stack); err != nil {
		return err
	}
	d := &demoEnv{Stack: stack, Out: demoOut, Project: "demo", Model: model}
	fmt.Fprintf(d.Out, "reckon demo: dev stack up (API %s, embedded Temporal %s, data dir %s)\n",
		stack.APIURL(), stack.Kernel.Conn.Embedded.HostPort(), cfg.DataDir)

	for i, step := range demoSteps {
		fmt.Fprintf(d.Out, "\n== %d. %s\n", i+1, step.name)
		if err := step.run(ctx, d); err != nil {
			return fmt.Errorf("demo step %q: %w", step.name, err)
		}
	}
	fmt.Fprintln(d.Out, "\nreckon demo: done")
	return nil
}

// demoDrillRun is the kernel's live drill: proof.txt is written for real,
// the worker reports a crash, the journal says uncertain, and the plan's
// re-issue runs as a new operation that names the first.
func demoDrillRun(ctx context.Context, d *demoEnv) error {
	step1 := demoWriteStep("proof.txt", "hello from reckon\n")
	step1.OnUncertain = runner.OnUncertainReissue
	step2 := runner.Step{Tool: kernel.ToolRunCommand, Args: mustJSON(map[string]any{"command": "wc -c proof.txt", "timeout_s": 30})}
	view, runErr, err := demoRun(ctx, d, "drill-", []runner.Step{step1, step2})
	if err != nil {
		return err
	}
	id, k := view.RunID, d.Stack.Kernel
	wctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()

	ws, err := k.Starter.Workspace(d.Project, id)
	if err != nil {
		return err
	}
	if b, err := os.ReadFile(ws + "/proof.txt"); err == nil {
		fmt.Fprintf(d.Out, "workspace %s/proof.txt: %q\n", ws, string(b))
	}
	recs, err := fault.Records(wctx, d.Stack.Pool, d.Project, id)
	if err != nil {
		return err
	}
	for _, r := range recs {
		fmt.Fprintf(d.Out, "ground truth (kernel_fault_records, never shown to the supervisor): %s %s %s → truth %s\n", r.OperationID, r.Tool, r.Fault, r.Truth)
	}
	if runErr != nil || view.Status != runner.StatusCompleted {
		return fmt.Errorf("run %s did not complete: %v", id, runErr)
	}
	return nil
}

// demoRun starts a run of steps under a fresh id with the given prefix,
// waits for it to end and for its events to reach the journal, and prints
// its journal. runErr is the workflow's own outcome.
func demoRun(ctx context.Context, d *demoEnv, prefix string, steps []runner.Step) (view runner.RunView, runErr, err error) {
	id, err := demoStart(ctx, d, prefix, steps)
	if err != nil {
		return view, nil, err
	}
	return demoFinish(ctx, d, id)
}

// demoStart starts a run of steps under a fresh id with the given prefix.
func demoStart(ctx context.Context, d *demoEnv, prefix string, steps []runner.Step) (string, error) {
	runID := prefix + time.Now().UTC().Format("20060102-150405")
	id, _, err := d.Stack.Kernel.Starter.Start(ctx, runner.StartParams{Project: d.Project, RunID: runID, Plan: runner.Plan{Steps: steps}})
	if err != nil {
		return "", err
	}
	d.Runs = append(d.Runs, id)
	fmt.Fprintf(d.Out, "started run %s/%s with KERNEL_FAULT_AFTER_EFFECT=%s (set in-process)\n", d.Project, id, demoFault.AfterEffect)
	return id, nil
}

// demoFinish waits for run id to end and for its events to reach the
// journal, and prints its journal.
func demoFinish(ctx context.Context, d *demoEnv, id string) (view runner.RunView, runErr, err error) {
	k := d.Stack.Kernel
	wctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	runErr = k.Conn.Client.GetWorkflow(wctx, kernel.WorkflowID(d.Project, id), "").Get(wctx, nil)
	if err := outbox.WaitDelivered(wctx, d.Stack.Pool, d.Project, id, 20*time.Millisecond); err != nil {
		return view, runErr, err
	}
	view, err = k.Starter.View(wctx, d.Project, id, runner.EventPage{Limit: runner.MaxEventLimit})
	if err != nil {
		return view, runErr, err
	}
	fmt.Fprintf(d.Out, "run %s is %s; its journal:\n", id, view.Status)
	printRunEvents(d.Out, view.Events)
	return view, runErr, nil
}

// printRunEvents prints one line per event: time, type, operation and the
// fields that matter for reconciliation.
func printRunEvents(w io.Writer, evs []kernel.Event) {
	for _, ev := range evs {
		var m map[string]any
		_ = json.Unmarshal(ev.Data, &m)
		var parts []string
		for _, k := range []string{"operation_id", "tool", "reissue_of", "error_type", "effect", "basis", "reconciliation", "error", "result_summary", "child_run_id", "plan_summary", "turn", "final_answer", "answer_author"} {
			if v, ok := m[k]; ok && v != "" {
				s := fmt.Sprint(v)
				if key, ok := v.(map[string]any); ok {
					// An event key ({source_id, event_id}), as the CLI prints keys.
					s = fmt.Sprintf("%v:%v", key["source_id"], key["event_id"])
				}
				if len(s) > 90 {
					s = s[:90] + "…"
				}
				parts = append(parts, k+"="+s)
			}
		}
		fmt.Fprintf(w, "  %s  %-15s %s\n", ev.TS.Format("15:04:05.000"), ev.Type, strings.Join(parts, " "))
	}
}

// demoWriteStep is a run_command step that writes content (no quotes or
// percent signs) to path and declares the file's sha256 as its
// postcondition, so the workspace probe can prove the effect.
func demoWriteStep(path, content string) runner.Step {
	sum := sha256.Sum256([]byte(content))
	return runner.Step{
		Tool:          kernel.ToolRunCommand,
		Args:          mustJSON(map[string]any{"command": "printf '" + strings.ReplaceAll(content, "\n", `\n`) + "' > " + path, "timeout_s": 30}),
		Postcondition: mustJSON(map[string]any{"path": path, "sha256": hex.EncodeToString(sum[:])}),
	}
}

func mustJSON(v any) json.RawMessage {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return b
}
