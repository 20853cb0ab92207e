package operations

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/seed-7bc021c3/reckon/kernel"
	"github.com/seed-7bc021c3/reckon/kernel/outbox"
)

// Decisions of the retry guard.
const (
	// GuardProceed: no earlier call with the same effect key stands in the
	// way (none, or each settled none or completed normally).
	GuardProceed = "proceed"
	// GuardHold: an earlier call with the same effect key is unsettled (in
	// flight, failed uncertain, or ruled unknown): repeating it now could
	// repeat its effect.
	GuardHold = "hold"
	// GuardDone: an earlier call with the same effect key was settled
	// occurred: its effect already happened.
	GuardDone = "done"
)

// Scopes of the retry guard: where identical calls are looked for.
const (
	GuardScopeProject = "project"
	GuardScopeRun     = "run"
)

// States of a guard's earlier operation (GuardOperation.State).
const (
	// GuardUnsettled: no settling event (in flight or failed uncertain).
	GuardUnsettled = "unsettled"
	// GuardUnknown: reconciled unknown; nobody could establish the effect.
	GuardUnknown = "unknown"
	// GuardOccurred: settled occurred.
	GuardOccurred = "occurred"
)

// guardTwins bounds the earlier calls one guard answer weighs.
const guardTwins = 20

// MaxGuardToolBytes bounds a guard request's tool name.
const MaxGuardToolBytes = 512

// GuardParams is a request to the retry guard: may this call run?
type GuardParams struct {
	Project string          `json:"project"`
	RunID   string          `json:"run_id,omitempty"`
	Tool    string          `json:"tool"`
	Args    json.RawMessage `json:"args,omitempty"`
	// Scope is GuardScopeProject (the default when empty) or GuardScopeRun
	// (which needs RunID).
	Scope string `json:"scope,omitempty"`
}

// GuardAnswer is the retry guard's answer.
type GuardAnswer struct {
	Decision string `json:"decision"`
	// Operation is the earlier call with the same effect key (hold, done).
	Operation *GuardOperation `json:"operation,omitempty"`
	// Reconciliation is the event that settled it occurred (done): its
	// actor says who decided, its data the basis and note.
	Reconciliation *kernel.Event `json:"reconciliation,omitempty"`
}

// GuardOperation is the earlier call a guard answer names.
type GuardOperation struct {
	Project     string          `json:"project"`
	RunID       string          `json:"run_id"`
	OperationID string          `json:"operation_id"`
	Tool        string          `json:"tool"`
	StartedAt   time.Time       `json:"started_at"`
	StartedKey  kernel.EventKey `json:"started_key"`
	// State is GuardUnsettled, GuardUnknown or GuardOccurred.
	State string `json:"state"`
}

// guardTwin is one earlier call with the request's effect key.
type guardTwin struct {
	op      GuardOperation
	settled *kernel.Event
}

// EffectArgs is the arguments' part of a call's effect key: their
// canonical JSON (kernel.Canonical, the form ingest stores), {} for none.
func EffectArgs(args json.RawMessage) ([]byte, error) {
	if len(args) == 0 {
		return []byte("{}"), nil
	}
	canon, err := kernel.Canonical(args)
	if err != nil {
		return nil, kernel.Errorf(kernel.EInvalid, "args: %s", kernel.ErrorMessage(err))
	}
	return canon, nil
}

func (p GuardParams) validate() error {
	if err := kernel.ValidateKey("project", p.Project); err != nil {
		return err
	}
	if p.RunID != "" {
		if err := kernel.ValidateKey("run_id", p.RunID); err != nil {
			return err
		}
	}
	switch {
	case p.Tool == "":
		return kernel.Errorf(kernel.EInvalid, "tool: required")
	case len(p.Tool) > MaxGuardToolBytes:
		return kernel.Errorf(kernel.EInvalid, "tool: at most %d bytes", MaxGuardToolBytes)
	case p.Scope != "" && p.Scope != GuardScopeProject && p.Scope != GuardScopeRun:
		return kernel.Errorf(kernel.EInvalid, "scope: must be project or run, got %q", p.Scope)
	case p.Scope == GuardScopeRun && p.RunID == "":
		return kernel.Errorf(kernel.EInvalid, "run_id: required with scope run")
	}
	return nil
}

