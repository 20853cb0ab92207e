// Package fault injects crash-style faults into tool executions for drills
// (KERNEL_FAULT_AFTER_EFFECT, KERNEL_FAULT_BEFORE_EFFECT) and records what
// truly happened in kernel_fault_records, which drills and evals read and
// which no API serves: the supervisor must judge from the journal alone.
//
// An after-effect fault lets the tool commit its effect for real and then
// fails the execution the way a worker crash would; its truth is
// "occurred". A before-effect fault fails the execution before the tool
// runs; its truth is "none". Both look the same in the journal:
// tool.failed with effect=uncertain.
package fault

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/seed-7bc021c3/reckon/kernel"
)

// Fault kinds, stored in kernel_fault_records.fault.
const (
	AfterEffect  = "after_effect"
	BeforeEffect = "before_effect"
	// Lost is a drill's own fault: the run's workflow and worker are both
	// lost while a tool executes, so no terminal event is ever recorded
	// (the crash window). The drill observes the truth once the tool's
	// process is gone and records it with RecordObserved.
	Lost = "lost"
	// Observed is the truth a drill observed of an operation it injected
	// no fault into: an external agent's call it made in the agent's
	// place, or a command that ran on after its call timed out, seen once
	// it ended. Recorded with RecordObserved.
	Observed = "observed"
)

// Config names what to fault: an operation id ("op-2") or a tool name
// ("run_command", "mcp__create_issue"). Empty disables that fault.
type Config struct {
	AfterEffect  string
	BeforeEffect string
}

// Enabled reports whether any fault is configured.
func (c Config) Enabled() bool { return c.AfterEffect != "" || c.BeforeEffect != "" }

// Injected is the crash-style failure an injected fault produces. Its
// message is the same for both kinds, so nothing in the journal tells them
// apart: only the ground-truth record does.
type Injected struct{}

// Message is the error text of every injected fault.
const Message = "injected crash-style fault: the worker failed while executing the tool"

// Error implements error.
func (*Injected) Error() string { return Message }

// IsInjected reports whether err is an injected fault.
func IsInjected(err error) bool {
	var in *Injected
	return errors.As(err, &in)
}

// Injector decides, per execution, whether a fault fires, and records its
// ground truth. The first matching execution per run and kind fires; the
// claim lives in PostgreSQL, so a restarted or second worker does not fault
// the same run again. Steps of one run execute one at a time, so two
// executions never race for the same claim.
type Injector struct {
	cfg  Config
	pool *pgxpool.Pool
}

// New returns an injector writing ground truth through pool. A zero Config
// never fires.
func New(pool *pgxpool.Pool, cfg Config) *Injector { return &Injector{cfg: cfg, pool: pool} }

func matches(spec string, call kernel.ToolCall) bool {
	return spec != "" && (spec == call.OperationID || spec == call.Tool)
}

// Before runs before the tool executes. When a before-effect fault fires it
// records truth "none" and returns *Injected: the caller must not execute
// the tool and must report the failure like a crash.
func (in *Injector) Before(ctx context.Context, call kernel.ToolCall) error {
	if in == nil || !matches(in.cfg.BeforeEffect, call) {
		return nil
	}
	fired, err := in.claim(ctx, call, BeforeEffect, kernel.EffectNone, map[string]any{"spec": in.cfg.BeforeEffect})
	if err != nil {
		// Failing closed: the tool has not run, and an unrecordable drill
		// must not silently turn into a real execution.
		return fmt.Errorf("fault injection: %w", err)
	}
	if fired {
		return &Injected{}
	}
	return nil
}

// After runs after the tool executed successfully: its effect has
// committed. When an after-effect fault fires it records truth "occurred"
// and returns *Injected, which the caller reports instead of the result.
func (in *Injector) After(ctx context.Context, call kernel.ToolCall, res kernel.ToolResult) error {
	if in == nil || !matches(in.cfg.AfterEffect, call) {
		return nil
	}
	fired, err := in.claim(ctx, call, AfterEffect, kernel.EffectOccurred, map[string]any{
		"spec": in.cfg.AfterEffect, "result_summary": res.Summary,
	})
	if err != nil {
		// The effect committed but the record failed: still a crash-style
		// failure (uncertain), which is the honest report either way.
		return fmt.Errorf("fault injection after the effect: %w", err)
	}
	if fired {
		return &Injected{}
	}
	return nil
}

// claim inserts the ground-truth record when this is the run's first
// execution to fire this kind of fault, and reports whether it fired.
func (in *Injector) claim(ctx context.Context, call kernel.ToolCall, kind, truth string, detail map[string]any) (bool, error) {
	d, err := json.Marshal(detail)
	if err != nil {
		return false, fmt.Errorf("marshal fault detail: %w", err)
	}
	tag, err := in.pool.Exec(ctx, claimSQL, call.Project, call.RunID, call.OperationID, call.Tool, kind, truth, d)
	if err != nil {
		return false, fmt.Errorf("record %s fault of %s/%s/%s: %w", kind, call.Project, call.RunID, call.OperationID, err)
	}
	return tag.RowsAffected() == 1, nil
}

// Record is one ground-truth record.
type Record struct {
	Project     string          `json:"project"`
	RunID       string          `json:"run_id"`
	OperationID string          `json:"operation_id"`
	Tool        string          `json:"tool"`
	Fault       string          `json:"fault"`
	Truth       string          `json:"truth"`
	Detail      json.RawMessage `json:"detail"`
}

// RecordObserved records the ground truth of an operation that a drill
// observed itself (fault Lost): what the downstream state showed once the
// execution could no longer change it. A second record for the same
// operation is an error, never an overwrite.
func RecordObserved(ctx context.Context, pool *pgxpool.Pool, r Record) error {
	if r.Truth != kernel.EffectOccurred && r.Truth != kernel.EffectNone {
		return fmt.Errorf("record observed truth of %s/%s/%s: truth must be occurred or none, got %q", r.Project, r.RunID, r.OperationID, r.Truth)
	}
	detail := r.Detail
	if len(detail) == 0 {
		detail = json.RawMessage(`{}`)
	}
	tag, err := pool.Exec(ctx, observedSQL, r.Project, r.RunID, r.OperationID, r.Tool, r.Fault, r.Truth, detail)
	if err != nil {
		return fmt.Errorf("record observed truth of %s/%s/%s: %w", r.Project, r.RunID, r.OperationID, err)
	}
	if tag.RowsAffected() != 1 {
		return fmt.Errorf("record observed truth of %s/%s/%s: a record exists already", r.Project, r.RunID, r.OperationID)
	}
	return nil
}

// Records returns the ground truth recorded for a run, in operation order.
// Drills and evals read it; it is never served to the supervisor.
func Records(ctx context.Context, pool *pgxpool.Pool, project, runID string) ([]Record, error) {
	rows, err := pool.Query(ctx, recordsSQL, project, runID)
	if err != nil {
		return nil, fmt.Errorf("fault records of %s/%s: %w", project, runID, err)
	}
	defer rows.Close()
	var out []Record
	for rows.Next() {
		var r Record
		if err := rows.Scan(&r.Project, &r.RunID, &r.OperationID, &r.Tool, &r.Fault, &r.Truth, &r.Detail); err != nil {
			return nil, fmt.Errorf("fault records: scan: %w", err)
		}
		out = append(out, r)
	}
	return out, rows.Err()
}
