package kernel

import (
	"encoding/json"
	"time"
)

// The data of each event type, declared once. Every writer (the run
// workflow, the reconcile path, the triage sweep) marshals these types and
// every reader decodes them; ingest validates an event's data by decoding
// it into its type (see validate.go). Unknown extra fields are kept in the
// journal as they came: a type lists what reckon reads, not all an agent
// may send.
//
// Struct tags drive the validation: `reckon:"required"` makes a field
// required (a string non-empty, a list non-empty) and `reckon:"key"` bounds
// a string to MaxKeyLen; numbers are non-negative integers. Every field
// declared here is checked at ingest, including the conventions beyond
// docs/design.md's list (workspace, reissue_of, postcondition, child_run_id,
// part/parts, the MCP gateway's server/upstream_tool/server_endpoint and
// run_kind/gateway_instance/mcp_client): readers decode events into these
// types, so a value of the wrong type must be refused at the boundary
// rather than break a listing.

// RunStarted is the data of run.started.
type RunStarted struct {
	PlanSummary string `json:"plan_summary,omitempty"`
	ParentRunID string `json:"parent_run_id,omitempty"`
	// Workspace is the kernel run's absolute workspace directory. Probes
	// never read it from here (an event is a report, the kernel's own
	// layout is the fact: see pipeline/probe.Workspaces).
	Workspace string `json:"workspace,omitempty"`
	// RunKind, GatewayInstance and MCPClient describe a run the MCP
	// gateway (kernel/gateway) recorded: session or client-named, which
	// gateway instance, and the MCP client's implementation as it
	// introduced itself ({"name", "version", ...}).
	RunKind         string          `json:"run_kind,omitempty"`
	GatewayInstance string          `json:"gateway_instance,omitempty"`
	MCPClient       json.RawMessage `json:"mcp_client,omitempty"`
}

// RunCompleted is the data of run.completed: empty for a plan run; an
// agent run's carries the model's final answer, bounded, marked
// AnswerAuthor "agent". The answer is a claim of the model: nothing that
// settles an operation (triage, probes, the supervisor) reads it
// (pipeline/triage's TestAgentAnswerIsNeverEvidence).
type RunCompleted struct {
	FinalAnswer  string `json:"final_answer,omitempty"`
	AnswerAuthor string `json:"answer_author,omitempty"`
	// AnswerTruncated says FinalAnswer was cut to its bound.
	AnswerTruncated bool `json:"answer_truncated,omitempty"`
}

// AgentTurn is the data of agent.turn: model turn Turn (1-based) of a
// kernel agent run. Sent holds the messages the model received in this
// turn that it had not received before (the input, tool results: a list
// of AgentMessage), Answer its answer (AgentAnswer); both bounded, so the
// run can be audited without holding the whole conversation. Refused
// lists the tool calls of the answer that were never started (invalid
// arguments, a tool not offered, a call id already used: AgentRefusal),
// each with the reason the model was told. The nested members are kept
// raw here and checked for their shape (check).
type AgentTurn struct {
	Turn    int             `json:"turn" reckon:"required"`
	Model   string          `json:"model,omitempty"`
	Sent    json.RawMessage `json:"sent,omitempty"`
	Answer  json.RawMessage `json:"answer" reckon:"required"`
	Refused json.RawMessage `json:"refused,omitempty"`
}

// NewAgentTurn is the data of agent.turn for turn n.
func NewAgentTurn(n int, model string, sent []AgentMessage, answer AgentAnswer, refused []AgentRefusal) (AgentTurn, error) {
	d := AgentTurn{Turn: n, Model: model}
	var err error
	if d.Answer, err = json.Marshal(answer); err != nil {
		return d, err
	}
	if len(sent) > 0 {
		if d.Sent, err = json.Marshal(sent); err != nil {
			return d, err
		}
	}
	if len(refused) > 0 {
		d.Refused, err = json.Marshal(refused)
	}
	return d, err
}

