package runner

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/seed-7bc021c3/reckon/internal/fakeopenai"
	"github.com/seed-7bc021c3/reckon/internal/mcpserver"
	"github.com/seed-7bc021c3/reckon/kernel"
	"github.com/seed-7bc021c3/reckon/kernel/fault"
	"github.com/seed-7bc021c3/reckon/kernel/plan"
	"github.com/seed-7bc021c3/reckon/tool/mcptool"
)

// scripted starts a scripted model for the test and returns it with the
// worker's view of it.
func scripted(t *testing.T) (*fakeopenai.AgentModel, *AgentModel) {
	t.Helper()
	m := fakeopenai.NewAgentModel()
	t.Cleanup(m.Close)
	return m, &AgentModel{BaseURL: m.URL, APIKey: "test"}
}

// call is one scripted tool call with a chosen id.
func call(id, name, args string) fakeopenai.AgentToolCall {
	return fakeopenai.AgentToolCall{ID: id, Name: name, Arguments: json.RawMessage(args)}
}

func calls(c ...fakeopenai.AgentToolCall) fakeopenai.AgentStep {
	return fakeopenai.AgentStep{ToolCalls: c}
}

func final(text string) fakeopenai.AgentStep { return fakeopenai.AgentStep{Content: text} }

// appendCall is a run_command call that appends its operation id to
// effects.txt: the file says how often, and as which operation, it ran.
func appendCall(id string) fakeopenai.AgentToolCall {
	return call(id, "run_command", `{"command": "echo \"$RECKON_OPERATION_ID\" >> effects.txt"}`)
}

// startAgent starts an agent run through the validating Start and
// returns at once.
func (e *env) startAgent(runID string, a Agent) {
	e.t.Helper()
	if _, _, err := e.starter.Start(context.Background(), StartParams{Project: e.project, RunID: runID, Agent: &a}); err != nil {
		e.t.Fatalf("start agent %s: %v", runID, err)
	}
}

// runAgent starts an agent run and waits for its end; it returns the
// workflow's error and the run's events.
func (e *env) runAgent(runID string, a Agent) ([]kernel.Event, error) {
	e.t.Helper()
	e.startAgent(runID, a)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	err := e.wait(ctx, runID)
	return e.events(runID), err
}

// settleAwaited waits until the run awaits op, settles it, waits for the
// run to complete and returns its events.
func (e *env) settleAwaited(runID, op, effect, basis string) []kernel.Event {
	e.t.Helper()
	e.awaiting(runID, op)
	e.settle(runID, op, effect, basis)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if err := e.wait(ctx, runID); err != nil {
		e.t.Fatalf("run failed: %v", err)
	}
	return e.events(runID)
}

// chatRequest is the part of a recorded chat request the tests read.
type chatRequest struct {
	Messages []struct {
		Role       string `json:"role"`
		Content    string `json:"content"`
		ToolCallID string `json:"tool_call_id"`
	} `json:"messages"`
	Tools []struct {
		Function struct {
			Name       string          `json:"name"`
			Parameters json.RawMessage `json:"parameters"`
		} `json:"function"`
	} `json:"tools"`
}

func requests(t *testing.T, m *fakeopenai.AgentModel) []chatRequest {
	t.Helper()
	var out []chatRequest
	for _, raw := range m.Requests("scripted") {
		var r chatRequest
		if err := json.Unmarshal(raw, &r); err != nil {
			t.Fatal(err)
		}
		out = append(out, r)
	}
	return out
}

// agentTurn decodes an agent.turn event.
func agentTurn(t *testing.T, ev kernel.Event) ([]kernel.AgentMessage, kernel.AgentAnswer, []kernel.AgentRefusal) {
	t.Helper()
	var d kernel.AgentTurn
	if err := ev.DecodeData(&d); err != nil || ev.Type != kernel.TypeAgentTurn {
		t.Fatalf("%s: %v", ev.Type, err)
	}
	sent, answer, refused, err := d.Decode()
	if err != nil {
		t.Fatal(err)
	}
	return sent, answer, refused
}