// Guard answers whether a call may run (the retry guard, docs/api.md#guard):
// hold while an earlier call with the same effect key (project, tool,
// canonical arguments), inside the operations window, is unsettled or
// ruled unknown; done when one was settled occurred (and none is
// unsettled); proceed otherwise. An earlier call settled none or
// completed normally does not stand in the way, nor does one the guard
// itself stopped. Settlements still on their way in the outbox count.
// TestGuard.
func (s *Service) Guard(ctx context.Context, p GuardParams) (GuardAnswer, error) {
	if err := p.validate(); err != nil {
		return GuardAnswer{}, err
	}
	args, err := EffectArgs(p.Args)
	if err != nil {
		return GuardAnswer{}, err
	}
	twins, err := s.guardTwins(ctx, p, args)
	if err != nil {
		return GuardAnswer{}, err
	}
	var done *guardTwin
	for i := range twins {
		t := &twins[i]
		switch t.op.State = guardState(t.settled); t.op.State {
		case GuardUnsettled, GuardUnknown:
			return GuardAnswer{Decision: GuardHold, Operation: &t.op}, nil
		case GuardOccurred:
			if done == nil {
				done = t
			}
		}
	}
	if done == nil {
		return GuardAnswer{Decision: GuardProceed}, nil
	}
	return GuardAnswer{Decision: GuardDone, Operation: &done.op, Reconciliation: done.settled}, nil
}

// guardTwins reads the earlier calls with the effect key, newest first,
// one per operation, each with its newest settling event: from the
// journal, then, for those the journal leaves unsettled or unknown, with
// the settlements on their way in the outbox.
func (s *Service) guardTwins(ctx context.Context, p GuardParams, args []byte) ([]guardTwin, error) {
	since, floor := s.window(s.now())
	runID := ""
	if p.Scope == GuardScopeRun {
		runID = p.RunID
	}
	// The outbox first (outbox.Pending says why): a call whose
	// tool.started is still on its way (the MCP gateway's, the kernel's)
	// is as much a twin as a journaled one.
	pending, err := s.pendingTwins(ctx, p, runID, args)
	if err != nil {
		return nil, err
	}
	rows, err := s.pool.Query(ctx, guardTwinsSQL, p.Project, p.Tool, string(args), since, floor, runID, guardTwins)
	if err != nil {
		return nil, fmt.Errorf("guard: earlier calls of %s in %s: %w", p.Tool, p.Project, err)
	}
	defer rows.Close()
	seen := map[[2]string]bool{}
	var out []guardTwin
	for _, t := range pending {
		seen[[2]string{t.op.RunID, t.op.OperationID}] = true
	}
	for rows.Next() {
		t, err := scanTwin(rows, p)
		if err != nil {
			return nil, fmt.Errorf("guard: scan: %w", err)
		}
		if k := [2]string{t.op.RunID, t.op.OperationID}; !seen[k] {
			seen[k] = true
			out = append(out, t)
		}
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("guard: earlier calls of %s in %s: %w", p.Tool, p.Project, err)
	}
	out = append(pending, out...)
	for i := range out {
		if st := guardState(out[i].settled); st == GuardUnsettled || st == GuardUnknown {
			if out[i].settled, err = s.pendingSettlement(ctx, out[i]); err != nil {
				return nil, err
			}
		}
	}
	return out, nil
}

// pendingTwins are the calls with the effect key whose tool.started is
// still in the outbox, newest first.
func (s *Service) pendingTwins(ctx context.Context, p GuardParams, runID string, args []byte) ([]guardTwin, error) {
	evs, err := outbox.Pending(ctx, s.pool, outbox.PendingFilter{Project: p.Project, RunID: runID, Types: []string{kernel.TypeToolStarted}})
	if err != nil {
		return nil, fmt.Errorf("guard: pending calls of %s in %s: %w", p.Tool, p.Project, err)
	}
	var out []guardTwin
	for i := len(evs) - 1; i >= 0; i-- {
		var d kernel.ToolStarted
		if evs[i].DecodeData(&d) != nil || d.Tool != p.Tool {
			continue
		}
		if canon, err := EffectArgs(d.Args); err != nil || !bytes.Equal(canon, args) {
			continue
		}
		out = append(out, guardTwin{op: GuardOperation{Project: p.Project, RunID: evs[i].RunID, OperationID: d.OperationID,
			Tool: p.Tool, StartedAt: evs[i].TS.UTC(), StartedKey: evs[i].Key()}})
	}
	return out, nil
}