// Decode reads the nested members of an agent.turn.
func (d AgentTurn) Decode() (sent []AgentMessage, answer AgentAnswer, refused []AgentRefusal, err error) {
	if len(d.Sent) > 0 && string(d.Sent) != "null" {
		if err = json.Unmarshal(d.Sent, &sent); err != nil {
			return
		}
	}
	if err = json.Unmarshal(d.Answer, &answer); err != nil {
		return
	}
	if len(d.Refused) > 0 && string(d.Refused) != "null" {
		err = json.Unmarshal(d.Refused, &refused)
	}
	return
}

// AgentMessage is one chat message as agent.turn records it.
type AgentMessage struct {
	Role       string `json:"role"`
	Content    string `json:"content,omitempty"`
	ToolCallID string `json:"tool_call_id,omitempty"`
}

// AgentAnswer is a model's answer as agent.turn records it: a text or
// tool calls (their operation ids are in the tool.started events that
// follow; a refused call has none).
type AgentAnswer struct {
	Content   string          `json:"content,omitempty"`
	ToolCalls []AgentToolCall `json:"tool_calls,omitempty"`
}

// AgentToolCall is one tool call a model asked for.
type AgentToolCall struct {
	ID          string `json:"id"`
	Name        string `json:"name"`
	Arguments   string `json:"arguments,omitempty"`
	OperationID string `json:"operation_id,omitempty"`
}

// AgentRefusal is a tool call of a model's answer that was not started,
// and why (effect none: nothing ran).
type AgentRefusal struct {
	ID     string `json:"id"`
	Reason string `json:"reason"`
}

// RunFailed is the data of run.failed.
type RunFailed struct {
	Error string `json:"error" reckon:"required"`
}

// RunAwaiting is the data of run.awaiting: the run stopped at an
// operation that failed uncertain and waits until a probe or an operator
// settles it (a plan step's on_uncertain: await).
type RunAwaiting struct {
	OperationID string `json:"operation_id" reckon:"required,key"`
	// Until is when the wait ends in run.failed unless the operation is
	// settled first (RFC 3339; the run's RECKON_AWAIT_TIMEOUT after the
	// wait began).
	Until string `json:"until,omitempty"`
}

// RunResumed is the data of run.resumed: the settlement the run waited
// for arrived and the run goes on (effect occurred: the step counts as
// done; none: it is issued again as a new operation; an operator's
// unknown: the run fails naming the operation).
type RunResumed struct {
	OperationID string `json:"operation_id" reckon:"required,key"`
	Effect      string `json:"effect" reckon:"required"`
	// Reconciliation is the key of the operation.reconciled that settled
	// the operation; Basis is its basis (probe or operator).
	Reconciliation *EventKey `json:"reconciliation" reckon:"required"`
	Basis          string    `json:"basis,omitempty"`
}

// ToolStarted is the data of tool.started.
type ToolStarted struct {
	OperationID string          `json:"operation_id" reckon:"required,key"`
	Tool        string          `json:"tool" reckon:"required"`
	Args        json.RawMessage `json:"args,omitempty"`
	Attempt     int             `json:"attempt,omitempty"`
	// ReissueOf names the operation this one re-issues after an
	// uncertain failure (a plan step's on_uncertain: reissue).
	ReissueOf string `json:"reissue_of,omitempty"`
	// Postcondition is the plan step's declared postcondition
	// ({"path", "sha256"?} for run_command), copied for probes; the
	// kernel does not interpret it.
	Postcondition json.RawMessage `json:"postcondition,omitempty"`
	// ChildRunID names the child run of a delegation (ChildRunID).
	ChildRunID string `json:"child_run_id,omitempty"`
	// Server and UpstreamTool name where the MCP gateway, or the kernel
	// (runs since runner.ChangeRecordServer), sent the call: the server
	// and its own name for the tool (Tool is mcp__<tool>, as the kernel
	// names MCP tools).
	Server       string `json:"server,omitempty"`
	UpstreamTool string `json:"upstream_tool,omitempty"`
	// ServerEndpoint is the endpoint identity of Server where the call
	// went (mcptool.ServerConfig.Endpoint: a digest of its URL, or of its
	// command and arguments): a probe whose server of that name has
	// another does not ask it. Absent from events recorded before it, and
	// from calls of a server that cannot tell it.
	ServerEndpoint string `json:"server_endpoint,omitempty"`
	// WorkspaceManifest summarises the run's workspace as the kernel
	// recorded it just before a workspace tool ran (kernel/manifest); the
	// entries are stored beside the run, not in the event.
	WorkspaceManifest *WorkspaceManifest `json:"workspace_manifest,omitempty"`
}