// toolResult is the content of the last tool message answering callID
// in req.
func toolResult(t *testing.T, req chatRequest, callID string) string {
	t.Helper()
	for i := len(req.Messages) - 1; i >= 0; i-- {
		if m := req.Messages[i]; m.Role == "tool" && m.ToolCallID == callID {
			return m.Content
		}
	}
	t.Fatalf("no tool result for %s in the request", callID)
	return ""
}

// An agent whose model calls run_command, an MCP tool (a real MCP server)
// and delegate over three turns, then answers: every call is an operation
// op-<n>-<call id> recorded as a plan step's is, the MCP call carries the
// operation's idempotency key, the child agent runs under the delegation,
// each turn is an agent.turn, and the final answer ends run.completed
// marked agent-authored.
func TestAgentThreeTurnsRunCommandMCPAndDelegate(t *testing.T) {
	t.Parallel()
	store, hs := issuesServer(t)
	tools := mcpTools(t, []mcptool.ServerConfig{{Name: "issues", URL: hs.URL + mcpserver.HTTPPath}}, "mcp__create_issue")
	m, model := scripted(t)
	e := newEnv(t, envOpts{extra: tools, model: model})
	m.Script("scripted",
		calls(appendCall("c1")),
		calls(call("c2", "mcp__create_issue", `{"title": "Disk full on db-3"}`)),
		calls(call("c3", "delegate", `{"instructions": "You check things.", "input": "Say done."}`)),
		final("child: done"), // the child's only turn
		final("All three done."),
	)
	evs, err := e.runAgent("a1", Agent{Instructions: "You are a careful operator.", Input: "Do the three things.",
		Tools: []string{"run_command", "mcp__create_issue", "delegate"}})
	if err != nil {
		t.Fatalf("agent run failed: %v (%v)", err, shape(evs))
	}
	wantShape(t, evs, "run.started",
		"agent.turn", "tool.started op-1-c1", "tool.completed op-1-c1",
		"agent.turn", "tool.started op-2-c2", "tool.completed op-2-c2",
		"agent.turn", "tool.started op-3-c3", "tool.completed op-3-c3",
		"agent.turn", "run.completed")
	if got := e.readFile("a1", "effects.txt"); got != "op-1-c1\n" {
		t.Fatalf("effects.txt = %q", got)
	}
	if _, _, found, err := store.Lookup(mcptool.IdempotencyKey(e.project, "a1", "op-2-c2")); err != nil || !found {
		t.Fatalf("the MCP call did not carry its operation's idempotency key: found=%v err=%v", found, err)
	}
	var done kernel.RunCompleted
	if err := evs[len(evs)-1].DecodeData(&done); err != nil || done.FinalAnswer != "All three done." || done.AnswerAuthor != kernel.ActorAgent {
		t.Fatalf("run.completed = %+v (%v): want the final answer marked agent-authored", done, err)
	}
	sent, answer, _ := agentTurn(t, evs[1])
	if len(sent) != 2 || answer.ToolCalls[0].OperationID != "op-1-c1" {
		t.Fatalf("first agent.turn sent %+v answered %+v", sent, answer)
	}
	child := kernel.ChildRunID("a1", "op-3-c3")
	wantShape(t, e.events(child), "run.started", "agent.turn", "run.completed")
	if d := data(t, evs[8]); d["child_run_id"] != child {
		t.Fatalf("delegate's tool.started = %v: want child_run_id %s", d, child)
	}

	reqs := requests(t, m)
	if len(reqs) != 5 {
		t.Fatalf("%d model requests, want 5", len(reqs))
	}
	if names := len(reqs[0].Tools); names != 3 || !strings.Contains(string(reqs[0].Tools[0].Function.Parameters), "command") {
		t.Fatalf("tools offered: %+v", reqs[0].Tools)
	}
	last := reqs[4]
	if !strings.Contains(toolResult(t, last, "c2"), "Disk full") && toolResult(t, last, "c2") == "" {
		t.Fatal("the MCP result was not given back")
	}
	if got := toolResult(t, last, "c3"); !strings.Contains(got, "child: done") {
		t.Fatalf("delegate's result = %q: want the child's final answer", got)
	}
	if reqs[3].Messages[len(reqs[3].Messages)-1].Content != "Say done." {
		t.Fatalf("the child's request does not carry its input: %+v", reqs[3].Messages)
	}
}

