package operations

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/seed-7bc021c3/reckon/kernel"
	"github.com/seed-7bc021c3/reckon/kernel/outbox"
)

// Why an operation is in the operator's queue.
const (
	// ReasonUnknown: the supervisor recorded effect unknown (nobody could
	// establish the effect, or the settlement policy held its proposal).
	ReasonUnknown = "unknown"
	// ReasonVerdictNeedsAttention: the supervisor settled the operation,
	// but the verdict that did asked an operator to look.
	ReasonVerdictNeedsAttention = "verdict_needs_attention"
)

// AttentionItem is one operation waiting for an operator: its newest
// reconciliation is the supervisor's, and no operator has decided since.
type AttentionItem struct {
	Project     string `json:"project"`
	RunID       string `json:"run_id"`
	OperationID string `json:"operation_id"`
	Tool        string `json:"tool"`
	// Effect, Basis and Note are the supervisor's reconciliation.
	Effect string `json:"effect"`
	// ProposedEffect is the occurred or none the supervisor proposed and
	// the settlement policy held back, when it did.
	ProposedEffect string `json:"proposed_effect,omitempty"`
	Basis          string `json:"basis"`
	Note           string `json:"note"`
	// Reason is unknown or verdict_needs_attention.
	Reason string `json:"reason"`
	// NeedsAttention is the flag of the verdict that wrote the
	// reconciliation.
	NeedsAttention bool `json:"needs_attention"`
	// VerdictKey is that supervisor.verdict's key (nil when the verdict is
	// not in the journal yet); Supervisor and Model are its.
	VerdictKey *kernel.EventKey `json:"verdict_key"`
	Supervisor string           `json:"supervisor,omitempty"`
	Model      string           `json:"model,omitempty"`
	// ReconciledKey is the supervisor's operation.reconciled: the event an
	// operator's reconcile will supersede.
	ReconciledKey kernel.EventKey `json:"reconciled_key"`
	// DecidedAt is when the supervisor decided (the reconciliation's ts).
	DecidedAt  time.Time        `json:"decided_at"`
	StartedAt  *time.Time       `json:"started_at,omitempty"`
	StartedKey *kernel.EventKey `json:"started_key,omitempty"`
}

// AttentionParams selects a page of the operator's queue.
type AttentionParams struct {
	Project string
	// RunID restricts the queue to one run when set.
	RunID string
	// Cursor is an AttentionPage.NextCursor; empty starts at the oldest
	// decision inside the window.
	Cursor string
	// Limit bounds the page; 0 means DefaultLimit, at most MaxLimit.
	Limit int
}

// AttentionPage is one page of the operator's queue, oldest decision first.
type AttentionPage struct {
	Operations []AttentionItem `json:"operations"`
	// NextCursor continues the queue; empty on the last page.
	NextCursor string `json:"next_cursor"`
}

// attentionCursorPrefix keeps the queue's cursors apart from the listing's.
const attentionCursorPrefix = "a1:"

