package runner

import (
	"bytes"
	"encoding/json"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/seed-7bc021c3/reckon/kernel"
	"github.com/seed-7bc021c3/reckon/kernel/plan"
)

// Registered names of the agent workflow and its model-turn activity.
const (
	AgentWorkflowName = "kernel.agent"
	ActModelTurn      = "kernel.model_turn"
)

// Bounds of what agent runs record and give back.
const (
	// MaxAnswerBytes bounds run.completed.final_answer.
	MaxAnswerBytes = 8000
	// maxTurnText bounds each text agent.turn records.
	maxTurnText = 2000
)

// Agent is the input of an agent run (plan.Agent).
type Agent = plan.Agent

// AgentInput is the input of the agent workflow.
type AgentInput struct {
	Project     string `json:"project"`
	RunID       string `json:"run_id"`
	Workspace   string `json:"workspace"`
	ParentRunID string `json:"parent_run_id,omitempty"`
	Agent       Agent  `json:"agent"`
	// Model is the model name every turn asks for: the agent's own, or
	// RECKON_AGENT_MODEL of the starter.
	Model    string   `json:"model"`
	Timeouts Timeouts `json:"timeouts,omitempty"`
	// Depth is how deep in delegations the run is (0: started by a
	// caller); at plan.MaxDepth delegate is no longer offered.
	Depth          int      `json:"depth,omitempty"`
	WorkspaceTools []string `json:"workspace_tools"`
}

// AgentOutput is the result of a completed agent run.
type AgentOutput struct {
	Operations  int    `json:"operations"`
	FinalAnswer string `json:"final_answer"`
}

// agentRun is one agent run's workflow state.
type agentRun struct {
	*run
	in   AgentInput
	msgs []ChatMessage
	// sent is how many messages of msgs earlier turns sent.
	sent int
	// calls maps each call id the model used to its operation id ("" for
	// a call that was refused): a repeated id is the same call.
	calls map[string]string
	ops   int
	// delegates counts the delegate calls admitted (MaxAgentDelegates).
	delegates int
}

// AgentWorkflow runs a model-driven agent: each model turn is an activity
// (retried: it has no side effect beyond cost) recorded as agent.turn;
// each tool call it asks for goes the way a plan step does (tool.started,
// one attempt, tool.completed or tool.failed) as operation
// op-<n>-<call id>. An uncertain call pauses the run until a probe or an
// operator settles it (on_uncertain await, the default) and the model is
// told what the settlement implies; it is never handed back as a plain
// error. The final answer goes into run.completed, marked agent-authored.
func AgentWorkflow(ctx workflow.Context, in AgentInput) (AgentOutput, error) {
	a := &agentRun{
		run: &run{in: RunInput{Project: in.Project, RunID: in.RunID, Workspace: in.Workspace, ParentRunID: in.ParentRunID,
			Timeouts: in.Timeouts, WorkspaceTools: in.WorkspaceTools},
			t: in.Timeouts.withDefaults(), idPrefix: kernel.EventID(in.Project, in.RunID, ""),
			localRecord: true, manifests: true, recordServer: true},
		in: in, calls: map[string]string{},
	}
	a.run.agent = a
	if err := a.record(ctx, kernel.TypeRunStarted, "run/started", kernel.RunStarted{
		PlanSummary: in.Agent.Summary(), ParentRunID: in.ParentRunID, Workspace: in.Workspace,
	}); err != nil {
		return AgentOutput{}, err
	}
	if s := strings.TrimSpace(in.Agent.Instructions); s != "" {
		a.msgs = append(a.msgs, ChatMessage{Role: roleSystem, Content: in.Agent.Instructions})
	}
	a.msgs = append(a.msgs, ChatMessage{Role: roleUser, Content: in.Agent.Input})
	for turn := 1; turn <= in.Agent.Turns(); turn++ {
		answer, done, err := a.turn(ctx, turn)
		if err != nil {
			return AgentOutput{}, err
		}
		if done {
			return a.complete(ctx, answer)
		}
	}
	return AgentOutput{}, a.fail(ctx, fmt.Sprintf("the agent did not finish within %d model turns (agent.max_turns)", in.Agent.Turns()))
}