// A call id the model uses again is the call already made: it is not
// executed a second time, and the model is told so. Arguments that fail
// the tool's schema never start an operation and go back as an error.
func TestAgentRepeatedCallIDIsNotExecutedTwice(t *testing.T) {
	t.Parallel()
	m, model := scripted(t)
	e := newEnv(t, envOpts{model: model})
	m.Script("scripted",
		calls(appendCall("c1")),
		calls(appendCall("c1"), call("c2", "run_command", `{"cmd": "rm -rf /"}`)),
		final("done"),
	)
	evs, err := e.runAgent("a1", Agent{Input: "append once", Tools: []string{"run_command"}})
	if err != nil {
		t.Fatalf("agent run failed: %v (%v)", err, shape(evs))
	}
	wantShape(t, evs, "run.started",
		"agent.turn", "tool.started op-1-c1", "tool.completed op-1-c1",
		"agent.turn", "agent.turn", "run.completed")
	if got := e.readFile("a1", "effects.txt"); got != "op-1-c1\n" {
		t.Fatalf("effects.txt = %q: the repeated call id ran again", got)
	}
	reqs := requests(t, m)
	if got := toolResult(t, reqs[2], "c1"); !strings.Contains(got, "not executed again") || !strings.Contains(got, "op-1-c1") {
		t.Fatalf("the repeated call's result = %q", got)
	}
	if got := toolResult(t, reqs[2], "c2"); !strings.Contains(got, "rejected") || !strings.Contains(got, "nothing ran") {
		t.Fatalf("the invalid call's result = %q", got)
	}
	if _, _, refused := agentTurn(t, evs[4]); len(refused) != 2 {
		t.Fatalf("second agent.turn refused %+v: want both calls refused", refused)
	}
}

// A worker lost after run_command's effect leaves an uncertain operation
// and an awaiting run; a probe's occurred resumes it, and the model's next
// request carries the settled result: it happened, do not repeat it. The
// command ran once.
func TestAgentUncertainCallWaitsAndTellsTheModelTheSettlement(t *testing.T) {
	t.Parallel()
	m, model := scripted(t)
	e := newEnv(t, envOpts{model: model, fault: fault.Config{AfterEffect: "run_command"}})
	e.resumer(nil)
	m.Script("scripted", calls(appendCall("w1")), final("written once"))
	e.startAgent("a1", Agent{Input: "write it", Tools: []string{"run_command"}})

	evs := e.settleAwaited("a1", "op-1-w1", kernel.EffectOccurred, kernel.BasisProbe)
	wantShape(t, evs, "run.started",
		"agent.turn", "tool.started op-1-w1", "tool.failed op-1-w1 injected_fault effect=uncertain",
		"run.awaiting op-1-w1", "operation.reconciled op-1-w1", "run.resumed op-1-w1",
		"agent.turn", "run.completed")
	if got := e.readFile("a1", "effects.txt"); got != "op-1-w1\n" {
		t.Fatalf("effects.txt = %q", got)
	}
	got := toolResult(t, requests(t, m)[1], "w1")
	for _, want := range []string{"happened", "probe", "Do not repeat it", "op-1-w1"} {
		if !strings.Contains(got, want) {
			t.Fatalf("the settled result %q lacks %q", got, want)
		}
	}
}

