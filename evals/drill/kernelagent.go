package drill

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/seed-7bc021c3/reckon/evals"
	"github.com/seed-7bc021c3/reckon/internal/fakeopenai"
	"github.com/seed-7bc021c3/reckon/kernel"
	"github.com/seed-7bc021c3/reckon/kernel/operations"
	"github.com/seed-7bc021c3/reckon/kernel/outbox"
	"github.com/seed-7bc021c3/reckon/kernel/plan"
	"github.com/seed-7bc021c3/reckon/kernel/runner"
	"github.com/seed-7bc021c3/reckon/pipeline/supervisor"
	"github.com/seed-7bc021c3/reckon/tool/mcptool"
)

// Kernel agent run kinds: reckon's kernel runs an agent (docs/agents.md)
// whose model is the scripted one (internal/fakeopenai), and the fault
// injector fires on the model's call, named by its operation id
// op-<n>-<call id>. Unlike agent_run, where an external agent reports
// its own run, every event here is the kernel's.
const (
	// KindKernelAgentCmd: the model's run_command appends a line to a
	// file, fault after or before the effect; on_uncertain stop ends the
	// run at the uncertain call.
	KindKernelAgentCmd = "kernel_agent_cmd"
	// KindKernelAgentMCP: the model's create_issue on the test MCP
	// server, fault after or before the effect; on_uncertain stop.
	KindKernelAgentMCP = "kernel_agent_mcp"
	// KindKernelAgentResumed: either call, on_uncertain await: the run
	// waits, the wall is recorded, the built-in supervisor's verdict (an
	// operator's ruling where it has none) settles the call, and the run
	// resumes; the drill checks that the model's next request carries the
	// settlement and that the effect landed exactly once.
	KindKernelAgentResumed = "kernel_agent_resumed"
)

// KernelAgent is the agent run of a kernel_agent_* drill.
type KernelAgent struct {
	Agent plan.Agent
	// Script is what the scripted model answers, in order, up to and
	// including the turn that makes the faulted call.
	Script []fakeopenai.AgentStep
	// Target is the faulted call's operation id, CallID its call id and
	// RetryCallID the id the model calls it again with when a resumed
	// run is told it did not happen.
	Target, CallID, RetryCallID string
	// File and Line, for a run_command target, are the file it appends
	// Line to; Title, for a create_issue target, the issue's title (made
	// unique by a number). They are how the drill observes the effect.
	File, Line, Title string
	// Resume says the run awaits the call's settlement (on_uncertain
	// await) instead of stopping.
	Resume bool
}

// issueTool is the test MCP server's create_issue, as the drill stack
// names it.
const issueTool = "mcp__create_issue"

// kernelAgent generates a kernel_agent_* scenario: zero or one completed
// setup call, then the faulted one.
func (g gen) kernelAgent(kind string) Scenario {
	var s Scenario
	ka := &KernelAgent{Resume: kind == KindKernelAgentResumed}
	mcp := kind == KindKernelAgentMCP || (ka.Resume && g.r.IntN(2) == 0)
	for i := g.r.IntN(2); i > 0; i-- {
		ka.Script = append(ka.Script, agentCall(g.callID(), kernel.ToolRunCommand, map[string]any{"command": "echo preparing", "timeout_s": 30}))
	}
	ka.CallID, ka.RetryCallID = g.callID(), g.callID()
	var what string
	if mcp {
		ka.Title = fmt.Sprintf("%s (#%04d)", g.pick(topics), g.r.IntN(10000))
		ka.Script = append(ka.Script, agentCall(ka.CallID, issueTool, ka.targetArgs(g.text())))
		what = fmt.Sprintf("create_issue %q", ka.Title)
	} else {
		ka.File, ka.Line = g.fileName("txt"), g.text()
		ka.Script = append(ka.Script, agentCall(ka.CallID, kernel.ToolRunCommand, ka.targetArgs("")))
		what = "run_command appending a line to " + ka.File
	}
	ka.Target = plan.AgentOperationID(len(ka.Script), ka.CallID)
	ka.Agent = plan.Agent{Instructions: "You are a careful operator.", Input: "Do the task once: " + what + ".",
		Tools: []string{kernel.ToolRunCommand, issueTool}, MaxTurns: 6, OnUncertain: plan.OnUncertainStop}
	after := g.r.IntN(2) == 0
	when := s.faultAt(ka.Target, after)
	s.KernelAgent = ka
	s.Notes = fmt.Sprintf("a kernel agent run driven by the scripted model: its %s is operation %s (call id %s), fault %s the effect", what, ka.Target, ka.CallID, when)
	if ka.Resume {
		ka.Agent.OnUncertain = plan.OnUncertainAwait
		s.Notes += "; on_uncertain await: the run waits for the call's settlement"
	} else {
		s.Notes += "; on_uncertain stop: the run ends at the uncertain call"
	}
	return s
}