// Attention returns a page of the operator's queue: operations whose newest
// reconciliation is the supervisor's unknown, or whose supervisor
// reconciliation belongs to a verdict that asked for attention, and that no
// operator has decided since (an operator's reconciliation still in the
// outbox counts as decided). Like the listing, it is bounded by the window
// over event time (a supervisor decision older than the window leaves the
// queue; its events stay in the journal and the operation's history).
func (s *Service) Attention(ctx context.Context, p AttentionParams) (AttentionPage, error) {
	limit, err := pageParams(p.Project, p.Limit)
	if err != nil {
		return AttentionPage{}, err
	}
	since := s.now().Add(-s.cfg.Window)
	start := position{ts: since}
	if p.Cursor != "" {
		c, err := decodePrefixedCursor(p.Cursor, attentionCursorPrefix)
		if err != nil {
			return AttentionPage{}, err
		}
		start = position{ts: c.ts, seq: c.seq + 1}
	}
	// Rulings on their way count as decided; read before the journal (see
	// outbox.Pending).
	pending, err := outbox.Pending(ctx, s.pool, outbox.PendingFilter{Project: p.Project, RunID: p.RunID, Types: []string{kernel.TypeOperationReconciled}})
	if err != nil {
		return AttentionPage{}, fmt.Errorf("attention queue of %s: %w", p.Project, err)
	}
	pendRuns, pendOps := []string{}, []string{}
	for _, ev := range pending {
		pendRuns, pendOps = append(pendRuns, ev.RunID), append(pendOps, ev.OperationID())
	}
	rows, err := s.pool.Query(ctx, attentionSQL, p.Project, since, p.RunID, start.ts, start.seq, limit+1, pendRuns, pendOps)
	if err != nil {
		return AttentionPage{}, fmt.Errorf("attention queue of %s: %w", p.Project, err)
	}
	defer rows.Close()
	page := AttentionPage{Operations: []AttentionItem{}}
	var last position
	for rows.Next() {
		var (
			it                    AttentionItem
			pos                   position
			data                  []byte
			startedSrc, startedID *string
			startedAt             *time.Time
			tool                  *string
			verdictSrc, verdictID *string
			supervisor, model     *string
		)
		it.Project = p.Project
		if err := rows.Scan(&pos.seq, &it.ReconciledKey.SourceID, &it.ReconciledKey.EventID, &it.RunID, &it.OperationID, &pos.ts, &data,
			&startedSrc, &startedID, &startedAt, &tool,
			&verdictSrc, &verdictID, &it.NeedsAttention, &supervisor, &model); err != nil {
			return AttentionPage{}, fmt.Errorf("attention queue of %s: scan: %w", p.Project, err)
		}
		if len(page.Operations) == limit {
			page.NextCursor = encodePrefixedCursor(last, attentionCursorPrefix)
			break
		}
		var d kernel.Reconciliation
		if err := json.Unmarshal(data, &d); err != nil {
			return AttentionPage{}, fmt.Errorf("operation.reconciled %s: decode data: %w", it.ReconciledKey, err)
		}
		it.Effect, it.ProposedEffect, it.Basis, it.Note = d.Effect, d.ProposedEffect, d.Basis, d.Note
		it.DecidedAt = pos.ts.UTC()
		it.Reason = ReasonVerdictNeedsAttention
		if d.Effect == kernel.EffectUnknown {
			it.Reason = ReasonUnknown
		}
		if startedSrc != nil && startedID != nil {
			it.StartedKey = &kernel.EventKey{SourceID: *startedSrc, EventID: *startedID}
		}
		if startedAt != nil {
			t := startedAt.UTC()
			it.StartedAt = &t
		}
		if tool != nil {
			it.Tool = *tool
		}
		if verdictSrc != nil && verdictID != nil {
			it.VerdictKey = &kernel.EventKey{SourceID: *verdictSrc, EventID: *verdictID}
		}
		if supervisor != nil {
			it.Supervisor = *supervisor
		}
		if model != nil {
			it.Model = *model
		}
		page.Operations = append(page.Operations, it)
		last = position{ts: pos.ts.UTC(), seq: pos.seq}
	}
	if err := rows.Err(); err != nil {
		return AttentionPage{}, fmt.Errorf("attention queue of %s: %w", p.Project, err)
	}
	return page, nil
}

// OperationRef names one operation of a project.
type OperationRef struct {
	RunID       string
	OperationID string
}

// LastReconciliation is an operation's newest reconciliation: who decided
// what, when.
type LastReconciliation struct {
	Key    kernel.EventKey `json:"key"`
	Actor  string          `json:"actor"`
	Effect string          `json:"effect"`
	TS     time.Time       `json:"ts"`
}

// IsRuling reports whether an operator made it: an operator's ruling.
func (d LastReconciliation) IsRuling() bool { return kernel.IsOperator(d.Actor) }

// LastReconciliations returns the newest reconciliation in the journal of
// each operation of refs that has one, in one statement.
func (s *Service) LastReconciliations(ctx context.Context, project string, refs []OperationRef) (map[OperationRef]LastReconciliation, error) {
	out := make(map[OperationRef]LastReconciliation, len(refs))
	if len(refs) == 0 {
		return out, nil
	}
	runs := make([]string, len(refs))
	ops := make([]string, len(refs))
	for i, r := range refs {
		runs[i], ops[i] = r.RunID, r.OperationID
	}
	rows, err := s.pool.Query(ctx, newestReconciledSQL, project, runs, ops)
	if err != nil {
		return nil, fmt.Errorf("last reconciliations in %s: %w", project, err)
	}
	defer rows.Close()
	for rows.Next() {
		var r OperationRef
		var d LastReconciliation
		var effect *string
		if err := rows.Scan(&r.RunID, &r.OperationID, &d.Key.SourceID, &d.Key.EventID, &d.Actor, &d.TS, &effect); err != nil {
			return nil, fmt.Errorf("last reconciliations in %s: scan: %w", project, err)
		}
		d.TS = d.TS.UTC()
		if effect != nil {
			d.Effect = *effect
		}
		out[r] = d
	}
	return out, rows.Err()
}