// A settled none tells the model the call did not happen and it may call
// again; with on_uncertain stop the run ends at the uncertain call.
func TestAgentSettledNoneAndStop(t *testing.T) {
	t.Parallel()
	m, model := scripted(t)
	e := newEnv(t, envOpts{model: model, fault: fault.Config{BeforeEffect: "run_command"}})
	e.resumer(nil)
	m.Script("scripted", calls(appendCall("w1")), calls(appendCall("w2")), final("done"))
	e.startAgent("a1", Agent{Input: "write it", Tools: []string{"run_command"}})
	e.settleAwaited("a1", "op-1-w1", kernel.EffectNone, kernel.BasisOperator)
	if got := toolResult(t, requests(t, m)[1], "w1"); !strings.Contains(got, "did not happen") || !strings.Contains(got, "may call it again") {
		t.Fatalf("the settled result = %q", got)
	}
	if got := e.readFile("a1", "effects.txt"); got != "op-2-w2\n" {
		t.Fatalf("effects.txt = %q", got)
	}

	m.Script("scripted", calls(appendCall("s1")))
	evs, err := e.runAgent("a2", Agent{Input: "write it", Tools: []string{"run_command"}, OnUncertain: plan.OnUncertainStop})
	if err == nil {
		t.Fatal("the run went on past an uncertain call with on_uncertain stop")
	}
	wantShape(t, evs, "run.started", "agent.turn", "tool.started op-1-s1", "tool.failed op-1-s1 injected_fault effect=uncertain", "run.failed")
	if len(requests(t, m)) != 4 {
		t.Fatal("the uncertain call went back to the model")
	}
}

// A worker lost while the model thinks: the turn is asked again on
// another worker, and the tool call of the lost answer is never run.
func TestAgentWorkerLostDuringAModelTurn(t *testing.T) {
	t.Parallel()
	m, model := scripted(t)
	e := newEnv(t, envOpts{model: model, timeouts: Timeouts{ToolHeartbeat: time.Second}})
	lost := calls(appendCall("lost"))
	lost.DelayMS = 60_000
	m.Script("scripted", calls(appendCall("c1")), lost, final("done"))
	e.startAgent("a1", Agent{Input: "append", Tools: []string{"run_command"}})
	deadline := time.Now().Add(60 * time.Second)
	for len(m.Requests("scripted")) < 2 {
		if time.Now().After(deadline) {
			t.Fatal("the second turn was never asked")
		}
		time.Sleep(20 * time.Millisecond)
	}
	e.stopWorker()
	e.startWorker()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if err := e.wait(ctx, "a1"); err != nil {
		t.Fatalf("run failed: %v", err)
	}
	evs := e.events("a1")
	wantShape(t, evs, "run.started",
		"agent.turn", "tool.started op-1-c1", "tool.completed op-1-c1",
		"agent.turn", "run.completed")
	if got := e.readFile("a1", "effects.txt"); got != "op-1-c1\n" {
		t.Fatalf("effects.txt = %q", got)
	}
	reqs := requests(t, m)
	if len(reqs) != 3 || len(reqs[1].Messages) != len(reqs[2].Messages) {
		t.Fatalf("%d requests: want turn 2 asked twice with the same conversation", len(reqs))
	}
}

// Agent runs are refused, naming the variables, where no model is set;
// so is a run carrying both a plan and an agent, and an unknown tool.
func TestAgentStartRefusals(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOpts{})
	_, _, err := e.starter.Start(context.Background(), StartParams{Project: e.project, Agent: &Agent{Input: "x", Tools: []string{"run_command"}}})
	if kernel.ErrorCode(err) != kernel.EInvalid || !strings.Contains(err.Error(), "RECKON_AGENT_BASE_URL") {
		t.Fatalf("unconfigured: %v", err)
	}
	e.starter.AgentModel = "scripted"
	_, _, err = e.starter.Start(context.Background(), StartParams{Project: e.project, Agent: &Agent{Input: "x", Tools: []string{"mcp__nope"}}})
	if kernel.ErrorCode(err) != kernel.EInvalid || !strings.Contains(err.Error(), "agent.tools[0]") {
		t.Fatalf("unknown tool: %v", err)
	}
	_, _, err = e.starter.Start(context.Background(), StartParams{Project: e.project, Plan: Plan{Steps: []Step{cmd("true")}}, Agent: &Agent{Input: "x"}})
	if kernel.ErrorCode(err) != kernel.EInvalid || !strings.Contains(err.Error(), "not both") {
		t.Fatalf("both: %v", err)
	}
}