// WorkspaceManifest is the summary of one workspace manifest that
// tool.started and tool.completed carry: its digest and counts. Two
// manifests with the same digest describe the same workspace; the full
// entry list (which paths, with what metadata) is kept by the kernel in
// kernel_workspace_manifests, keyed by run, operation and phase.
type WorkspaceManifest struct {
	Digest string `json:"digest" reckon:"required"`
	Files  int    `json:"files"`
	Dirs   int    `json:"dirs"`
	Other  int    `json:"other"`
	Bytes  int64  `json:"bytes"`
	// Hashed counts the files whose content was hashed because their
	// metadata could not decide (written just before the walk).
	Hashed int `json:"hashed"`
	// Truncated says the walk stopped at a cap (RECKON_MANIFEST_MAX_FILES,
	// RECKON_MANIFEST_BUDGET) or failed: the manifest is incomplete and
	// proves nothing.
	Truncated string `json:"truncated,omitempty"`
}

// ToolCompleted is the data of tool.completed.
type ToolCompleted struct {
	OperationID   string `json:"operation_id" reckon:"required,key"`
	ResultSummary string `json:"result_summary,omitempty"`
	// ChildRunID names the child run of a completed delegation.
	ChildRunID string `json:"child_run_id,omitempty"`
	// WorkspaceManifest summarises the workspace just after a workspace
	// tool completed (see ToolStarted.WorkspaceManifest).
	WorkspaceManifest *WorkspaceManifest `json:"workspace_manifest,omitempty"`
	// ClientRequests are what the MCP gateway asked the agent's MCP client
	// for while the call was in flight (an upstream's sampling, elicitation
	// or roots request), in order, each "<method>: <outcome>" — an
	// elicitation's action (accept, decline, cancel), "answered", or
	// "failed: <error>".
	ClientRequests []string `json:"client_requests,omitempty"`
}

// ToolFailed is the data of tool.failed.
type ToolFailed struct {
	OperationID        string `json:"operation_id" reckon:"required,key"`
	ErrorType          string `json:"error_type" reckon:"required"`
	Error              string `json:"error"`
	Effect             string `json:"effect,omitempty"`
	ChildRunID         string `json:"child_run_id,omitempty"`
	ChildOpsTotal      *int   `json:"child_ops_total,omitempty"`
	ChildOpsUnresolved *int   `json:"child_ops_unresolved,omitempty"`
	// ChildOpsNone and ChildOpsUnknown count the child's settled
	// operations whose last settling event says effect none and unknown
	// (kernel.ChildSummary's None and Unknown); omitted when 0, as in
	// failures recorded before they were counted. Without them the counts
	// would say "all settled" of a child whose operation was ruled
	// unknown, and a reader infer occurred where the kernel said uncertain.
	ChildOpsNone    int `json:"child_ops_none,omitempty"`
	ChildOpsUnknown int `json:"child_ops_unknown,omitempty"`
	// ClientRequests: see ToolCompleted.ClientRequests.
	ClientRequests []string `json:"client_requests,omitempty"`
}

// EffectiveEffect applies the legacy rule: a tool.failed without an effect
// but with error_type=activity_failed counts as uncertain. Any other missing
// effect is also read as uncertain: an unclassified failure proves nothing.
func (f ToolFailed) EffectiveEffect() string {
	if f.Effect == "" {
		return EffectUncertain
	}
	return f.Effect
}

// Settles reports whether this failure settles its operation.
func (f ToolFailed) Settles() bool {
	e := f.EffectiveEffect()
	return e == EffectNone || e == EffectOccurred
}