// turn runs model turn n and the tool calls it asks for; done says the
// model answered without a tool call (answer is its final answer).
func (a *agentRun) turn(ctx workflow.Context, n int) (answer string, done bool, err error) {
	out, err := a.modelTurn(ctx, n)
	if err != nil {
		return "", false, a.fail(ctx, fmt.Sprintf("model turn %d failed: %s", n, causeMessage(err)))
	}
	a.msgs = append(a.msgs, ChatMessage{Role: roleAssistant, Content: out.Content, ToolCalls: out.Calls})
	opIDs, refused := a.admit(out)
	d, err := a.turnData(n, out, opIDs, refused)
	if err != nil {
		return "", false, temporal.NewNonRetryableApplicationError(err.Error(), "invalid_event", nil)
	}
	if err := a.record(ctx, kernel.TypeAgentTurn, fmt.Sprintf("turn/%d", n), d); err != nil {
		return "", false, err
	}
	a.sent = len(a.msgs) - 1
	if len(out.Calls) == 0 {
		return out.Content, true, nil
	}
	for i, c := range out.Calls {
		text := refused[i]
		if text == "" {
			var stop string
			if text, stop, err = a.call(ctx, c, opIDs[i]); err != nil {
				return "", false, err
			}
			if stop != "" {
				return "", false, a.fail(ctx, stop)
			}
		}
		a.msgs = append(a.msgs, ChatMessage{Role: roleTool, ToolCallID: c.ID, Content: text})
	}
	return "", false, nil
}

// admit gives each call of the answer its operation id, or the reason it
// does not start: its tool or arguments were refused (out.Invalid), too
// many calls, or its call id was used before in this run, which makes it
// the same call, never executed twice.
func (a *agentRun) admit(out TurnOutput) (opIDs, refused []string) {
	opIDs, refused = make([]string, len(out.Calls)), make([]string, len(out.Calls))
	for i, c := range out.Calls {
		if op, seen := a.calls[c.ID]; seen {
			refused[i] = repeatedCall(c.ID, op)
			continue
		}
		switch {
		case i < len(out.Invalid) && out.Invalid[i] != "":
			refused[i] = out.Invalid[i]
		case i >= plan.MaxCallsPerTurn:
			refused[i] = fmt.Sprintf("at most %d tool calls per answer; this one was not run: ask for it again", plan.MaxCallsPerTurn)
		case c.Name == kernel.DelegateTool && a.delegates >= plan.MaxAgentDelegates:
			refused[i] = fmt.Sprintf("at most %d delegate calls per agent run; this one was not run: do the work with the other tools", plan.MaxAgentDelegates)
		default:
			if c.Name == kernel.DelegateTool {
				a.delegates++
			}
			a.ops++
			opIDs[i] = plan.AgentOperationID(a.ops, c.ID)
		}
		a.calls[c.ID] = opIDs[i]
	}
	return opIDs, refused
}

// repeatedCall is the tool result of a call id the run has seen.
func repeatedCall(id, op string) string {
	if op == "" {
		return fmt.Sprintf("call id %q was used before in this run, for a call that was refused; it is not run. Use a new call id.", id)
	}
	return fmt.Sprintf("call id %q is the call already made as operation %s; it is not executed again. Its result was given with that call; do not repeat it.", id, op)
}

