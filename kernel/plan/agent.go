package plan

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/seed-7bc021c3/reckon/kernel"
)

// Agent limits and defaults: a model turn and the tool calls it asks for
// cost a few dozen history events; Temporal warns at 10,240 per run.
const (
	DefaultMaxTurns = 20
	MaxAgentTurns   = 100
	// MaxAgentText bounds instructions and input, each.
	MaxAgentText = 64 << 10
	// MaxCallsPerTurn bounds the tool calls one model answer may ask for;
	// the calls past it are refused to the model, never run.
	MaxCallsPerTurn = 16
	// MaxAgentDelegates bounds the delegate calls one agent run may
	// make; past it they are refused to the model, never run. With
	// MaxDepth it bounds the runs a model's choices can start, as
	// MaxTotal does for plans.
	MaxAgentDelegates = 8
)

// Agent is the input of an agent run: the model chooses each tool call
// among Tools until it answers without one (its final answer) or MaxTurns
// model turns have passed.
type Agent struct {
	// Instructions are the system message; Input the first user message.
	Instructions string `json:"instructions"`
	Input        string `json:"input"`
	// Tools are the tool names the model may call: run_command, delegate
	// (a child agent run) and mcp__<tool> of RECKON_MCP_SERVERS.
	Tools []string `json:"tools"`
	// Model overrides RECKON_AGENT_MODEL for this run.
	Model string `json:"model,omitempty"`
	// MaxTurns bounds the model turns (DefaultMaxTurns, at most
	// MaxAgentTurns).
	MaxTurns int `json:"max_turns,omitempty"`
	// OnUncertain is what an uncertain tool call does to the run: "await"
	// (the default) waits until a probe or an operator settles it and
	// tells the model what the settlement implies; "stop" ends the run.
	OnUncertain string `json:"on_uncertain,omitempty"`
}

// Turns is the agent's bound on model turns, its default applied.
func (a Agent) Turns() int {
	if a.MaxTurns <= 0 {
		return DefaultMaxTurns
	}
	return a.MaxTurns
}

// Uncertain is the agent's on_uncertain, its default (await) applied.
func (a Agent) Uncertain() string {
	if a.OnUncertain == "" {
		return OnUncertainAwait
	}
	return a.OnUncertain
}

// Summary is the plan_summary of an agent run's run.started.
func (a Agent) Summary() string {
	return fmt.Sprintf("agent: %d turns at most; tools: %s", a.Turns(), strings.Join(a.Tools, ", "))
}

// DecodeAgent decodes an agent strictly: unknown fields are errors naming
// the field.
func DecodeAgent(raw json.RawMessage) (Agent, error) {
	var a Agent
	if err := kernel.CheckJSON("agent", raw); err != nil {
		return a, err
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&a); err != nil {
		return a, kernel.Errorf(kernel.EInvalid, "agent: %v", err)
	}
	return a, nil
}

// Validate checks an agent at the boundary, naming the offending field
// (agent.tools[1]).
func (a Agent) Validate(tools ToolSet) error {
	switch {
	case strings.TrimSpace(a.Input) == "":
		return kernel.Errorf(kernel.EInvalid, "agent.input: required (the task, the model's first user message)")
	case len(a.Instructions) > MaxAgentText:
		return kernel.Errorf(kernel.EInvalid, "agent.instructions: %d bytes; at most %d", len(a.Instructions), MaxAgentText)
	case len(a.Input) > MaxAgentText:
		return kernel.Errorf(kernel.EInvalid, "agent.input: %d bytes; at most %d", len(a.Input), MaxAgentText)
	case a.MaxTurns < 0 || a.MaxTurns > MaxAgentTurns:
		return kernel.Errorf(kernel.EInvalid, "agent.max_turns: must be between 1 and %d (default %d), got %d", MaxAgentTurns, DefaultMaxTurns, a.MaxTurns)
	case len(a.Model) > kernel.MaxKeyLen:
		return kernel.Errorf(kernel.EInvalid, "agent.model: at most %d bytes", kernel.MaxKeyLen)
	}
	switch a.OnUncertain {
	case "", OnUncertainAwait, OnUncertainStop:
	default:
		return kernel.Errorf(kernel.EInvalid, "agent.on_uncertain: must be %q (the default) or %q, got %q", OnUncertainAwait, OnUncertainStop, a.OnUncertain)
	}
	seen := map[string]bool{}
	for i, name := range a.Tools {
		if seen[name] {
			return kernel.Errorf(kernel.EInvalid, "agent.tools[%d]: %q is listed twice", i, name)
		}
		seen[name] = true
		if name == kernel.DelegateTool {
			continue
		}
		if _, ok := tools.Lookup(name); !ok {
			return kernel.Errorf(kernel.EInvalid, "agent.tools[%d]: unknown tool %q (known: run_command, delegate, and mcp__<tool> of configured MCP servers)", i, name)
		}
	}
	return nil
}

// maxCallIDInOperation bounds the part of an operation id that the model's
// call id gives, so that a child run's id (<run_id>.<operation_id>) stays
// a valid id.
const maxCallIDInOperation = 40

// AgentOperationID is the operation id of an agent's n-th tool call
// (1-based) whose model call id is callID: op-<n>-<call id>, the call id
// kept to letters, digits, '-' and '_' and to maxCallIDInOperation bytes;
// one that had to be changed ends in a digest of the original, so two
// call ids never share an operation id by being made safe.
func AgentOperationID(n int, callID string) string {
	var b strings.Builder
	for _, r := range callID {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r == '-', r == '_':
			b.WriteRune(r)
		default:
			b.WriteByte('_')
		}
	}
	safe := b.String()
	if safe != callID || len(safe) > maxCallIDInOperation || safe == "" {
		sum := sha256.Sum256([]byte(callID))
		if len(safe) > maxCallIDInOperation-9 {
			safe = safe[:maxCallIDInOperation-9]
		}
		safe += "-" + hex.EncodeToString(sum[:4])
	}
	return fmt.Sprintf("op-%d-%s", n, safe)
}
