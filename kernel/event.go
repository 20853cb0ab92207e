// Package kernel holds reckon's primitive domain types: the event model that
// every other package speaks, its validation, canonical payload comparison and
// the error type the HTTP layer maps to status codes. It imports nothing of the
// project so that every other package can depend on it.
package kernel

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"
)

// Event types of the journal. The vocabulary is closed: an event of any other
// type is rejected at the boundary.
const (
	TypeRunStarted   = "run.started"
	TypeRunCompleted = "run.completed"
	TypeRunFailed    = "run.failed"
	// TypeRunAwaiting and TypeRunResumed bracket a kernel run's wait for
	// the settlement of an operation that failed uncertain (a plan step's
	// on_uncertain: await): see RunAwaiting and RunResumed.
	TypeRunAwaiting = "run.awaiting"
	TypeRunResumed  = "run.resumed"
	// TypeAgentTurn records one model turn of a kernel agent run: what
	// the model was sent that it had not seen, and its answer, bounded
	// (AgentTurn). Its content is the model's, a claim and never
	// evidence of an effect.
	TypeAgentTurn = "agent.turn"

	TypeToolStarted         = "tool.started"
	TypeToolCompleted       = "tool.completed"
	TypeToolFailed          = "tool.failed"
	TypeToolBlocked         = "tool.blocked"
	TypeOperationReconciled = "operation.reconciled"
	TypeSupervisorVerdict   = "supervisor.verdict"
)

// KnownTypes lists every event type the journal accepts.
var KnownTypes = []string{
	TypeRunStarted, TypeRunCompleted, TypeRunFailed, TypeRunAwaiting, TypeRunResumed, TypeAgentTurn,
	TypeToolStarted, TypeToolCompleted, TypeToolFailed, TypeToolBlocked,
	TypeOperationReconciled, TypeSupervisorVerdict,
}

// SourceKernel is the source_id under which the kernel reports its own events
// and every reconciliation, an operator's ruling or the supervisor's.
const SourceKernel = "kernel"

// Effects of a failed tool call (tool.failed.data.effect).
const (
	EffectNone      = "none"
	EffectUncertain = "uncertain"
	EffectOccurred  = "occurred"
	// EffectUnknown is a reconciliation verdict only: a legitimate terminal
	// record that nobody could establish what happened.
	EffectUnknown = "unknown"
)

// Bases of a reconciliation: who or what established the verdict.
const (
	BasisOperator  = "operator"
	BasisInference = "inference"
	BasisProbe     = "probe"
)

// Actors: who wrote an event (the envelope's actor).
const (
	ActorKernel     = "kernel"
	ActorAgent      = "agent"
	ActorSupervisor = "supervisor"
	// ActorOperatorPrefix starts an operator's actor, operator:<name>.
	ActorOperatorPrefix = "operator:"
)

// OperatorActor is the actor of an operator's ruling: operator:<name>.
func OperatorActor(name string) string { return ActorOperatorPrefix + name }

// IsOperator reports whether actor names an operator (operator:<name>).
func IsOperator(actor string) bool {
	return strings.HasPrefix(actor, ActorOperatorPrefix) && len(actor) > len(ActorOperatorPrefix)
}

// MaxNoteBytes bounds operation.reconciled.data.note.
const MaxNoteBytes = 2000

// EventKey is the idempotency key of an event: unique (source_id, event_id).
type EventKey struct {
	SourceID string `json:"source_id"`
	EventID  string `json:"event_id"`
}

// String renders the key as source_id/event_id for logs and messages.
func (k EventKey) String() string { return k.SourceID + ":" + k.EventID }

// Event is one fact in the journal. Data holds the type-specific payload as
// raw JSON so that unknown extra fields survive every hop unchanged.
type Event struct {
	SourceID      string          `json:"source_id"`
	EventID       string          `json:"event_id"`
	Project       string          `json:"project"`
	RunID         string          `json:"run_id"`
	Type          string          `json:"type"`
	TS            time.Time       `json:"ts"`
	Actor         string          `json:"actor"`
	ParentEventID *EventKey       `json:"parent_event_id"`
	Data          json.RawMessage `json:"data"`
}