// call runs one admitted tool call as operation opID and says what the
// model is told; stop, when set, ends the run with that error (an
// uncertain call the run does not wait for, or whose wait ended without
// a settlement to go on with).
func (a *agentRun) call(ctx workflow.Context, c ModelCall, opID string) (text, stop string, err error) {
	s := Step{Tool: c.Name, Args: []byte(c.Arguments), OnUncertain: a.in.Agent.Uncertain()}
	res, err := a.step(ctx, s, opID, "")
	if err != nil {
		return "", "", err
	}
	if ctx.Err() != nil {
		return "", fmt.Sprintf("run canceled during operation %s (%s)", opID, c.Name), nil
	}
	switch {
	case res.OK:
		return res.Summary, "", nil
	case res.Effect != kernel.EffectUncertain:
		return fmt.Sprintf("the call failed (%s, effect %s: %s): %s", res.ErrorType, res.Effect, effectMeaning(res.Effect), res.Error), "", nil
	case !a.awaits(ctx, s, res):
		return "", fmt.Sprintf("operation %s (%s) failed uncertain: %s: %s (agent.on_uncertain: %s)", opID, c.Name, res.ErrorType, res.Error, s.OnUncertain), nil
	}
	end, err := a.await(ctx, opID)
	if err != nil {
		return "", "", err
	}
	st := end.settlement
	switch {
	case !end.timedOut && !st.Found:
		return "", fmt.Sprintf("run canceled while waiting for the settlement of operation %s (%s)", opID, c.Name), nil
	case st.Effect == kernel.EffectOccurred:
		return settledOccurred(opID, st), "", nil
	case st.Effect == kernel.EffectNone:
		return fmt.Sprintf("The call did not happen: operation %s was settled none by %s (%s, %s)%s. You may call it again if it is still needed.",
			opID, st.Basis, st.Actor, st.Key, noteOf(st)), "", nil
	}
	return "", awaitFailure(s, opID, end, a.t.Await), nil
}

// settledOccurred is the model's tool result for a call a probe or an
// operator settled occurred.
func settledOccurred(opID string, st Settlement) string {
	ev := ""
	if len(st.Evidence) > 0 {
		ev = " Evidence: " + kernel.Abbreviate(string(st.Evidence), 1000)
	}
	return fmt.Sprintf("The call happened: its outcome was unknown when it ended (uncertain), and operation %s has since been verified occurred by %s (%s, %s)%s.%s Do not repeat it.",
		opID, st.Basis, st.Actor, st.Key, noteOf(st), ev)
}

func noteOf(st Settlement) string {
	if st.Note == "" {
		return ""
	}
	return ": " + kernel.Abbreviate(st.Note, 500)
}

// effectMeaning says what a failed call's effect means for the model.
func effectMeaning(effect string) string {
	if effect == kernel.EffectOccurred {
		return "its effect happened before it failed; do not repeat it blindly"
	}
	return "nothing happened"
}

// modelTurn runs the ModelTurn activity for turn n.
func (a *agentRun) modelTurn(ctx workflow.Context, n int) (TurnOutput, error) {
	actx := workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		StartToCloseTimeout: 5 * time.Minute,
		HeartbeatTimeout:    a.t.ToolHeartbeat,
		RetryPolicy: &temporal.RetryPolicy{
			InitialInterval: time.Second, BackoffCoefficient: 2, MaximumInterval: time.Minute, MaximumAttempts: 8,
			NonRetryableErrorTypes: []string{errTypeModel},
		},
	})
	var out TurnOutput
	err := workflow.ExecuteActivity(actx, ActModelTurn, TurnInput{
		Project: a.in.Project, RunID: a.in.RunID, Turn: n, Model: a.in.Model, Workspace: a.in.Workspace,
		Tools: a.offered(), Messages: a.msgs,
	}).Get(ctx, &out)
	return out, err
}

// offered are the tools the model is offered: the agent's, without
// delegate at the deepest delegation.
func (a *agentRun) offered() []string {
	if a.in.Depth < plan.MaxDepth {
		return a.in.Agent.Tools
	}
	return slices.DeleteFunc(slices.Clone(a.in.Agent.Tools), func(t string) bool { return t == kernel.DelegateTool })
}