// callID is a call id as a model makes one.
func (g gen) callID() string { return fmt.Sprintf("call_%08x", g.r.Uint32()) }

// targetArgs are the arguments of the target call; body is the issue's.
func (ka *KernelAgent) targetArgs(body string) map[string]any {
	if ka.Title != "" {
		return map[string]any{"title": ka.Title, "body": body}
	}
	return map[string]any{"command": "printf '%s\\n' " + shellQuote(ka.Line) + " >> " + ka.File, "timeout_s": 30}
}

// agentCall is a scripted answer asking for one tool call.
func agentCall(id, tool string, args map[string]any) fakeopenai.AgentStep {
	raw, _ := json.Marshal(args)
	return fakeopenai.AgentStep{ToolCalls: []fakeopenai.AgentToolCall{{ID: id, Name: tool, Arguments: raw}}}
}

// agentRunner is a kernel agent drill under way: its scenario, run and
// scripted model name.
type agentRunner struct {
	st      *Stack
	sc      Scenario
	ka      *KernelAgent
	project string
	model   string
	starter *runner.Starter
	ws      string
}

// kernelAgentDrill runs sc's kernel agent run on a worker of its own,
// whose model turns the stack's scripted model answers, and records its
// wall. The truth is the fault injector's record, checked against the
// effect itself (the file's lines, the issue in the server's store) once
// the call ended; the model's words are never read for it. A resumed run
// is then settled by the verdict and followed to its end (resumeByVerdict).
func (st *Stack) kernelAgentDrill(ctx context.Context, sc Scenario, o Params) ([]*evals.Fixture, error) {
	ka := sc.KernelAgent
	acts, starter := st.runWorker(sc)
	a := &agentRunner{st: st, sc: sc, ka: ka, project: o.Project, model: "scripted-" + sc.RunID, starter: starter}
	acts.Model = &runner.AgentModel{BaseURL: st.model.URL, APIKey: "drill"}
	starter.AgentModel = a.model
	st.model.Script(a.model, ka.Script...)
	w := runner.NewWorker(st.Temporal.Client, starter.TaskQueue, acts)
	if err := w.Start(); err != nil {
		return nil, fmt.Errorf("start worker: %w", err)
	}
	defer w.Stop()
	if ka.Resume {
		rctx, cancel := context.WithCancel(ctx)
		defer cancel()
		r := &runner.Resumer{Pool: st.Core.Pool, Client: st.Temporal.Client, Scan: 100 * time.Millisecond, Log: st.Core.Log}
		done := make(chan struct{})
		go func() { defer close(done); _ = r.Run(rctx) }()
		defer func() { cancel(); <-done }()
	}
	var err error
	if a.ws, err = starter.Workspace(o.Project, sc.RunID); err != nil {
		return nil, err
	}
	agent := ka.Agent
	if _, _, err := starter.Start(ctx, runner.StartParams{Project: o.Project, RunID: sc.RunID, Agent: &agent}); err != nil {
		return nil, fmt.Errorf("start agent run: %w", err)
	}
	if ka.Resume {
		err = a.awaiting(ctx)
	} else {
		_, err = a.ended(ctx)
	}
	if err != nil {
		return nil, err
	}
	truth, seen, err := a.observe(ctx)
	if err != nil {
		return nil, err
	}
	f, err := st.record(ctx, o, sc, sc.RunID, sc.Kind)
	if err != nil {
		return nil, err
	}
	f.Notes += " The truth, " + truth + ", is the effect itself: " + seen + "."
	if ka.Resume {
		note, err := a.resumeByVerdict(ctx, f, truth)
		if err != nil {
			return nil, err
		}
		f.Notes += " " + note
	}
	return []*evals.Fixture{f}, f.Validate()
}

