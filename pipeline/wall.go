// Package pipeline holds the types of triage: the wall a supervisor sees
// (one run's pile of unsettled operations with their evidence), the
// decision it returns (its effect answers, one per operation), and the
// Supervisor interface. The triage sweep (pipeline/triage), the
// supervisors and the probes live in sub-packages.
package pipeline

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"math"
	"strings"
	"time"

	"github.com/seed-7bc021c3/reckon/kernel"
)

// Wall is one run's pile of unsettled operations, as the supervisor sees it.
// It never carries an agent-authored final answer as evidence.
type Wall struct {
	Project string `json:"project"`
	RunID   string `json:"run_id"`
	// Part and Parts number the slices of an oversized pile (1 of 1 normally).
	Part            int              `json:"part"`
	Parts           int              `json:"parts"`
	Operations      []WallOperation  `json:"operations"`
	EarlierVerdicts []EarlierVerdict `json:"earlier_verdicts,omitempty"`
	// BuiltAt is when the wall was assembled; ages are relative to it.
	BuiltAt time.Time `json:"built_at"`
	// Digest is the SHA-256 of the wall's canonical JSON without Digest.
	Digest string `json:"digest"`
}

// WallOperation is one unsettled operation with everything known about it.
//
// Who wrote each fact matters: only the kernel's own events are facts (an
// external agent's report about its own call is a claim). The tool.started
// fields (tool, args, postcondition, reissue_of) were written by
// StartedKey.SourceID; AgentReported says that source is not the kernel.
// The failure and the child summary say who reported them on their own.
type WallOperation struct {
	OperationID string          `json:"operation_id"`
	Tool        string          `json:"tool"`
	State       string          `json:"state"` // crash_window | stale_in_flight | failed_uncertain
	StartedAt   time.Time       `json:"started_at"`
	AgeSeconds  int64           `json:"age_seconds"`
	Args        json.RawMessage `json:"args,omitempty"`
	StartedKey  kernel.EventKey `json:"started_key"`
	Failure     *WallFailure    `json:"failure,omitempty"`
	ChildRunID  string          `json:"child_run_id,omitempty"`
	ChildOps    *ChildSummary   `json:"child_summary,omitempty"`
	Evidence    []Evidence      `json:"evidence,omitempty"`
	ReissueOf   string          `json:"reissue_of,omitempty"`
	// Postcondition is the plan step's declared postcondition, carried in
	// tool.started data ({"path", "sha256"?} for run_command).
	Postcondition json.RawMessage `json:"postcondition,omitempty"`
	// AgentReported is true when the operation's tool.started was reported
	// by an external agent, not the kernel: its tool, args and
	// postcondition are the agent's account, never evidence.
	AgentReported bool `json:"agent_reported,omitempty"`
	// Server and UpstreamTool say where the MCP gateway sent the call (its
	// tool.started's server and upstream_tool), so that the MCP probes ask
	// that server rather than the first configured one offering the tool,
	// which need not be the one the gateway called. The kernel records
	// them too since runner.ChangeRecordServer. Empty for its calls from
	// before, and on walls recorded before them (omitted, so their digests
	// stand).
	Server       string `json:"server,omitempty"`
	UpstreamTool string `json:"upstream_tool,omitempty"`
	// ServerEndpoint is Server's endpoint identity where the call went
	// (tool.started's server_endpoint): the MCP probes do not ask a
	// server of that name configured with another. Empty for events
	// recorded before it (omitted, so those walls' digests stand).
	ServerEndpoint string `json:"server_endpoint,omitempty"`
	// JournaledAt is the journal's commit time of the operation's
	// tool.started, on the database's clock: what the probes measure a
	// wait from (precondition.go). Absent on walls recorded before it.
	JournaledAt *time.Time `json:"journaled_at,omitempty"`
}

// MCPTarget is the MCP tool the probes ask about: mcp__<server>__<tool>
// when the operation names the server the gateway called, its Tool
// otherwise.
func (o WallOperation) MCPTarget() string {
	if o.Server == "" {
		return o.Tool
	}
	name := o.UpstreamTool
	if name == "" {
		name = strings.TrimPrefix(o.Tool, kernel.MCPPrefix)
	}
	return kernel.MCPToolName(o.Server, name)
}

