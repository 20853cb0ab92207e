package kernel

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
)

// ToolCall is one execution of a tool: everything a tool needs and nothing
// of the workflow.
type ToolCall struct {
	Project     string          `json:"project"`
	RunID       string          `json:"run_id"`
	OperationID string          `json:"operation_id"`
	Tool        string          `json:"tool"`
	Args        json.RawMessage `json:"args,omitempty"`
	// Workspace is the run's directory; run_command is confined to it.
	Workspace string `json:"workspace"`
	// Server and UpstreamTool pin the call to the server and tool its
	// tool.started names (an Upstream tool's, resolved just before); a
	// worker that resolves Tool elsewhere refuses the call (effect none)
	// rather than make it where the probes will not look. Empty: the
	// worker resolves Tool (calls scheduled before the kernel recorded
	// the server, and calls whose tool resolved to no server just before
	// their tool.started, which then names none).
	Server       string `json:"server,omitempty"`
	UpstreamTool string `json:"upstream_tool,omitempty"`
	// ServerEndpoint, when set, pins the call to that endpoint identity
	// of Server too (its tool.started's server_endpoint): a worker whose
	// server of that name goes elsewhere refuses the call (effect none),
	// as the probes would ask the recorded endpoint. Empty for calls
	// scheduled before it: those are pinned by name alone.
	ServerEndpoint string `json:"server_endpoint,omitempty"`
}

// MCPPrefix starts the kernel's names of MCP tools: mcp__<tool>, or
// mcp__<server>__<tool> for one server's.
const MCPPrefix = "mcp__"

// MCPToolName is the kernel's name of server's tool: mcp__<server>__<tool>.
func MCPToolName(server, tool string) string { return MCPPrefix + server + "__" + tool }

// Upstream is a Tool that calls a tool of a named server (an MCP
// server's): the kernel records both in tool.started, so that a probe
// asks the server the call went to and no other.
type Upstream interface {
	Upstream() (server, tool string)
}

// Endpointed is an Upstream tool that also tells its server's endpoint
// identity (a digest of where calls go: mcptool.ServerConfig.Endpoint).
// The kernel records it in tool.started (server_endpoint), so that a probe
// whose server of the same name goes elsewhere does not answer for the
// call.
type Endpointed interface {
	ServerEndpoint() string
}

// ToolResult is what a successful tool call returns.
type ToolResult struct {
	// Summary goes into tool.completed.result_summary (bounded).
	Summary string `json:"summary"`
	// Output is the tool's structured output, if any.
	Output json.RawMessage `json:"output,omitempty"`
}

// Tool executes one kind of tool call. Validate runs before execution and
// must have no side effect: its failure is classified effect=none. Any error
// from Execute is at or after the execution boundary unless it is a
// *ToolError that says otherwise.
type Tool interface {
	Name() string
	Validate(call ToolCall) error
	Execute(ctx context.Context, call ToolCall) (ToolResult, error)
}

// ToolSpec is how a tool is offered to a model: its description and the
// JSON schema of its arguments (an object).
type ToolSpec struct {
	Description string          `json:"description,omitempty"`
	Parameters  json.RawMessage `json:"parameters"`
}

// Described is a Tool that can say how it is offered to a model (kernel
// agent runs). A tool that is not is offered with an open object schema
// and its Validate alone judges the arguments.
type Described interface {
	Describe() ToolSpec
}

// WorkspaceTool is a Tool that says whether its durable effects land in
// the run's workspace (run_command in its sandbox, an MCP server rooted
// there): the kernel records a workspace manifest before and after each
// call of such a tool, so probes can tell what the call changed.
type WorkspaceTool interface {
	WritesWorkspace() bool
}

// WritesWorkspace reports whether t is a WorkspaceTool that writes the
// workspace: the one test of whether a call gets workspace manifests.
func WritesWorkspace(t Tool) bool {
	wt, ok := t.(WorkspaceTool)
	return ok && wt.WritesWorkspace()
}

// PriorReader is a Tool that can read, just before a call, the downstream
// state the call would change (a declared probe adapter's facts). The
// worker records it (kernel/priorstate) so a probe can later tell what the
// call itself changed. ok is false when nothing applies to the call; a
// read must have no side effect.
type PriorReader interface {
	ReadPrior(ctx context.Context, call ToolCall) (state json.RawMessage, ok bool, err error)
}

// ToolError is a classified tool failure. ErrorType goes to
// tool.failed.error_type and Effect to tool.failed.effect.
type ToolError struct {
	ErrorType string
	Effect    string
	Err       error
}

// Error implements error.
func (e *ToolError) Error() string {
	if e.Err == nil {
		return e.ErrorType
	}
	return e.ErrorType + ": " + e.Err.Error()
}

// Unwrap returns the underlying error.
func (e *ToolError) Unwrap() error { return e.Err }

// Error types of tool.failed that the kernel itself produces.
const (
	ErrorTypeValidation      = "argument_validation" // rejected before execution: effect=none
	ErrorTypeToolError       = "tool_error"          // the tool reported failure after starting
	ErrorTypeActivityFailed  = "activity_failed"     // the activity broke (timeout, crash)
	ErrorTypeInjectedFault   = "injected_fault"      // fault injection: a crash-style failure
	ErrorTypeBlocked         = "blocked"             // refused by policy
	ErrorTypeUnknownTool     = "unknown_tool"        // no such tool: effect=none
	ErrorTypeDelegationStart = "delegated_run_start_failed"
	ErrorTypeDelegationFail  = "delegated_run_failed"
)

// Rejected returns a ToolError for a call refused before execution.
func Rejected(format string, args ...any) *ToolError {
	return &ToolError{ErrorType: ErrorTypeValidation, Effect: EffectNone, Err: fmt.Errorf(format, args...)}
}

// Classify turns any tool error into (error_type, effect). Errors that are
// not a *ToolError happened at or after the execution boundary and are
// uncertain: nothing proves the effect did not land.
func Classify(err error) (errorType, effect string) {
	var te *ToolError
	if errors.As(err, &te) {
		eff := te.Effect
		if eff == "" {
			eff = EffectUncertain
		}
		return te.ErrorType, eff
	}
	return ErrorTypeToolError, EffectUncertain
}