// ended waits until the run ended and its events are journaled, and
// returns its status.
func (a *agentRunner) ended(ctx context.Context) (string, error) {
	err := a.st.Temporal.Client.GetWorkflow(ctx, kernel.WorkflowID(a.project, a.sc.RunID), "").Get(ctx, nil)
	if err != nil && ctx.Err() != nil {
		return "", fmt.Errorf("run %s did not end: %w", a.sc.RunID, ctx.Err())
	}
	if err := outbox.WaitDelivered(ctx, a.st.Core.Pool, a.project, a.sc.RunID, 20*time.Millisecond); err != nil {
		return "", fmt.Errorf("outbox of %s: %w", a.sc.RunID, err)
	}
	v, err := a.starter.View(ctx, a.project, a.sc.RunID, runner.EventPage{Limit: 1})
	return v.Status, err
}

// awaiting waits until the run awaits the target call's settlement and
// its events are journaled.
func (a *agentRunner) awaiting(ctx context.Context) error {
	err := poll(ctx, func() (bool, error) {
		v, err := a.starter.View(ctx, a.project, a.sc.RunID, runner.EventPage{Limit: 1})
		if err != nil {
			return false, err
		}
		if v.Status == runner.StatusCompleted || v.Status == runner.StatusFailed {
			return false, fmt.Errorf("run %s %s instead of awaiting %s", a.sc.RunID, v.Status, a.ka.Target)
		}
		return v.Status == runner.StatusAwaiting && v.Awaiting != nil && v.Awaiting.OperationID == a.ka.Target, nil
	})
	if err != nil {
		return fmt.Errorf("run %s awaiting %s: %w", a.sc.RunID, a.ka.Target, err)
	}
	return outbox.WaitDelivered(ctx, a.st.Core.Pool, a.project, a.sc.RunID, 20*time.Millisecond)
}

// effects counts the target's effects downstream: lines of File that are
// Line, or issues of the test MCP server titled Title.
func (a *agentRunner) effects() (int, error) {
	n := 0
	if a.ka.Title != "" {
		issues, err := a.st.issueStore.Issues()
		if err != nil {
			return 0, fmt.Errorf("run %s: read the issues: %w", a.sc.RunID, err)
		}
		for _, is := range issues {
			if is.Title == a.ka.Title {
				n++
			}
		}
		return n, nil
	}
	b, err := os.ReadFile(filepath.Join(a.ws, a.ka.File))
	if err != nil && !os.IsNotExist(err) {
		return 0, fmt.Errorf("run %s: read %s: %w", a.sc.RunID, a.ka.File, err)
	}
	for _, l := range strings.Split(string(b), "\n") {
		if l == a.ka.Line {
			n++
		}
	}
	return n, nil
}

// observe reads the target's effect now that its call ended, and checks
// it against the fault injector's record: the truth and what was seen.
func (a *agentRunner) observe(ctx context.Context) (truth, seen string, err error) {
	n, err := a.effects()
	if err != nil {
		return "", "", err
	}
	truth, seen = kernel.EffectNone, "no such file line"
	if a.ka.Title != "" {
		seen = fmt.Sprintf("no issue titled %q in the server's store", a.ka.Title)
		if _, _, found, err := a.st.issueStore.Lookup(mcptool.IdempotencyKey(a.project, a.sc.RunID, a.ka.Target)); err != nil {
			return "", "", err
		} else if found {
			seen = fmt.Sprintf("the server's store holds the issue under %s's idempotency key", a.ka.Target)
		}
	} else {
		seen = a.ka.File + " holds no such line in the workspace"
	}
	if n > 0 {
		truth = kernel.EffectOccurred
		if a.ka.Title == "" {
			seen = fmt.Sprintf("%s holds the line %d time(s) in the workspace", a.ka.File, n)
		}
	}
	recs, err := a.st.faultTruths(ctx, a.project, a.sc.RunID)
	if err != nil {
		return "", "", err
	}
	if rec := recs[a.ka.Target]; rec != truth || n > 1 {
		return "", "", fmt.Errorf("run %s: %s: the fault injector recorded %q, but downstream %s", a.sc.RunID, a.ka.Target, rec, seen)
	}
	return truth, seen, nil
}