// WallFailure is the operation's tool.failed, when there is one.
type WallFailure struct {
	ErrorType string `json:"error_type"`
	Error     string `json:"error"`
	Effect    string `json:"effect"`
	// ReportedBy is the source_id of the tool.failed. Walls recorded before
	// this field lack it; Source then falls back to the tool.started's.
	ReportedBy string `json:"reported_by,omitempty"`
	// AgentReported is true when an external agent, not the kernel,
	// reported the failure: its error type and effect are a claim.
	AgentReported bool `json:"agent_reported,omitempty"`
}

// ChildSummary is a delegated child run's counts (kernel.ChildSummary) with
// who reported them.
type ChildSummary struct {
	kernel.ChildSummary
	// ReportedBy is the source_id of the tool.failed that carried the
	// counts. Empty with Counted (the listing counted the child run's
	// events itself) and in walls recorded before this field (Source then
	// falls back to the tool.started's).
	ReportedBy string `json:"reported_by,omitempty"`
	// AgentReported is true when an external agent reported the counts.
	AgentReported bool `json:"agent_reported,omitempty"`
	// Counted is true when no failure carried the counts and the listing
	// counted the child run's operations at listing time (a delegation in
	// the crash window): nobody checked that the child had ended.
	Counted bool `json:"counted_by_listing,omitempty"`
}

// FailureSource returns who reported the operation's failure (the
// tool.failed's source_id), "" without a failure. Walls recorded before
// reported_by existed come from kernel drills, where one source reported
// every event of an operation: the tool.started's source stands in.
func (op WallOperation) FailureSource() string {
	if op.Failure == nil {
		return ""
	}
	if op.Failure.ReportedBy != "" {
		return op.Failure.ReportedBy
	}
	return op.StartedKey.SourceID
}

// ChildSummarySource returns who reported the child summary: the source of
// the tool.failed that carried it, "" when there is none or the listing
// counted it (see ChildSummary.Counted). Old walls fall back as for
// FailureSource.
func (op WallOperation) ChildSummarySource() string {
	c := op.ChildOps
	if c == nil || c.Counted {
		return ""
	}
	if c.ReportedBy != "" {
		return c.ReportedBy
	}
	return op.StartedKey.SourceID
}

// KernelFailure returns the operation's failure when the kernel reported
// it — a fact — and nil when there is none or an agent reported it (a
// claim).
func (op WallOperation) KernelFailure() *WallFailure {
	if op.FailureSource() == kernel.SourceKernel {
		return op.Failure
	}
	return nil
}

// KernelChildSummary returns the child summary when the kernel reported it
// with its failure, nil otherwise.
func (op WallOperation) KernelChildSummary() *ChildSummary {
	if op.ChildSummarySource() == kernel.SourceKernel {
		return op.ChildOps
	}
	return nil
}

// Findings of a probe.
const (
	FindingOccurred     = "occurred"     // downstream state proves the effect landed
	FindingNone         = "none"         // downstream state proves it did not
	FindingInconclusive = "inconclusive" // the probe could not tell
	// FindingUnavailable: the probe could not reach its evidence now (a
	// workspace it cannot read, a server it cannot reach). The sweep
	// leaves such an operation unsettled for a later sweep instead of
	// walling it: an unreachable probe is no reason to record unknown.
	FindingUnavailable = "unavailable"
)

// Evidence is what a probe established about an operation, with provenance:
// a proof is evidence; an inference is never presented as one.
type Evidence struct {
	Probe      string          `json:"probe"`   // e.g. mcp.lookup_operation, workspace.postcondition, journal.child_run
	Finding    string          `json:"finding"` // occurred | none | inconclusive | unavailable
	Detail     string          `json:"detail"`
	Provenance json.RawMessage `json:"provenance,omitempty"`
	// ObservedAt is when the probe read the state: on the database's
	// clock (pipeline.Clock) since probes measure on it, on the sweeper's
	// in walls recorded before.
	ObservedAt time.Time `json:"observed_at"`
	// RecheckAfter, on an inconclusive finding, is when the probe can tell:
	// the execution could still land its effect until then, so absence is
	// no proof yet. The sweep leaves such an operation for a later sweep
	// instead of having it decided (and settled) as unknown now. On the
	// clock of ObservedAt.
	RecheckAfter *time.Time `json:"recheck_after,omitempty"`
	// Preconditions are what a decisive finding rests on beyond the state
	// the probe read (precondition.go): a finding whose probe needs them
	// and does not carry them proves nothing.
	Preconditions *Preconditions `json:"preconditions,omitempty"`
}