// A worker stopped while an agent's command runs (after its effect, before
// its answer): a new worker finds the call timed out on its heartbeat,
// records it uncertain, and the run waits; an operator's occurred resumes
// it and the model's next request carries that settlement. The command
// ran once.
func TestAgentWorkerKilledDuringAToolCall(t *testing.T) {
	t.Parallel()
	m, model := scripted(t)
	e := newEnv(t, envOpts{model: model, timeouts: Timeouts{ToolHeartbeat: time.Second}})
	e.resumer(nil)
	m.Script("scripted", calls(call("k1", "run_command", `{"command": "echo \"$RECKON_OPERATION_ID\" >> effects.txt; sleep 20"}`)), final("done"))
	e.startAgent("a1", Agent{Input: "append", Tools: []string{"run_command"}})
	ws := e.workspace("a1")
	deadline := time.Now().Add(60 * time.Second)
	for {
		if b, err := os.ReadFile(filepath.Join(ws, "effects.txt")); err == nil && len(b) > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the command never ran")
		}
		time.Sleep(20 * time.Millisecond)
	}
	e.stopWorker()
	e.startWorker()
	evs := e.settleAwaited("a1", "op-1-k1", kernel.EffectOccurred, kernel.BasisOperator)
	// The stopping worker may still report its canceled command
	// (command_canceled), or the call times out on its heartbeat
	// (activity_failed): uncertain either way.
	var d kernel.ToolFailed
	if len(evs) > 3 && evs[3].DecodeData(&d) == nil && d.ErrorType == "command_canceled" {
		d.ErrorType = kernel.ErrorTypeActivityFailed
		evs[3].Data, _ = json.Marshal(d)
	}
	wantShape(t, evs, "run.started",
		"agent.turn", "tool.started op-1-k1", "tool.failed op-1-k1 activity_failed effect=uncertain",
		"run.awaiting op-1-k1", "operation.reconciled op-1-k1", "run.resumed op-1-k1",
		"agent.turn", "run.completed")
	if got := toolResult(t, requests(t, m)[1], "k1"); !strings.Contains(got, "happened") || !strings.Contains(got, "operator") {
		t.Fatalf("the settled result = %q", got)
	}
	if got := e.readFile("a1", "effects.txt"); got != "op-1-k1\n" {
		t.Fatalf("effects.txt = %q", got)
	}
}

// A model server that sends no call ids gets ids of the turn and the
// call's place: distinct calls stay distinct, and the operation id is
// still op-<n>-<call id>.
func TestAgentCallIDs(t *testing.T) {
	t.Parallel()
	if a, b := callID(2, 0, ""), callID(2, 1, ""); a == b || a != "reckon_t2_1" {
		t.Fatalf("generated ids %q %q", a, b)
	}
	if got := callID(1, 0, "call_x"); got != "call_x" {
		t.Fatalf("the model's id was replaced: %q", got)
	}
	for _, tc := range []struct{ id, want string }{
		{"call_abc-1", "op-3-call_abc-1"},
		{"call.with/dots", "op-3-call_with_dots-"},
		{strings.Repeat("x", 60), "op-3-" + strings.Repeat("x", 31) + "-"},
	} {
		got := plan.AgentOperationID(3, tc.id)
		if !strings.HasPrefix(got, tc.want) || kernel.ValidateID("operation_id", got) != nil || strings.Contains(got, ".") {
			t.Errorf("AgentOperationID(3, %q) = %q, want it to start with %q and be a valid id without dots", tc.id, got, tc.want)
		}
	}
	if plan.AgentOperationID(1, "a.b") == plan.AgentOperationID(1, "a/b") {
		t.Error("two call ids made safe share an operation id")
	}
}