// StoredEvent is an event as read back from the journal, with its
// position there (seq: journal order, which is delivery order). Readers
// above the kernel (the triage sweep, the probes) take a run's events in
// this form without knowing how the journal stores them.
type StoredEvent struct {
	Event
	Seq int64 `json:"-"`
	// IngestedAt is when the journal took the event, on the database's
	// clock (its now() in the writing transaction): the one clock the
	// probes measure waits on, unlike TS, which its writer's clock gave.
	IngestedAt time.Time `json:"-"`
}

// Key returns the idempotency key of the event.
func (e Event) Key() EventKey { return EventKey{SourceID: e.SourceID, EventID: e.EventID} }

// OperationID returns data.operation_id for tool.* and operation.reconciled
// events, or "" when the event carries none. It reads the member exactly as
// Prepare does for the journal's operation_id column (dataString).
func (e Event) OperationID() string { return dataString(e.Data, "operation_id") }

// dataString is data's top-level string member name, read as Prepare reads
// operation_id and effect for the journal's operation_id and settles
// columns: by its exact name. encoding/json matched names without regard
// to case, and data keeps members no type declares, so an agent's
// tool.failed carrying "effect": "uncertain" and "EFFECT": "occurred" was
// settled in Go and unsettled in the journal's column (listed for ever,
// never walled); the two readings now agree. "" when data is not a JSON
// object or has no such string member.
func dataString(data json.RawMessage, name string) string {
	d := bytes.TrimSpace(data)
	if len(d) == 0 || d[0] != '{' || !json.Valid(d) {
		return ""
	}
	v, _ := fieldsOf(d, func(n []byte) bool { return string(n) == name }).str(name)
	return v
}

// DecodeData unmarshals the event's data into v.
func (e Event) DecodeData(v any) error {
	if len(e.Data) == 0 {
		return json.Unmarshal([]byte("{}"), v)
	}
	if err := json.Unmarshal(e.Data, v); err != nil {
		return fmt.Errorf("decode %s data of %s: %w", e.Type, e.Key(), err)
	}
	return nil
}

// NewEvent builds an event whose data is marshalled from v.
func NewEvent(source, eventID, project, runID, typ, actor string, ts time.Time, data any) (Event, error) {
	raw, err := json.Marshal(data)
	if err != nil {
		return Event{}, fmt.Errorf("marshal %s data: %w", typ, err)
	}
	return Event{
		SourceID: source, EventID: eventID, Project: project, RunID: runID,
		Type: typ, TS: ts.UTC(), Actor: actor, Data: raw,
	}, nil
}

// Settles reports whether the event is terminal for its operation: the
// operation can never again be unresolved once this event is in the journal.
// tool.failed settles only with effect none or occurred; uncertain (and the
// legacy activity_failed without an effect) leaves it unresolved.
func (e Event) Settles() bool {
	if e.Type != TypeToolFailed {
		return settles(e.Type, "")
	}
	return settles(e.Type, dataString(e.Data, "effect"))
}

// settles is the one rule of which events settle their operation; effect
// matters only for tool.failed. The operations listing's SQL reads the
// journal's settles column, which ingest fills from this rule.
func settles(typ, effect string) bool {
	switch typ {
	case TypeToolCompleted, TypeToolBlocked, TypeOperationReconciled:
		return true
	case TypeToolFailed:
		return ToolFailed{Effect: effect}.Settles()
	}
	return false
}

// ValidToolFailedEffect reports whether s is a tool.failed effect.
func ValidToolFailedEffect(s string) bool {
	return s == EffectNone || s == EffectUncertain || s == EffectOccurred
}

// ValidReconciledEffect reports whether s is an operation.reconciled effect.
func ValidReconciledEffect(s string) bool {
	return s == EffectNone || s == EffectOccurred || s == EffectUnknown
}

// ValidBasis reports whether s is a reconciliation basis.
func ValidBasis(s string) bool {
	return s == BasisOperator || s == BasisInference || s == BasisProbe
}