// resumeByVerdict settles the awaited call as the pipeline would: with the
// built-in supervisor's verdict on the recorded wall, or, where it decides
// nothing, an operator's ruling from the observed truth. It scripts the
// model's next answers (a call that did not happen is asked for again
// under RetryCallID), follows the run to its end and checks that the
// model's next request carried the settlement and that the effect landed
// exactly once; it says what happened, for the fixture's notes.
func (a *agentRunner) resumeByVerdict(ctx context.Context, f *evals.Fixture, truth string) (string, error) {
	d, err := supervisor.Builtin{}.Decide(ctx, f.Wall)
	if err != nil {
		return "", err
	}
	p := operations.ReconcileParams{Project: a.project, RunID: a.sc.RunID, OperationID: a.ka.Target, Effect: truth,
		Note: "drill operator: checked the downstream state", Basis: kernel.BasisOperator, Actor: "operator:drill"}
	by := "an operator's ruling (the built-in supervisor answered unknown)"
	for _, v := range d.Operations {
		if v.OperationID == a.ka.Target && v.Effect != kernel.EffectUnknown {
			if v.Effect != truth {
				return "", fmt.Errorf("run %s: the built-in supervisor decided %s %s, truth %s", a.sc.RunID, a.ka.Target, v.Effect, truth)
			}
			p.Note, p.Basis, p.Actor = v.Note, v.Basis, kernel.ActorSupervisor
			by = "the built-in supervisor's verdict (basis " + v.Basis + ")"
		}
	}
	final := "The task is done; the call was verified, so I did not repeat it."
	if truth == kernel.EffectNone {
		// The model is told the call did not happen: it calls it again.
		again := a.ka.Script[len(a.ka.Script)-1]
		again.ToolCalls = []fakeopenai.AgentToolCall{again.ToolCalls[0]}
		again.ToolCalls[0].ID = a.ka.RetryCallID
		a.st.model.Script(a.model, again)
		final = "The call had not happened, so I made it again; it is done now."
	}
	a.st.model.Script(a.model, fakeopenai.AgentStep{Content: final})
	asked := len(a.st.model.Requests(a.model))
	if _, err := a.st.Ops.Reconcile(ctx, p); err != nil {
		return "", fmt.Errorf("settle %s/%s: %w", a.sc.RunID, a.ka.Target, err)
	}
	status, err := a.ended(ctx)
	if err != nil {
		return "", err
	}
	if status != runner.StatusCompleted {
		return "", fmt.Errorf("run %s is %s after its settlement, want completed", a.sc.RunID, status)
	}
	told, err := a.toldAfter(asked)
	if err != nil {
		return "", err
	}
	n, err := a.effects()
	if err != nil {
		return "", err
	}
	if n != 1 {
		return "", fmt.Errorf("run %s: the effect of %s landed %d times after the run resumed, want exactly once", a.sc.RunID, a.ka.Target, n)
	}
	return fmt.Sprintf("After the wall was recorded, %s settled %s %s; the run resumed, the model's next request carried %q, and the effect landed exactly once (checked downstream after the run completed).",
		by, a.ka.Target, truth, kernel.Abbreviate(told, 300)), nil
}

// toldAfter is what the model's first request after the first asked ones
// said of the target call; it must carry the settlement.
func (a *agentRunner) toldAfter(asked int) (string, error) {
	reqs := a.st.model.Requests(a.model)
	if len(reqs) <= asked {
		return "", fmt.Errorf("run %s: the model was not asked again after the settlement", a.sc.RunID)
	}
	var req struct {
		Messages []struct {
			Role       string `json:"role"`
			Content    string `json:"content"`
			ToolCallID string `json:"tool_call_id"`
		} `json:"messages"`
	}
	if err := json.Unmarshal(reqs[asked], &req); err != nil {
		return "", fmt.Errorf("run %s: the model's request: %w", a.sc.RunID, err)
	}
	for _, m := range req.Messages {
		if m.Role == "tool" && m.ToolCallID == a.ka.CallID {
			if !strings.Contains(m.Content, a.ka.Target) || !strings.Contains(m.Content, "settled") && !strings.Contains(m.Content, "verified") {
				return "", fmt.Errorf("run %s: the model was told %q of %s: no settlement", a.sc.RunID, m.Content, a.ka.Target)
			}
			return m.Content, nil
		}
	}
	return "", fmt.Errorf("run %s: the model's next request carries no result of call %s", a.sc.RunID, a.ka.CallID)
}
