package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/seed-7bc021c3/reckon/internal/apptest"
	"github.com/seed-7bc021c3/reckon/internal/fakeopenai"
	"github.com/seed-7bc021c3/reckon/kernel"
	"github.com/seed-7bc021c3/reckon/kernel/fault"
	"github.com/seed-7bc021c3/reckon/kernel/operations"
	"github.com/seed-7bc021c3/reckon/kernel/outbox"
)

// TestRunsCLI drives `reckon runs` against a real dev stack: start a run
// that delegates from a plan file (again: the same run), list the run and
// its child (tables, filters, pages, --json), get each with its status,
// parent or child, operations and events; bad input is refused naming the
// flag, a reader may not start runs.
func TestRunsCLI(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	st := apptest.Start(t, "ann:operator:operator-secret,rita:reader:reader-secret", fault.Config{})
	run := func(token string, args ...string) (string, error) {
		var out, errb bytes.Buffer
		env := map[string]string{"RECKON_URL": "http://" + st.APIAddr, "RECKON_TOKEN": token}
		err := runsMain(ctx, args, &out, &errb, func(k string) string { return env[k] })
		return out.String(), err
	}
	dir := t.TempDir()
	plan := filepath.Join(dir, "plan.json")
	if err := os.WriteFile(plan, []byte(`{"steps": [{"tool": "delegate", "plan": {"steps": [
	    {"tool": "run_command", "args": {"command": "echo ok > proof.txt", "timeout_s": 30}}]}}]}`), 0o600); err != nil {
		t.Fatal(err)
	}
	out, err := run("operator-secret", "start", "--project", "acme", "--run", "cli-1", "--plan", plan)
	if err != nil || !strings.HasPrefix(out, "started run cli-1 in project acme\n") || !strings.Contains(out, "reckon runs get --project acme --run cli-1") {
		t.Fatalf("start: %v\n%s", err, out)
	}
	if out, err := run("operator-secret", "start", "--project", "acme", "--run", "cli-1", "--plan", plan); err != nil || !strings.Contains(out, "already exists with this plan") {
		t.Fatalf("start again: %v\n%s", err, out)
	}
	if _, err := run("reader-secret", "start", "--project", "acme", "--plan", plan); err == nil || !strings.Contains(err.Error(), "403") {
		t.Fatalf("a reader starts a run: %v", err)
	}
	if err := st.Kernel.Conn.Client.GetWorkflow(ctx, kernel.WorkflowID("acme", "cli-1"), "").Get(ctx, nil); err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"cli-1", "cli-1.op-1"} {
		if err := outbox.WaitDelivered(ctx, st.Pool, "acme", id, 20*time.Millisecond); err != nil {
			t.Fatal(err)
		}
	}

	out, err = run("reader-secret", "list", "--project", "acme")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"RUN", "KIND", "cli-1.op-1", "kernel", "completed", "1 (0 unresolved)", "2 run(s)"} {
		if !strings.Contains(out, want) {
			t.Errorf("list lacks %q:\n%s", want, out)
		}
	}
	if strings.Index(out, "cli-1.op-1") > strings.Index(out, "cli-1 ") {
		t.Errorf("list is not newest first:\n%s", out)
	}
	out, err = run("reader-secret", "list", "--project", "acme", "--limit", "1")
	if err != nil || !strings.Contains(out, "1 run(s)") || !strings.Contains(out, "more: reckon runs list --project acme --cursor ") {
		t.Errorf("list --limit 1: %v\n%s", err, out)
	}
	out, err = run("reader-secret", "list", "--project", "acme", "--limit", "1", "--all", "--json")
	var page operations.RunsPage
	if err != nil || json.Unmarshal([]byte(out), &page) != nil || len(page.Runs) != 2 || page.Runs[1].ChildRuns != 1 {
		t.Errorf("list --all --json: %v\n%s", err, out)
	}
	out, err = run("reader-secret", "list", "--project", "acme", "--parent", "cli-1", "--status", "completed")
	if err != nil || !strings.Contains(out, "cli-1.op-1") || !strings.Contains(out, "1 run(s)") {
		t.Errorf("list --parent: %v\n%s", err, out)
	}

	out, err = run("reader-secret", "get", "--project", "acme", "--run", "cli-1")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"status      completed", "kind        kernel, source kernel", "child run   cli-1.op-1 (completed",
		"operations  1: 0 unresolved, 1 settled", "OPERATION", "delegate", "settled", "run.started", "run.completed"} {
		if !strings.Contains(out, want) {
			t.Errorf("get lacks %q:\n%s", want, out)
		}
	}
	out, err = run("reader-secret", "get", "--project", "acme", "--run", "cli-1.op-1", "--events", "2")
	if err != nil || !strings.Contains(out, "parent      cli-1") || !strings.Contains(out, "run_command") ||
		!strings.Contains(out, "tool.completed") || !strings.Contains(out, "the first 2 event(s) are shown") {
		t.Errorf("get the child: %v\n%s", err, out)
	}
	out, err = run("reader-secret", "get", "--project", "acme", "--run", "cli-1", "--json")
	var got map[string]json.RawMessage
	if err != nil || json.Unmarshal([]byte(out), &got) != nil || got["run"] == nil || got["operations"] == nil || got["child_runs"] == nil {
		t.Errorf("get --json: %v\n%s", err, out)
	}

	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"get", "--project", "acme"}, "--run"},
		{[]string{"get", "--project", "acme", "--run", "cli-1", "--events", "0"}, "--events"},
		{[]string{"list"}, "--project"},
		{[]string{"list", "--project", "acme", "--limit", "500"}, "--limit"},
		{[]string{"list", "--project", "acme", "--status", "done"}, "status must be one of"},
		{[]string{"start", "--project", "acme"}, "--plan"},
		{[]string{"start", "--project", "acme", "--plan", filepath.Join(dir, "nope.json")}, "--plan"},
		{[]string{"frobnicate"}, "unknown subcommand"},
	} {
		if _, err := run("operator-secret", c.args...); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%v: %v, want an error naming %s", c.args, err, c.want)
		}
	}
	if err := os.WriteFile(plan, []byte("steps: [run_command]"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := run("operator-secret", "start", "--project", "acme", "--plan", plan); err == nil || !strings.Contains(err.Error(), "not JSON") {
		t.Errorf("a plan that is not JSON: %v", err)
	}
}

// TestRunsStartAgentCLI starts an agent run from an agent file against a
// real dev stack whose model is the scripted one (internal/fakeopenai):
// the run completes with the model's final answer, the same file again is
// the same run; exactly one of --plan and --agent is taken, and an agent
// file that is not JSON, or that the server refuses, is named.
func TestRunsStartAgentCLI(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	m := fakeopenai.NewAgentModel()
	t.Cleanup(m.Close)
	st := apptest.Start(t, "ann:operator:operator-secret", fault.Config{},
		"RECKON_AGENT_BASE_URL", m.URL, "RECKON_AGENT_MODEL", "cli-scripted")
	run := func(args ...string) (string, error) {
		var out, errb bytes.Buffer
		env := map[string]string{"RECKON_URL": "http://" + st.APIAddr, "RECKON_TOKEN": "operator-secret"}
		err := runsMain(ctx, args, &out, &errb, func(k string) string { return env[k] })
		return out.String(), err
	}
	m.Script("cli-scripted",
		fakeopenai.AgentStep{ToolCalls: []fakeopenai.AgentToolCall{{ID: "call_w", Name: "run_command",
			Arguments: json.RawMessage(`{"command": "echo released > NOTES.md", "timeout_s": 30}`)}}},
		fakeopenai.AgentStep{Content: "NOTES.md written."})
	dir := t.TempDir()
	agent := filepath.Join(dir, "agent.json")
	if err := os.WriteFile(agent, []byte(`{"instructions": "You maintain the notes.", "input": "Write NOTES.md.", "tools": ["run_command"]}`), 0o600); err != nil {
		t.Fatal(err)
	}
	out, err := run("start", "--project", "acme", "--run", "cli-agent", "--agent", agent)
	if err != nil || !strings.HasPrefix(out, "started run cli-agent in project acme\n") {
		t.Fatalf("start --agent: %v\n%s", err, out)
	}
	if err := st.Kernel.Conn.Client.GetWorkflow(ctx, kernel.WorkflowID("acme", "cli-agent"), "").Get(ctx, nil); err != nil {
		t.Fatalf("the agent run: %v", err)
	}
	if err := outbox.WaitDelivered(ctx, st.Pool, "acme", "cli-agent", 20*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	out, err = run("get", "--project", "acme", "--run", "cli-agent")
	for _, want := range []string{"status      completed", "op-1-call_w", "agent.turn", "run.completed"} {
		if err != nil || !strings.Contains(out, want) {
			t.Errorf("get the agent run lacks %q (%v):\n%s", want, err, out)
		}
	}
	if out, err := run("start", "--project", "acme", "--run", "cli-agent", "--agent", agent); err != nil || !strings.Contains(out, "already exists with this agent") {
		t.Errorf("start --agent again: %v\n%s", err, out)
	}

	plan := filepath.Join(dir, "plan.json")
	notJSON := filepath.Join(dir, "agent.txt")
	refused := filepath.Join(dir, "refused.json")
	for f, b := range map[string]string{plan: `{"steps": [{"tool": "run_command", "args": {"command": "true"}}]}`,
		notJSON: "input: write NOTES.md", refused: `{"input": "x", "tools": ["mcp__nope"]}`} {
		if err := os.WriteFile(f, []byte(b), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"start", "--project", "acme", "--plan", plan, "--agent", agent}, "--plan and --agent: give exactly one"},
		{[]string{"start", "--project", "acme"}, "missing --plan or --agent"},
		{[]string{"start", "--project", "acme", "--agent", filepath.Join(dir, "nope.json")}, "--agent"},
		{[]string{"start", "--project", "acme", "--agent", notJSON}, "--agent " + notJSON + " is not JSON"},
		{[]string{"start", "--project", "acme", "--agent", refused}, "agent.tools[0]"},
	} {
		if _, err := run(c.args...); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%v: %v, want an error naming %s", c.args[3:], err, c.want)
		}
	}
}