// turnData is agent.turn's data: what this turn sent that no earlier one
// did, and the answer, bounded.
func (a *agentRun) turnData(n int, out TurnOutput, opIDs, refused []string) (kernel.AgentTurn, error) {
	var sent []kernel.AgentMessage
	for _, m := range a.msgs[a.sent : len(a.msgs)-1] {
		sent = append(sent, kernel.AgentMessage{Role: m.Role, Content: bound(m.Content), ToolCallID: m.ToolCallID})
	}
	answer := kernel.AgentAnswer{Content: bound(out.Content)}
	var refusals []kernel.AgentRefusal
	for i, c := range out.Calls {
		answer.ToolCalls = append(answer.ToolCalls, kernel.AgentToolCall{
			ID: c.ID, Name: c.Name, Arguments: bound(c.Arguments), OperationID: opIDs[i],
		})
		if refused[i] != "" {
			refusals = append(refusals, kernel.AgentRefusal{ID: c.ID, Reason: bound(refused[i])})
		}
	}
	return kernel.NewAgentTurn(n, out.Model, sent, answer, refusals)
}

func bound(s string) string { return kernel.Abbreviate(kernel.Storable(s), maxTurnText) }

// complete records run.completed with the final answer, agent-authored.
func (a *agentRun) complete(ctx workflow.Context, answer string) (AgentOutput, error) {
	s := kernel.Storable(answer)
	d := kernel.RunCompleted{FinalAnswer: kernel.Abbreviate(s, MaxAnswerBytes), AnswerAuthor: kernel.ActorAgent}
	d.AnswerTruncated = d.FinalAnswer != s
	if err := a.record(ctx, kernel.TypeRunCompleted, "run/completed", d); err != nil {
		return AgentOutput{}, err
	}
	return AgentOutput{Operations: a.ops, FinalAnswer: d.FinalAnswer}, nil
}

// fail records run.failed and returns the workflow's error.
func (a *agentRun) fail(ctx workflow.Context, msg string) error {
	if err := a.record(ctx, kernel.TypeRunFailed, "run/failed", kernel.RunFailed{Error: msg}); err != nil {
		return err
	}
	if ctx.Err() != nil {
		return temporal.NewCanceledError(msg)
	}
	return temporal.NewNonRetryableApplicationError(msg, errTypeRunFailed, nil)
}

// delegate runs an agent's delegate call as a child agent run with its
// own instructions and input, the parent's tools, model and bounds.
func (a *agentRun) delegate(ctx workflow.Context, s Step, opID string) stepResult {
	var args DelegateArgs
	if err := decodeStrict(s.Args, &args); err != nil {
		// judged by ModelTurn already; a history from another worker
		// version could still carry one.
		return stepResult{ToolOutcome: ToolOutcome{ErrorType: kernel.ErrorTypeValidation, Effect: kernel.EffectNone, Error: "args: " + err.Error()}}
	}
	childRun := kernel.ChildRunID(a.in.RunID, opID)
	child := a.in.Agent
	child.Instructions, child.Input = args.Instructions, args.Input
	in := AgentInput{
		Project: a.in.Project, RunID: childRun, Workspace: filepath.Join(filepath.Dir(a.in.Workspace), childRun),
		ParentRunID: a.in.RunID, Agent: child, Model: a.in.Model, Timeouts: a.in.Timeouts,
		Depth: a.in.Depth + 1, WorkspaceTools: a.in.WorkspaceTools,
	}
	var out AgentOutput
	res := a.child(ctx, childRun, AgentWorkflowName, in, &out)
	if res.OK {
		res.Summary = kernel.Abbreviate(fmt.Sprintf("child run %s completed (%d operations); its final answer (the child model's claim): %s",
			childRun, out.Operations, out.FinalAnswer), MaxSummaryBytes)
	}
	return res
}

// decodeStrict decodes a JSON object into v, refusing unknown fields.
func decodeStrict(raw []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	return dec.Decode(v)
}
