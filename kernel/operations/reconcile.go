package operations

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/seed-7bc021c3/reckon/kernel"
	"github.com/seed-7bc021c3/reckon/kernel/outbox"
)

// ReconcileRequest is one verdict on one operation, from a human operator
// or the supervisor.
type ReconcileRequest struct {
	Project     string `json:"project"`
	RunID       string `json:"run_id"`
	OperationID string `json:"operation_id"`
	// Effect is none, occurred or unknown.
	Effect string `json:"effect"`
	// Note explains the verdict; at most kernel.MaxNoteBytes.
	Note string `json:"note"`
	// Evidence is optional JSON backing the verdict (a workspace file, a
	// probe's finding).
	Evidence json.RawMessage `json:"evidence,omitempty"`
	// Basis is operator for human verdicts, inference or probe for the
	// supervisor's.
	Basis string `json:"-"`
	// ProposedEffect, on a supervisor's unknown only, is the effect the
	// supervisor proposed and the settlement policy held back.
	ProposedEffect string `json:"-"`
	// Actor is "operator:<name>" or "supervisor".
	Actor string `json:"-"`
	// IdempotencyKey, when set, makes a repeat of the request return the
	// first event; without it the same body repeated within the window does.
	IdempotencyKey string `json:"-"`
}

func (r ReconcileRequest) human() bool { return strings.HasPrefix(r.Actor, "operator:") }

// validate checks the request; errors are EInvalid naming the field.
func (r *ReconcileRequest) validate() error {
	for _, f := range []struct{ name, val string }{
		{"project", r.Project}, {"run_id", r.RunID}, {"operation_id", r.OperationID},
		{"effect", r.Effect}, {"note", strings.TrimSpace(r.Note)},
	} {
		if f.val == "" {
			return kernel.Errorf(kernel.EInvalid, "field %q is required", f.name)
		}
	}
	if !kernel.ValidReconciledEffect(r.Effect) {
		return kernel.Errorf(kernel.EInvalid, "field \"effect\" must be none, occurred or unknown, got %q", r.Effect)
	}
	if len(r.Note) > kernel.MaxNoteBytes {
		return kernel.Errorf(kernel.EInvalid, "field \"note\" is %d bytes; at most %d are allowed", len(r.Note), kernel.MaxNoteBytes)
	}
	if ev := bytes.TrimSpace(r.Evidence); len(ev) == 0 || bytes.Equal(ev, []byte("null")) {
		r.Evidence = nil
	} else if !json.Valid(ev) {
		return kernel.Errorf(kernel.EInvalid, "field \"evidence\" must be JSON")
	}
	switch {
	case r.human():
		if len(r.Actor) == len("operator:") {
			return kernel.Errorf(kernel.EInvalid, "actor %q names no operator", r.Actor)
		}
		if r.Basis != kernel.BasisOperator {
			return kernel.Errorf(kernel.EInvalid, "a human verdict has basis operator, got %q", r.Basis)
		}
	case r.Actor == kernel.ActorSupervisor:
		if r.Basis != kernel.BasisInference && r.Basis != kernel.BasisProbe {
			return kernel.Errorf(kernel.EInvalid, "a supervisor verdict has basis inference or probe, got %q", r.Basis)
		}
	default:
		return kernel.Errorf(kernel.EInvalid, "actor must be operator:<name> or supervisor, got %q", r.Actor)
	}
	if r.ProposedEffect != "" {
		switch {
		case r.Actor != kernel.ActorSupervisor:
			return kernel.Errorf(kernel.EInvalid, "proposed_effect is the supervisor's held proposal; a human verdict decides the effect itself")
		case r.Effect != kernel.EffectUnknown:
			return kernel.Errorf(kernel.EInvalid, "proposed_effect goes with effect unknown only, got effect %q", r.Effect)
		case r.ProposedEffect != kernel.EffectNone && r.ProposedEffect != kernel.EffectOccurred:
			return kernel.Errorf(kernel.EInvalid, "proposed_effect must be none or occurred, got %q", r.ProposedEffect)
		}
	}
	return nil
}