// ChildSummary returns the child-run counts the failure carries, nil
// unless it carries both.
func (f ToolFailed) ChildSummary() *ChildSummary {
	if f.ChildOpsTotal == nil || f.ChildOpsUnresolved == nil {
		return nil
	}
	return &ChildSummary{Total: *f.ChildOpsTotal, Unresolved: *f.ChildOpsUnresolved, None: f.ChildOpsNone, Unknown: f.ChildOpsUnknown}
}

// WithChildSummary returns f carrying c's counts (ChildSummary reads them
// back); a nil c leaves f as it is.
func (f ToolFailed) WithChildSummary(c *ChildSummary) ToolFailed {
	if c != nil {
		f.ChildOpsTotal, f.ChildOpsUnresolved = &c.Total, &c.Unresolved
		f.ChildOpsNone, f.ChildOpsUnknown = c.None, c.Unknown
	}
	return f
}

// ToolBlocked is the data of tool.blocked.
type ToolBlocked struct {
	OperationID string `json:"operation_id" reckon:"required,key"`
	Reason      string `json:"reason" reckon:"required"`
	// Guard, EarlierRunID and EarlierOperationID, on a call the retry
	// guard stopped (the MCP gateway's), say its decision (hold or done)
	// and the earlier operation with the same effect key.
	Guard              string `json:"guard,omitempty"`
	EarlierRunID       string `json:"earlier_run_id,omitempty"`
	EarlierOperationID string `json:"earlier_operation_id,omitempty"`
}

// Reconciliation is the data of operation.reconciled: what became of one
// operation, decided by an operator (basis operator: an operator's ruling)
// or by the supervisor (basis inference or probe).
type Reconciliation struct {
	OperationID string          `json:"operation_id" reckon:"required,key"`
	Effect      string          `json:"effect" reckon:"required"`
	Note        string          `json:"note"`
	Basis       string          `json:"basis" reckon:"required"`
	Supersedes  *EventKey       `json:"supersedes,omitempty"`
	Evidence    json.RawMessage `json:"evidence,omitempty"`
	// ProposedEffect, on a supervisor's unknown, is the occurred or none the
	// supervisor proposed by inference and the settlement policy did not
	// let settle (RECKON_SUPERVISOR_SETTLE=evidence): a hint for the
	// operator who decides, never a verdict.
	ProposedEffect string `json:"proposed_effect,omitempty"`
}

// Verdict is the data of supervisor.verdict: the supervisor's integrated
// conclusion on one wall (its per-operation effects are recorded as
// Reconciliations).
type Verdict struct {
	Kind           string   `json:"kind" reckon:"required"`
	NeedsAttention bool     `json:"needs_attention"`
	Causes         []string `json:"causes"`
	Remedies       []string `json:"remedies"`
	Lesson         string   `json:"lesson"`
	OperationIDs   []string `json:"operation_ids" reckon:"required"`
	Supervisor     string   `json:"supervisor" reckon:"required"`
	Model          string   `json:"model"`
	PromptVersion  string   `json:"prompt_version"`
	WallDigest     string   `json:"wall_digest"`
	// Part and Parts say which slice of an oversized pile this verdict
	// covers; both are 1 for an ordinary wall.
	Part  int `json:"part,omitempty"`
	Parts int `json:"parts,omitempty"`
	// SettlePolicy is the settlement policy the sweep applied to the
	// supervisor's decision (evidence or inference); absent on verdicts
	// recorded before the policy existed, which settled as inference does.
	SettlePolicy string `json:"settle_policy,omitempty"`
}

// VerdictKindReconciliation is the only supervisor.verdict kind so far.
const VerdictKindReconciliation = "reconciliation"

// DataUnconfined is the data field a worker running run_command without
// bubblewrap (RECKON_SANDBOX_UNCONFINED=1) adds, true, to every event it
// records, whatever its type.
const DataUnconfined = "unconfined"

