package main

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/seed-7bc021c3/reckon/internal/fakeopenai"
	"github.com/seed-7bc021c3/reckon/kernel/runner"
)

// demoModelName is the model the demo's agent runs ask the scripted model
// for.
const demoModelName = "reckon-demo-scripted"

// demoScriptedModel starts the demo's model: a scripted OpenAI-compatible
// server (internal/fakeopenai), not a language model.
func demoScriptedModel() *fakeopenai.AgentModel { return fakeopenai.NewAgentModel() }

// demoAgentRun runs an agent: its model writes NOTES.md through
// run_command, the worker "crashes" after the effect (the demo's fault),
// the run waits, the probe proves the write occurred, and the model is
// told so and finishes without writing again.
func demoAgentRun(ctx context.Context, d *demoEnv) error {
	m := d.Model
	fmt.Fprintf(d.Out, "the model is SCRIPTED: %s serves OpenAI-compatible chat completions from a script (internal/fakeopenai), not a language model; a real one is configured with RECKON_AGENT_BASE_URL and RECKON_AGENT_MODEL (docs/agents.md)\n", m.URL)
	m.Script(demoModelName,
		fakeopenai.AgentStep{ToolCalls: []fakeopenai.AgentToolCall{{ID: "call_notes", Name: "run_command",
			Arguments: mustJSON(map[string]any{"command": `printf 'released\n' > NOTES.md`, "timeout_s": 30})}}},
		fakeopenai.AgentStep{Content: "NOTES.md says released; the kernel verified the write, so I did not write it again."},
	)
	runID := "agent-" + time.Now().UTC().Format("20060102-150405")
	id, _, err := d.Stack.Kernel.Starter.Start(ctx, runner.StartParams{Project: d.Project, RunID: runID, Agent: &runner.Agent{
		Instructions: "You maintain the release notes.", Input: "Write NOTES.md with one line: released.",
		Tools: []string{"run_command"},
	}})
	if err != nil {
		return err
	}
	d.Runs = append(d.Runs, id)
	fmt.Fprintf(d.Out, "started agent run %s/%s with KERNEL_FAULT_AFTER_EFFECT=%s (set in-process)\n", d.Project, id, demoFault.AfterEffect)
	demoShowAwaiting(ctx, d, id)
	view, runErr, err := demoFinish(ctx, d, id)
	if err != nil {
		return err
	}
	if runErr != nil || view.Status != runner.StatusCompleted {
		return fmt.Errorf("agent run %s is %s, want completed after its wait (%v)", id, view.Status, runErr)
	}
	reqs := m.Requests(demoModelName)
	if len(reqs) != 2 {
		return fmt.Errorf("the model was asked %d times, want 2", len(reqs))
	}
	fmt.Fprintf(d.Out, "what the model was told about its call after the wait: %q\n", lastToolResult(reqs[1]))
	path, notes, err := d.workspaceFile(id, "NOTES.md")
	if err != nil {
		return err
	}
	fmt.Fprintf(d.Out, "workspace %s: %q — written once\n", path, string(notes))
	return nil
}

// lastToolResult is the content of the last tool message of a recorded
// chat request.
func lastToolResult(raw json.RawMessage) string {
	var req struct {
		Messages []struct {
			Role    string `json:"role"`
			Content string `json:"content"`
		} `json:"messages"`
	}
	_ = json.Unmarshal(raw, &req)
	for i := len(req.Messages) - 1; i >= 0; i-- {
		if req.Messages[i].Role == "tool" {
			return req.Messages[i].Content
		}
	}
	return ""
}