// Reconcile records the verdict in a transaction of its own.
func (s *Service) Reconcile(ctx context.Context, req ReconcileRequest) (kernel.Event, error) {
	ev, _, err := s.reconcile(ctx, req)
	return ev, err
}

func (s *Service) reconcile(ctx context.Context, req ReconcileRequest) (kernel.Event, bool, error) {
	ev, repeated, err := s.reconcileOwnTx(ctx, req)
	s.o.Metrics.observeReconcile(req.Basis, repeated, err)
	return ev, repeated, err
}

func (s *Service) reconcileOwnTx(ctx context.Context, req ReconcileRequest) (kernel.Event, bool, error) {
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		return kernel.Event{}, false, fmt.Errorf("reconcile: begin: %w", err)
	}
	defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }()
	ev, repeated, err := s.reconcileTx(ctx, tx, req)
	if err != nil {
		return kernel.Event{}, false, err
	}
	if err := tx.Commit(ctx); err != nil {
		return kernel.Event{}, false, fmt.Errorf("reconcile: commit: %w", err)
	}
	return ev, repeated, nil
}

// ReconcileTx records the verdict inside the caller's transaction: THE one
// code path for human and supervisor verdicts. It writes
// operation.reconciled through the outbox under the kernel's source, with
// parent_event_id = the operation's tool.started key.
//
// Errors: EInvalid for a malformed request, ENotFound when the operation has
// no tool.started (journaled or pending), EConflict when a supervisor verdict
// meets an operation that is already settled — by a human verdict above all
// (a supervisor never overrides a human), by an earlier verdict or by a
// terminal event — or an idempotency key is reused for a different verdict.
// A human verdict over an earlier verdict (an override when that one was the
// supervisor's) records supersedes = that verdict's key. A repeat of an
// earlier request returns the earlier event and writes nothing.
//
// Concurrent reconciles of one operation are serialized with a transaction
// advisory lock, and the checks include verdicts still pending in the
// outbox, so the rules hold before the publisher has delivered anything.
func (s *Service) ReconcileTx(ctx context.Context, tx pgx.Tx, req ReconcileRequest) (kernel.Event, error) {
	ev, _, err := s.reconcileTx(ctx, tx, req)
	return ev, err
}