// scanTwin reads one row of guardTwinsSQL.
func scanTwin(rows interface{ Scan(...any) error }, p GuardParams) (guardTwin, error) {
	t := guardTwin{op: GuardOperation{Project: p.Project, Tool: p.Tool}}
	var (
		src, id, typ, actor, parentSrc, parentID *string
		ts                                       *time.Time
		data                                     []byte
	)
	if err := rows.Scan(&t.op.RunID, &t.op.OperationID, &t.op.StartedKey.SourceID, &t.op.StartedKey.EventID, &t.op.StartedAt,
		&src, &id, &typ, &ts, &actor, &data, &parentSrc, &parentID); err != nil {
		return guardTwin{}, err
	}
	t.op.StartedAt = t.op.StartedAt.UTC()
	if typ != nil {
		ev := kernel.Event{SourceID: *src, EventID: *id, Project: p.Project, RunID: t.op.RunID, Type: *typ,
			TS: ts.UTC(), Actor: *actor, Data: data}
		if parentSrc != nil && parentID != nil {
			ev.ParentEventID = &kernel.EventKey{SourceID: *parentSrc, EventID: *parentID}
		}
		t.settled = &ev
	}
	return t, nil
}

// pendingSettlement is the twin's newest settling event counting those
// still on their way in the outbox (an operator's ruling just recorded).
func (s *Service) pendingSettlement(ctx context.Context, t guardTwin) (*kernel.Event, error) {
	evs, err := operationEvents(ctx, s.pool, t.op.Project, t.op.RunID, t.op.OperationID)
	if err != nil {
		return nil, fmt.Errorf("guard: events of %s/%s/%s: %w", t.op.Project, t.op.RunID, t.op.OperationID, err)
	}
	settled := t.settled
	for i := range evs {
		if evs[i].Settles() {
			settled = &evs[i]
		}
	}
	return settled, nil
}

// guardState is what an earlier call's newest settling event (nil: none)
// makes of it: GuardUnsettled, GuardUnknown, GuardOccurred, or another
// word (none, completed, blocked) for a call that does not stand in the
// way.
func guardState(settled *kernel.Event) string {
	if settled == nil {
		return GuardUnsettled
	}
	switch settled.Type {
	case kernel.TypeToolCompleted:
		return "completed"
	case kernel.TypeToolBlocked:
		return "blocked"
	}
	var d struct {
		Effect string `json:"effect"`
	}
	_ = json.Unmarshal(settled.Data, &d)
	switch d.Effect {
	case kernel.EffectOccurred:
		return GuardOccurred
	case kernel.EffectUnknown:
		return GuardUnknown
	}
	return kernel.EffectNone
}

// TriageChannel (TestRequestTriage) is the PostgreSQL notification channel on which a process
// without a triage sweeper (the MCP gateway) asks the pipeline's for a
// triage of one run now: payload {"project", "run_id"}. A notification is
// only a nudge, lost while nobody listens; the scheduled sweep makes up
// for it.
const TriageChannel = "reckon_triage"

// RequestTriage asks, on TriageChannel, for a triage of one run now.
func RequestTriage(ctx context.Context, pool *pgxpool.Pool, project, runID string) error {
	payload, err := json.Marshal(kernel.RunKey{Project: project, RunID: runID})
	if err != nil {
		return fmt.Errorf("request triage of %s/%s: %w", project, runID, err)
	}
	if _, err := pool.Exec(ctx, `SELECT pg_notify($1, $2)`, TriageChannel, string(payload)); err != nil {
		return fmt.Errorf("request triage of %s/%s: %w", project, runID, err)
	}
	return nil
}