// dataRules is implemented by the data types that have rules beyond field
// types and presence (vocabularies, bounds, the envelope fields the type
// requires). has reports whether data carried a field with a value other
// than null (null is absent).
type dataRules interface {
	check(e Event, has func(field string) bool) error
}

// newData returns a pointer to a fresh value of the data type of typ, nil
// for an unknown type. run.completed carries no data of its own.
func newData(typ string) any {
	switch typ {
	case TypeRunStarted:
		return new(RunStarted)
	case TypeRunCompleted:
		return new(RunCompleted)
	case TypeAgentTurn:
		return new(AgentTurn)
	case TypeRunFailed:
		return new(RunFailed)
	case TypeRunAwaiting:
		return new(RunAwaiting)
	case TypeRunResumed:
		return new(RunResumed)
	case TypeToolStarted:
		return new(ToolStarted)
	case TypeToolCompleted:
		return new(ToolCompleted)
	case TypeToolFailed:
		return new(ToolFailed)
	case TypeToolBlocked:
		return new(ToolBlocked)
	case TypeOperationReconciled:
		return new(Reconciliation)
	case TypeSupervisorVerdict:
		return new(Verdict)
	}
	return nil
}

func (d *ToolFailed) check(e Event, has func(string) bool) error {
	if has("effect") && !ValidToolFailedEffect(d.Effect) {
		return fieldErr(e, "data.effect", "must be none, uncertain or occurred, got %q", d.Effect)
	}
	return nil
}

func (d *AgentTurn) check(e Event, _ func(string) bool) error {
	// Raw members are not filled by the field decoding: read them whole.
	var full AgentTurn
	if err := json.Unmarshal(e.Data, &full); err != nil {
		return fieldErr(e, "data", "must be an agent turn: %v", err)
	}
	if _, _, _, err := full.Decode(); err != nil {
		return fieldErr(e, "data", "sent, answer and refused must be an agent turn's messages, answer and refusals: %v", err)
	}
	return nil
}

func (d *RunAwaiting) check(e Event, has func(string) bool) error {
	if has("until") {
		if _, err := time.Parse(time.RFC3339Nano, d.Until); err != nil {
			return fieldErr(e, "data.until", "must be an RFC 3339 time, got %q", d.Until)
		}
	}
	return nil
}

func (d *RunResumed) check(e Event, has func(string) bool) error {
	if !ValidReconciledEffect(d.Effect) {
		return fieldErr(e, "data.effect", "must be none, occurred or unknown (the settlement's effect), got %q", d.Effect)
	}
	if has("basis") && !ValidBasis(d.Basis) {
		return fieldErr(e, "data.basis", "must be operator, inference or probe, got %q", d.Basis)
	}
	return nil
}

func (d *Reconciliation) check(e Event, has func(string) bool) error {
	if !ValidReconciledEffect(d.Effect) {
		return fieldErr(e, "data.effect", "must be none, occurred or unknown, got %q", d.Effect)
	}
	if len(d.Note) > MaxNoteBytes {
		return fieldErr(e, "data.note", "is %d bytes; at most %d are allowed", len(d.Note), MaxNoteBytes)
	}
	if !ValidBasis(d.Basis) {
		return fieldErr(e, "data.basis", "must be operator, inference or probe, got %q", d.Basis)
	}
	if has("proposed_effect") {
		if d.ProposedEffect != EffectNone && d.ProposedEffect != EffectOccurred {
			return fieldErr(e, "data.proposed_effect", "must be none or occurred, got %q", d.ProposedEffect)
		}
		if d.Effect != EffectUnknown {
			return fieldErr(e, "data.proposed_effect", "is only allowed with effect unknown (a proposal that did not settle), got effect %q", d.Effect)
		}
	}
	if e.ParentEventID == nil {
		return fieldErr(e, "parent_event_id", "is required for operation.reconciled (the operation's tool.started key)")
	}
	return nil
}

func (d *Verdict) check(e Event, _ func(string) bool) error {
	if d.Kind != VerdictKindReconciliation {
		return fieldErr(e, "data.kind", "must be %q, got %q", VerdictKindReconciliation, d.Kind)
	}
	return nil
}