// EarlierVerdict is a supervisor.verdict recorded for the run before.
type EarlierVerdict struct {
	Key     kernel.EventKey `json:"key"`
	TS      time.Time       `json:"ts"`
	Verdict kernel.Verdict  `json:"verdict"`
}

// EffectAnswer is the supervisor's answer about one operation's effect, one
// per operation of a Decision; the sweep journals it as that operation's
// operation.reconciled (a kernel.Reconciliation). The integrated decision
// is journaled as supervisor.verdict (a kernel.Verdict).
type EffectAnswer struct {
	OperationID string `json:"operation_id"`
	Effect      string `json:"effect"` // none | occurred | unknown
	Note        string `json:"note"`
	// Basis is inference, or probe when a probe's evidence proved it.
	Basis string `json:"basis"`
	// ProposedEffect is set by settlement only (supervisor.Settle), never
	// by a supervisor: the occurred or none the supervisor proposed when
	// the settlement policy recorded unknown instead, since no evidence
	// proved it.
	ProposedEffect string `json:"proposed_effect,omitempty"`
}

// Usage counts model tokens; zero for the built-in supervisor.
type Usage struct {
	PromptTokens     int `json:"prompt_tokens"`
	CompletionTokens int `json:"completion_tokens"`
}

// Total is the tokens spent. The counts come from a model server: a
// negative one counts as nothing and the sum stops at the largest int, so
// that no answer can wrap the sweep's spend around below its token budget.
func (u Usage) Total() int {
	return AddTokens(max(u.PromptTokens, 0), max(u.CompletionTokens, 0))
}

// AddTokens adds two token counts that are not negative, stopping at the
// largest int instead of wrapping around to a negative sum.
func AddTokens(a, b int) int {
	if a > math.MaxInt-b {
		return math.MaxInt
	}
	return a + b
}

// Decision is a supervisor's integrated conclusion on one wall.
type Decision struct {
	NeedsAttention bool           `json:"needs_attention"`
	Causes         []string       `json:"causes"`
	Remedies       []string       `json:"remedies"`
	Lesson         string         `json:"lesson"`
	Operations     []EffectAnswer `json:"operations"`
	Supervisor     string         `json:"supervisor"`
	Model          string         `json:"model"`
	PromptVersion  string         `json:"prompt_version"`
	Usage          Usage          `json:"usage"`
	// SettlePolicy is the settlement policy applied to the decision
	// (supervisor.Settle); empty on a decision as the supervisor made it.
	SettlePolicy string `json:"settle_policy,omitempty"`
}

// Supervisor turns a wall into a decision. Implementations must not write
// anything; the sweep validates and journals.
type Supervisor interface {
	Name() string
	Decide(ctx context.Context, w Wall) (Decision, error)
}

// ComputeDigest returns the SHA-256 (hex) of the wall's canonical JSON with
// Digest cleared: exactly what the supervisor was shown, so a verdict's
// wall_digest identifies its input.
func (w Wall) ComputeDigest() (string, error) {
	w.Digest = ""
	raw, err := json.Marshal(w)
	if err != nil {
		return "", fmt.Errorf("wall %s/%s: marshal: %w", w.Project, w.RunID, err)
	}
	canon, err := kernel.Canonical(raw)
	if err != nil {
		return "", fmt.Errorf("wall %s/%s: canonical: %w", w.Project, w.RunID, err)
	}
	sum := sha256.Sum256(canon)
	return hex.EncodeToString(sum[:]), nil
}

// OperationIDs lists the wall's operation ids in wall order.
func (w Wall) OperationIDs() []string {
	ids := make([]string, len(w.Operations))
	for i, op := range w.Operations {
		ids[i] = op.OperationID
	}
	return ids
}

// Operation returns the wall's operation with id, if present.
func (w Wall) Operation(id string) (WallOperation, bool) {
	for _, op := range w.Operations {
		if op.OperationID == id {
			return op, true
		}
	}
	return WallOperation{}, false
}