func (s *Service) reconcileTx(ctx context.Context, tx pgx.Tx, req ReconcileRequest) (kernel.Event, bool, error) {
	if err := req.validate(); err != nil {
		return kernel.Event{}, false, err
	}
	if _, err := tx.Exec(ctx, lockOperationSQL, lockKey(req.Project, req.RunID, req.OperationID)); err != nil {
		return kernel.Event{}, false, fmt.Errorf("reconcile: lock operation: %w", err)
	}
	evs, err := queryEvents(ctx, tx, operationEventsSQL, req.Project, req.RunID, req.OperationID)
	if err != nil {
		return kernel.Event{}, false, fmt.Errorf("reconcile: read operation %s/%s/%s: %w", req.Project, req.RunID, req.OperationID, err)
	}
	var started *kernel.Event
	var recs []kernel.Event
	for i := range evs {
		switch evs[i].Type {
		case kernel.TypeToolStarted:
			if started == nil {
				started = &evs[i]
			}
		case kernel.TypeOperationReconciled:
			recs = append(recs, evs[i])
		}
	}
	if started == nil {
		return kernel.Event{}, false, kernel.Errorf(kernel.ENotFound,
			"no tool.started for operation %q of run %q in project %q; check the ids (GET /v1/agent/operations lists unresolved operations)",
			req.OperationID, req.RunID, req.Project)
	}
	var latest *kernel.Event
	if len(recs) > 0 {
		latest = &recs[len(recs)-1]
	}
	now := s.now().Truncate(time.Microsecond)

	var eventID string
	if req.IdempotencyKey != "" {
		eventID = keyedEventID(req)
		for _, r := range recs {
			if r.SourceID == kernel.SourceKernel && r.EventID == eventID {
				if sameVerdict(r, req) {
					return r, true, nil
				}
				return kernel.Event{}, false, kernel.Errorf(kernel.EConflict,
					"idempotency key %q was already used for a different verdict on this operation (event %s); use a new key for a new verdict",
					req.IdempotencyKey, r.Key())
			}
		}
	} else {
		if latest != nil && sameVerdict(*latest, req) && now.Sub(latest.TS) <= s.o.Window {
			return *latest, true, nil
		}
		eventID = bodyEventID(req, len(recs)+1)
	}

	if !req.human() {
		// The supervisor settles unsettled operations only: it never
		// overrides a human, and a verdict built from a listing that an
		// earlier verdict or a late terminal event has since overtaken is
		// refused rather than recorded over it.
		for _, r := range recs {
			if strings.HasPrefix(r.Actor, "operator:") {
				return kernel.Event{}, false, kernel.Errorf(kernel.EConflict,
					"operation %q of run %q is already settled by a human verdict (%s by %s); a supervisor never overrides a human",
					req.OperationID, req.RunID, r.Key(), r.Actor)
			}
		}
		for _, e := range evs {
			if e.Settles() {
				return kernel.Event{}, false, kernel.Errorf(kernel.EConflict,
					"operation %q of run %q is already settled by %s (%s); the supervisor only settles unresolved operations",
					req.OperationID, req.RunID, e.Type, e.Key())
			}
		}
	}

	data := kernel.Reconciliation{
		OperationID: req.OperationID, Effect: req.Effect, Note: req.Note,
		Basis: req.Basis, Evidence: req.Evidence, ProposedEffect: req.ProposedEffect,
	}
	if latest != nil {
		k := latest.Key()
		data.Supersedes = &k
	}
	ev, err := kernel.NewEvent(kernel.SourceKernel, eventID, req.Project, req.RunID,
		kernel.TypeOperationReconciled, req.Actor, now, data)
	if err != nil {
		return kernel.Event{}, false, err
	}
	sk := started.Key()
	ev.ParentEventID = &sk
	if err := outbox.Enqueue(ctx, tx, ev); err != nil {
		return kernel.Event{}, false, fmt.Errorf("reconcile: enqueue %s: %w", ev.Key(), err)
	}
	return ev, false, nil
}

// lockKey names one operation for the advisory lock, length-prefixed so
// that no two different triples share a key string.
func lockKey(project, runID, operationID string) string {
	return fmt.Sprintf("reckon.operation:%d:%s%d:%s%d:%s", len(project), project, len(runID), runID, len(operationID), operationID)
}

func digest(parts ...string) string {
	h := sha256.New()
	for _, p := range parts {
		h.Write([]byte(strconv.Itoa(len(p))))
		h.Write([]byte{':'})
		h.Write([]byte(p))
	}
	return hex.EncodeToString(h.Sum(nil))
}

// keyedEventID derives the event id from the idempotency key, scoped to the
// operation and the actor.
func keyedEventID(r ReconcileRequest) string {
	return eventIDFor(r, "k-"+digest(r.Project, r.Actor, r.IdempotencyKey)[:24])
}

// bodyEventID derives the event id from the request and the number of
// verdicts before it: the same body at the same point of the operation's
// history is the same event, while the same body after another verdict is a
// new one.
func bodyEventID(r ReconcileRequest, n int) string {
	ev := ""
	if r.Evidence != nil {
		if c, err := kernel.Canonical(r.Evidence); err == nil {
			ev = string(c)
		}
	}
	d := digest(r.Project, r.Actor, r.Effect, r.Note, r.Basis, ev)[:16]
	return eventIDFor(r, strconv.Itoa(n)+"-"+d)
}

func eventIDFor(r ReconcileRequest, suffix string) string {
	id := r.RunID + "/" + r.OperationID + "/reconciled/" + suffix
	if len(id) > kernel.MaxKeyLen {
		id = "reconciled/" + digest(r.Project, r.RunID, r.OperationID)[:32] + "/" + suffix
	}
	return id
}