// validActor accepts kernel, agent, supervisor and operator:<name>.
func validActor(s string) bool {
	switch s {
	case ActorKernel, ActorAgent, ActorSupervisor:
		return true
	}
	return IsOperator(s)
}

// Ingest statuses: what the journal answers per event.
const (
	StatusAccepted = "accepted" // new: written
	StatusRepeated = "repeated" // same key, same payload: a no-op
	StatusConflict = "conflict" // same key, different payload: nothing overwritten
)

// IngestResult is the journal's answer for one event.
type IngestResult struct {
	SourceID string `json:"source_id"`
	EventID  string `json:"event_id"`
	Status   string `json:"status"`
	// Reason explains a conflict; empty otherwise.
	Reason string `json:"reason,omitempty"`
}

// RunKey names a run: run ids are unique per project only.
type RunKey struct {
	Project string `json:"project"`
	RunID   string `json:"run_id"`
}

// ParseRunKey reads a {"project", "run_id"} announcement (a PostgreSQL
// notification's payload); ok is false unless both are set.
func ParseRunKey(payload string) (k RunKey, ok bool) {
	if json.Unmarshal([]byte(payload), &k) != nil || k.Project == "" || k.RunID == "" {
		return RunKey{}, false
	}
	return k, true
}

// RunOwners tells who writes a run's events. A kernel run is one started
// through POST /v1/runs, or a child run beneath one (its id extends the
// parent's with the child-run separator). Only the kernel writes a kernel
// run's events, and only a kernel run has a workspace the kernel made. A
// gateway run is one the MCP gateway (reckon mcp-gateway) records its
// calls in; only the gateway writes its events. Every other run is an
// agent's, reported through POST /v1/events, and belongs to the source of
// its first event, or, before it has any, to the owner of the nearest run
// its id descends from that has one: only that source writes its events.
type RunOwners interface {
	// KernelRuns returns the subset of runs that are kernel runs.
	KernelRuns(ctx context.Context, runs []RunKey) (map[RunKey]bool, error)
	// RunWriters returns, for the runs of runs that have one, who writes
	// their events: the recorder of a kernel or gateway run (or of a run
	// beneath one), or the owning source of an agent's run.
	RunWriters(ctx context.Context, runs []RunKey) (map[RunKey]RunWriter, error)
}

// RunWriter is who writes a run's events (RunOwners.RunWriters).
type RunWriter struct {
	// Recorder is RecorderKernel or RecorderGateway for a run reckon
	// records itself; no caller of POST /v1/events writes into it.
	Recorder string
	// Source is, for an agent's run, the source that owns it (its first
	// event's); only events of that source are written into it. A run
	// nobody has claimed belongs to the owner of the nearest run its id
	// descends from (kernel.RunAncestry) that has one: an agent's child
	// runs are its own.
	Source string
	// SourceRun is the run whose owner Source is: the run itself, or the
	// run it descends from that it inherits Source from.
	SourceRun string
}

// The recorders of RunWriter.
const (
	// RecorderKernel records kernel runs (POST /v1/runs).
	RecorderKernel = "kernel"
	// RecorderGateway records the MCP gateway's runs (reckon mcp-gateway).
	RecorderGateway = "mcp-gateway"
)

// Journal ingests batches of events idempotently. It answers one result per
// event, in order. The publisher delivers through this interface, whether the
// journal is in-process or behind the HTTP ingest API.
type Journal interface {
	Ingest(ctx context.Context, events []Event) ([]IngestResult, error)
}

// GuardedJournal is a Journal that can apply the runs' writers
// (RunOwners.RunWriters) atomically with writing the events: a RunOwners
// check before the write cannot see a run started, claimed or first
// written between the check and the write.
type GuardedJournal interface {
	Journal
	// IngestAgentEvents is Ingest that refuses the whole call, with
	// an EForbidden naming the run, when an event lies in a kernel run or a
	// gateway run, or in one being started or claimed at that moment, or
	// in an agent's run that another source owns (a run nobody has claimed
	// belongs to the owner of its nearest owned ancestor); an event into
	// an agent's run that has no owner yet claims it for its source.
	IngestAgentEvents(ctx context.Context, events []Event) ([]IngestResult, error)
}