// sameVerdict reports whether the recorded event says what req says.
func sameVerdict(e kernel.Event, req ReconcileRequest) bool {
	var d kernel.Reconciliation
	if e.Actor != req.Actor || e.DecodeData(&d) != nil {
		return false
	}
	if d.Effect != req.Effect || d.Note != req.Note || d.Basis != req.Basis || d.ProposedEffect != req.ProposedEffect {
		return false
	}
	if (d.Evidence == nil) != (req.Evidence == nil) {
		return false
	}
	if d.Evidence == nil {
		return true
	}
	a, err1 := kernel.Canonical(d.Evidence)
	b, err2 := kernel.Canonical(req.Evidence)
	return err1 == nil && err2 == nil && bytes.Equal(a, b)
}

// History returns every event of the operation — tool events from any
// source, its reconciliations (with actor and basis) and the supervisor
// verdicts that name it — in event-time order, including events still
// pending in the outbox. ENotFound when there is none.
func (s *Service) History(ctx context.Context, project, runID, operationID string) ([]kernel.Event, error) {
	for _, f := range []struct{ name, val string }{{"project", project}, {"run_id", runID}, {"operation_id", operationID}} {
		if f.val == "" {
			return nil, kernel.Errorf(kernel.EInvalid, "%s is required", f.name)
		}
	}
	ops, err := queryEvents(ctx, s.pool, operationEventsSQL, project, runID, operationID)
	if err != nil {
		return nil, fmt.Errorf("history of %s/%s/%s: %w", project, runID, operationID, err)
	}
	if len(ops) == 0 {
		return nil, kernel.Errorf(kernel.ENotFound, "no events for operation %q of run %q in project %q", operationID, runID, project)
	}
	verdicts, err := queryEvents(ctx, s.pool, verdictEventsSQL, project, runID, operationID)
	if err != nil {
		return nil, fmt.Errorf("history of %s/%s/%s: verdicts: %w", project, runID, operationID, err)
	}
	return mergeEvents(ops, verdicts), nil
}

// querier is a pool or a transaction.
type querier interface {
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
}

// orderedEvent is an event with where it was read from.
type orderedEvent struct {
	ev      kernel.Event
	pending bool
	ord     int64
}

// queryEvents runs one of the journal+outbox statements and returns its
// events deduplicated by key (the journal's copy wins) in event-time order.
func queryEvents(ctx context.Context, q querier, sql string, args ...any) ([]kernel.Event, error) {
	rows, err := q.Query(ctx, sql, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []orderedEvent
	for rows.Next() {
		var o orderedEvent
		var psrc, pid *string
		e := &o.ev
		if err := rows.Scan(&o.pending, &o.ord, &e.SourceID, &e.EventID, &e.Project, &e.RunID, &e.Type,
			&e.TS, &e.Actor, &psrc, &pid, &e.Data); err != nil {
			return nil, fmt.Errorf("scan event: %w", err)
		}
		e.TS = e.TS.UTC()
		if psrc != nil && pid != nil {
			e.ParentEventID = &kernel.EventKey{SourceID: *psrc, EventID: *pid}
		}
		out = append(out, o)
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	return sortEvents(out), nil
}

func sortEvents(in []orderedEvent) []kernel.Event {
	journaled := map[kernel.EventKey]bool{}
	for _, o := range in {
		if !o.pending {
			journaled[o.ev.Key()] = true
		}
	}
	kept := in[:0]
	for _, o := range in {
		if o.pending && journaled[o.ev.Key()] {
			continue
		}
		kept = append(kept, o)
	}
	sort.SliceStable(kept, func(i, j int) bool {
		a, b := kept[i], kept[j]
		if !a.ev.TS.Equal(b.ev.TS) {
			return a.ev.TS.Before(b.ev.TS)
		}
		if a.pending != b.pending {
			return !a.pending
		}
		return a.ord < b.ord
	})
	out := make([]kernel.Event, len(kept))
	for i, o := range kept {
		out[i] = o.ev
	}
	return out
}

func mergeEvents(a, b []kernel.Event) []kernel.Event {
	out := append(append([]kernel.Event(nil), a...), b...)
	sort.SliceStable(out, func(i, j int) bool { return out[i].TS.Before(out[j].TS) })
	return out
}
