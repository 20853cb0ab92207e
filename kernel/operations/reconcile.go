package operations

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/seed-7bc021c3/reckon/kernel"
	"github.com/seed-7bc021c3/reckon/kernel/journal"
	"github.com/seed-7bc021c3/reckon/kernel/outbox"
	"github.com/seed-7bc021c3/reckon/kernel/pgplan"
)

// MaxEvidenceBytes bounds a reconciliation's evidence JSON: it is
// evidence to cite (a path, a sha256, an excerpt), not the artefact.
const MaxEvidenceBytes = 64 << 10

// ReconcileParams is one reconciliation of one operation: an operator's
// ruling (basis operator) or the supervisor's (basis inference or probe).
type ReconcileParams struct {
	Project     string `json:"project"`
	RunID       string `json:"run_id"`
	OperationID string `json:"operation_id"`
	// Effect is none, occurred or unknown.
	Effect string `json:"effect"`
	// Note explains the reconciliation; at most kernel.MaxNoteBytes.
	Note string `json:"note"`
	// Evidence is optional JSON backing the reconciliation (a workspace file, a
	// probe's finding).
	Evidence json.RawMessage `json:"evidence,omitempty"`
	// Basis is operator for an operator's ruling, inference or probe for the
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

func (r ReconcileParams) ruling() bool { return strings.HasPrefix(r.Actor, kernel.ActorOperatorPrefix) }

// validate checks the request; errors are EInvalid naming the field.
func (r *ReconcileParams) validate() error {
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
	} else if len(ev) > MaxEvidenceBytes {
		return kernel.Errorf(kernel.ETooLarge, "field \"evidence\" is %d bytes; at most %d (cite large files by path and sha256 instead of inlining them)", len(ev), MaxEvidenceBytes)
	}
	switch {
	case r.ruling():
		if len(r.Actor) == len("operator:") {
			return kernel.Errorf(kernel.EInvalid, "actor %q names no operator", r.Actor)
		}
		if r.Basis != kernel.BasisOperator {
			return kernel.Errorf(kernel.EInvalid, "an operator's ruling has basis operator, got %q", r.Basis)
		}
	case r.Actor == kernel.ActorSupervisor:
		if r.Basis != kernel.BasisInference && r.Basis != kernel.BasisProbe {
			return kernel.Errorf(kernel.EInvalid, "a supervisor reconciliation has basis inference or probe, got %q", r.Basis)
		}
	default:
		return kernel.Errorf(kernel.EInvalid, "actor must be operator:<name> or supervisor, got %q", r.Actor)
	}
	if r.ProposedEffect != "" {
		switch {
		case r.Actor != kernel.ActorSupervisor:
			return kernel.Errorf(kernel.EInvalid, "proposed_effect is the supervisor's held proposal; an operator's ruling decides the effect itself")
		case r.Effect != kernel.EffectUnknown:
			return kernel.Errorf(kernel.EInvalid, "proposed_effect goes with effect unknown only, got effect %q", r.Effect)
		case r.ProposedEffect != kernel.EffectNone && r.ProposedEffect != kernel.EffectOccurred:
			return kernel.Errorf(kernel.EInvalid, "proposed_effect must be none or occurred, got %q", r.ProposedEffect)
		}
	}
	return nil
}

// Recorded is the operation.reconciled a reconcile recorded, or the earlier
// one a repeated request returns.
type Recorded struct {
	kernel.Event
	// Repeated says the request repeated an earlier one: nothing was
	// written, Event is the earlier reconciliation.
	Repeated bool `json:"-"`
}

// Reconcile records the reconciliation in a transaction of its own (an
// operator's ruling through the API) and counts it in the metrics. See
// ReconcileTx for the rules.
func (s *Service) Reconcile(ctx context.Context, p ReconcileParams) (rec Recorded, err error) {
	defer func() { s.cfg.Metrics.observeReconcile(p.Basis, rec.Repeated, err) }()
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		return Recorded{}, fmt.Errorf("reconcile: begin: %w", err)
	}
	defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }()
	rec, err = s.ReconcileTx(ctx, tx, p)
	if err != nil {
		return Recorded{}, err
	}
	if err := tx.Commit(ctx); err != nil {
		return Recorded{}, fmt.Errorf("reconcile: commit: %w", err)
	}
	return rec, nil
}

// ReconcileTx records the reconciliation inside the caller's transaction:
// THE one code path for an operator's ruling and the supervisor's
// reconciliations (the triage sweep journals a wall's in one transaction).
// It writes operation.reconciled through the outbox under the kernel's
// source, with parent_event_id = the operation's tool.started key.
//
// Errors: EInvalid for malformed params, ENotFound when the operation has
// no tool.started (journaled or pending), EConflict when a supervisor
// reconciliation meets an operation that is already settled — by an
// operator's ruling above all (a supervisor never overrides an operator),
// by an earlier reconciliation or by a terminal event — or an idempotency
// key is reused for a different reconciliation. An operator's ruling over
// an earlier reconciliation (an override when that one was the
// supervisor's) records supersedes = that reconciliation's key. A repeat of
// an earlier request returns the earlier event and writes nothing.
//
// Concurrent reconciles of one operation are serialized with a transaction
// advisory lock, and the checks include reconciliations still pending in
// the outbox, so the rules hold before the publisher has delivered
// anything.
func (s *Service) ReconcileTx(ctx context.Context, tx pgx.Tx, req ReconcileParams) (Recorded, error) {
	if err := req.validate(); err != nil {
		return Recorded{}, err
	}
	if _, err := tx.Exec(ctx, lockOperationSQL, lockKey(req.Project, req.RunID, req.OperationID)); err != nil {
		return Recorded{}, fmt.Errorf("reconcile: lock operation: %w", err)
	}
	evs, err := operationEvents(ctx, tx, req.Project, req.RunID, req.OperationID)
	if err != nil {
		return Recorded{}, fmt.Errorf("reconcile: read operation %s/%s/%s: %w", req.Project, req.RunID, req.OperationID, err)
	}
	rec, err := s.decide(req, evs)
	if err != nil || rec.Repeated {
		return rec, err
	}
	if err := outbox.Enqueue(ctx, tx, rec.Event); err != nil {
		return Recorded{}, fmt.Errorf("reconcile: enqueue %s: %w", rec.Key(), err)
	}
	return rec, nil
}

// ReconcileAllTx is ReconcileTx for several operations of one run, under
// the same rules, in two round trips whatever their number (lock all and
// read all in one pipeline, write all) instead of four per operation: the
// triage sweep journals a wall's reconciliations with it. The first
// operation that breaks a rule fails the whole call (with that
// operation's error, naming it) and the caller's transaction must then
// be rolled back: nothing of the wall is written.
//
// also are events of the caller's enqueued in the same statement, before
// the reconciliations (the sweep's supervisor.verdict): a key of theirs
// already enqueued with another payload is an EConflict like any other.
func (s *Service) ReconcileAllTx(ctx context.Context, tx outbox.DBTX, reqs []ReconcileParams, also ...kernel.Event) ([]Recorded, error) {
	if len(reqs) == 0 {
		if err := outbox.Enqueue(ctx, tx, also...); err != nil {
			return nil, fmt.Errorf("reconcile: enqueue: %w", err)
		}
		return nil, nil
	}
	c, err := checkAll(reqs)
	if err != nil {
		return nil, err
	}
	// One round trip, three statements run in order: the reads are
	// statements of their own, so each takes its snapshot after the locks
	// are held and sees whatever a reconcile that held them committed.
	// Pending first, then the journal: see outbox.Pending.
	var (
		b         pgx.Batch
		pending   []kernel.Event
		journaled []kernel.StoredEvent
	)
	b.Queue(lockOperationsSQL, c.keys)
	if err := outbox.QueuePending(&b, outbox.PendingFilter{Project: c.project, RunID: c.runID}, &pending); err != nil {
		return nil, fmt.Errorf("reconcile: read run %s/%s: %w", c.project, c.runID, err)
	}
	journal.QueueOperationsEvents(&b, c.project, c.runID, c.ops, &journaled)
	if err := tx.SendBatch(ctx, &b).Close(); err != nil {
		return nil, fmt.Errorf("reconcile: lock and read %d operations of %s/%s: %w", len(c.ops), c.project, c.runID, err)
	}
	out, writes, err := s.decideAll(c, journaled, pending, also)
	if err != nil {
		return nil, err
	}
	if err := outbox.Enqueue(ctx, tx, writes...); err != nil {
		return nil, fmt.Errorf("reconcile: enqueue %d events of %s/%s: %w", len(writes), c.project, c.runID, err)
	}
	return out, nil
}

// reconcileAll is a ReconcileAllTx call's requests, checked.
type reconcileAll struct {
	reqs           []ReconcileParams // validated, normalized copies
	project, runID string
	keys           []string // the operations' lock keys, sorted
	ops            []string // the operations, in request order
	seen           map[string]bool
}

// checkAll validates reqs: one run, each operation once.
func checkAll(reqs []ReconcileParams) (reconcileAll, error) {
	// validate normalizes (an empty or null evidence becomes none), as in
	// ReconcileTx; on a copy, so the caller's slice stays as it was.
	reqs = slices.Clone(reqs)
	c := reconcileAll{
		reqs: reqs, project: reqs[0].Project, runID: reqs[0].RunID,
		keys: make([]string, 0, len(reqs)), ops: make([]string, 0, len(reqs)), seen: map[string]bool{},
	}
	for i := range reqs {
		req := &reqs[i]
		if err := req.validate(); err != nil {
			return reconcileAll{}, err
		}
		if req.Project != c.project || req.RunID != c.runID {
			return reconcileAll{}, kernel.Errorf(kernel.EInvalid, "reconcile: one call reconciles operations of one run (%s/%s), not of %s/%s", c.project, c.runID, req.Project, req.RunID)
		}
		if c.seen[req.OperationID] {
			return reconcileAll{}, kernel.Errorf(kernel.EInvalid, "reconcile: operation %q appears twice in one call", req.OperationID)
		}
		c.seen[req.OperationID] = true
		c.keys = append(c.keys, lockKey(req.Project, req.RunID, req.OperationID))
		c.ops = append(c.ops, req.OperationID)
	}
	// Sorted, so that two callers locking overlapping sets wait instead of
	// deadlocking; unnest's scan takes them in array order.
	sort.Strings(c.keys)
	return c, nil
}

// decideAll applies the rules to each request against its operation's
// journaled and pending events (journaled may hold other operations'
// events too, pending other events of the run), and returns the answers
// and what to enqueue: also, then each new reconciliation.
func (s *Service) decideAll(c reconcileAll, journaled []kernel.StoredEvent, pending, also []kernel.Event) ([]Recorded, []kernel.Event, error) {
	return s.decideGrouped(c, c.byOperation(journaled), pending, also)
}

// byOperation groups the events of c's operations among journaled by
// operation, in journal order.
func (c reconcileAll) byOperation(journaled []kernel.StoredEvent) map[string][]kernel.StoredEvent {
	byOp := map[string][]kernel.StoredEvent{}
	for _, e := range journaled {
		if op := e.OperationID(); c.seen[op] {
			byOp[op] = append(byOp[op], e)
		}
	}
	return byOp
}

// decideGrouped is decideAll on journaled events already grouped.
func (s *Service) decideGrouped(c reconcileAll, byOpJournaled map[string][]kernel.StoredEvent, pending, also []kernel.Event) ([]Recorded, []kernel.Event, error) {
	byOpPending := map[string][]kernel.Event{}
	for _, e := range pending {
		if op := e.OperationID(); c.seen[op] {
			byOpPending[op] = append(byOpPending[op], e)
		}
	}
	out := make([]Recorded, len(c.reqs))
	writes := slices.Clone(also)
	for i, req := range c.reqs {
		rec, err := s.decide(req, mergePending(byOpJournaled[req.OperationID], byOpPending[req.OperationID]))
		if err != nil {
			return nil, nil, fmt.Errorf("operation %s: %w", req.OperationID, err)
		}
		out[i] = rec
		if !rec.Repeated {
			writes = append(writes, rec.Event)
		}
	}
	return out, writes, nil
}

// RunRead is a run as a caller read it before taking its operations'
// locks: every journaled event of the run, and its events pending in the
// outbox (outbox.PendingFilter with the run and no types), the pending
// ones read first (see outbox.Pending).
type RunRead struct {
	Journaled []kernel.StoredEvent
	Pending   []kernel.Event
	// ReadAt is the database's clock during the read (the triage store
	// reads it; zero where a caller read the run otherwise): with the
	// journal's commit times of the events, the one clock the probes
	// measure waits on.
	ReadAt time.Time
}

// QueueReconcileAll is ReconcileAllTx decided on a run the caller has
// already read, queued on b instead of sent: the operations' locks, a
// guard, and the enqueue of also and the reconciliations, for the caller
// to send with its COMMIT in one round trip (the triage sweep, which read
// the run under its triage lock to build the wall, writes a wall so). The
// statements queued run on generic plans until the transaction ends
// (pgplan.Force): the caller queues its COMMIT next.
//
// The answers are decided now, on read; the guard, once the locks are
// held, raises SQLSTATE RK004 when the run has changed since in a way
// that could change them — an event of one of the operations journaled
// that read lacks (an operator's ruling delivered, a late tool.completed),
// or any event of the run pending in the outbox that read lacks — and the
// enqueue fails with a unique violation of the outbox's key when one of
// its events is already enqueued (see outbox.QueueEnqueueNew). Either
// aborts the caller's transaction with nothing written; Stale tells them
// from other errors, and the caller rolls back and calls ReconcileAllTx,
// which reads again under the locks and answers repeats and conflicts.
// The guard errs on the side of raising: a pending event of read
// delivered since is a journaled event read lacks. A request that would
// be a repeat is refused at once (ErrRepeat), before anything is queued.
//
// The rules read an operation's events by data.operation_id here and by
// the journal's operation_id column under the locks; the two agree for
// every event the rules look at (tool.started and operation.reconciled,
// whose operation_id is required and spelled exactly so).
func (s *Service) QueueReconcileAll(b *pgx.Batch, read RunRead, reqs []ReconcileParams, also ...kernel.Event) ([]Recorded, error) {
	if len(reqs) == 0 {
		return nil, kernel.Errorf(kernel.EInvalid, "reconcile: no operations to reconcile")
	}
	c, err := checkAll(reqs)
	if err != nil {
		return nil, err
	}
	byOp := c.byOperation(read.Journaled)
	out, writes, err := s.decideGrouped(c, byOp, read.Pending, also)
	if err != nil {
		return nil, err
	}
	for _, r := range out {
		if r.Repeated {
			return nil, ErrRepeat
		}
	}
	// The keys read of the operations' events only, not of the whole
	// run's (a long run's would be a long array to hash for every wall):
	// an event the guard finds has the operation_id column one of the
	// operations', and its data the same operation_id, by which the
	// events read were grouped.
	jsrc, jid := []string{}, []string{}
	for _, evs := range byOp {
		for _, e := range evs {
			jsrc, jid = append(jsrc, e.SourceID), append(jid, e.EventID)
		}
	}
	psrc, pid := make([]string, len(read.Pending)), make([]string, len(read.Pending))
	for i, e := range read.Pending {
		psrc[i], pid[i] = e.SourceID, e.EventID
	}
	b.Queue(lockOperationsSQL, c.keys)
	// The guard reads the outbox by the run (kernel_event_outbox_undelivered_run)
	// and the enqueue writes it: both on generic plans without sequential
	// scans (outbox.queueIndexedRead says why). The settings are local to
	// the transaction, which the caller's COMMIT ends: no statement to
	// restore them.
	pgplan.Force(b, "")
	b.Queue(readUnchangedSQL, c.project, c.runID, c.ops, jsrc, jid, psrc, pid)
	if err := outbox.QueueEnqueueNew(b, writes...); err != nil {
		return nil, fmt.Errorf("reconcile: enqueue %d events of %s/%s: %w", len(writes), c.project, c.runID, err)
	}
	return out, nil
}

// ErrRepeat is QueueReconcileAll's refusal of a request that would repeat
// a reconciliation already recorded: ReconcileAllTx answers it.
var ErrRepeat = errors.New("reconcile: a request repeats a recorded reconciliation")

// Stale reports whether err is QueueReconcileAll's guard or enqueue
// refusing to write on what the caller read (RK004, or the outbox key's
// unique violation): the caller rolls back and calls ReconcileAllTx.
func Stale(err error) bool {
	var pe *pgconn.PgError
	return errors.As(err, &pe) && pe.Code == runChangedCode || outbox.AlreadyEnqueued(err)
}

// runChangedCode is readUnchangedSQL's SQLSTATE.
const runChangedCode = "RK004"

// decide applies the reconcile rules to one request against the
// operation's events (journaled and pending, in order) and returns the
// event to write, or the earlier one a repeat returns (Repeated).
func (s *Service) decide(req ReconcileParams, evs []kernel.Event) (Recorded, error) {
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
		return Recorded{}, kernel.Errorf(kernel.ENotFound,
			"no tool.started for operation %q of run %q in project %q; check the ids (GET /v1/agent/operations lists unresolved operations)",
			req.OperationID, req.RunID, req.Project)
	}
	var latest *kernel.Event
	if len(recs) > 0 {
		latest = &recs[len(recs)-1]
	}
	now := s.now().Truncate(time.Microsecond)
	// Event time is what orders an operation's reconciliations (the next
	// reconcile's latest, the operator's queue, the verdicts' resolutions),
	// so a new one is dated after the one it supersedes even when this
	// process's clock is behind the one that wrote it (the API and the
	// sweep on two machines); otherwise a ruling would sort before the
	// supervisor's reconciliation it overrides and leave it the newest.
	if latest != nil && !now.After(latest.TS) {
		now = latest.TS.Truncate(time.Microsecond).Add(time.Microsecond)
	}

	var eventID string
	if req.IdempotencyKey != "" {
		eventID = keyedEventID(req)
		// A ruling recorded before ids with "/" got the qualified form
		// (eventIDFor) carries the plain one: a repeat of it is still a
		// repeat.
		legacy := legacyEventID(req, keyedSuffix(req))
		for _, r := range recs {
			if r.SourceID == kernel.SourceKernel && (r.EventID == eventID || r.EventID == legacy) {
				if sameReconciliation(r, req) {
					return Recorded{Event: r, Repeated: true}, nil
				}
				return Recorded{}, kernel.Errorf(kernel.EConflict,
					"idempotency key %q was already used for a different reconciliation of this operation (event %s); use a new key for a new one",
					req.IdempotencyKey, r.Key())
			}
		}
	} else {
		if latest != nil && sameReconciliation(*latest, req) && now.Sub(latest.TS) <= s.cfg.Window {
			return Recorded{Event: *latest, Repeated: true}, nil
		}
		eventID = bodyEventID(req, len(recs)+1)
	}

	if !req.ruling() {
		// The supervisor settles unsettled operations only: it never
		// overrides an operator, and a reconciliation built from a listing
		// that an earlier reconciliation or a late terminal event has since
		// overtaken is refused rather than recorded over it.
		for _, r := range recs {
			if kernel.IsOperator(r.Actor) {
				return Recorded{}, kernel.Errorf(kernel.EConflict,
					"operation %q of run %q is already settled by an operator's ruling (%s by %s); a supervisor never overrides an operator",
					req.OperationID, req.RunID, r.Key(), r.Actor)
			}
		}
		for _, e := range evs {
			if e.Settles() {
				return Recorded{}, kernel.Errorf(kernel.EConflict,
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
		return Recorded{}, err
	}
	sk := started.Key()
	ev.ParentEventID = &sk
	return Recorded{Event: ev}, nil
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
func keyedEventID(r ReconcileParams) string { return eventIDFor(r, keyedSuffix(r)) }

func keyedSuffix(r ReconcileParams) string {
	return "k-" + digest(r.Project, r.Actor, r.IdempotencyKey)[:24]
}

// bodyEventID derives the event id from the request and the number of
// reconciliations before it: the same body at the same point of the
// operation's history is the same event, while the same body after another
// reconciliation is a new one.
func bodyEventID(r ReconcileParams, n int) string {
	ev := ""
	if r.Evidence != nil {
		if c, err := kernel.Canonical(r.Evidence); err == nil {
			ev = string(c)
		}
	}
	d := digest(r.Project, r.Actor, r.Effect, r.Note, r.Basis, ev)[:16]
	return eventIDFor(r, strconv.Itoa(n)+"-"+d)
}

// eventIDFor is the id of a reconciliation of r's operation:
// <run_id>/<operation_id>/reconciled/<suffix>, readable, when that names
// one operation only. Agents' run and operation ids may contain "/", and
// then it does not: run "a" operation "b/c" and run "a/b" operation "c"
// would share every id, and the second operation's ruling would conflict
// with the first's (refused, or parked by the publisher). Such ids, and
// ids past kernel.MaxKeyLen, take reconciled/<digest of project, run and
// operation>/<suffix> instead (three components, never four: no clash with
// the readable form).
func eventIDFor(r ReconcileParams, suffix string) string {
	if strings.Contains(r.RunID, "/") || strings.Contains(r.OperationID, "/") {
		return qualifiedEventID(r, suffix)
	}
	return legacyEventID(r, suffix)
}

// legacyEventID is the id every reconciliation had before eventIDFor
// qualified ids with "/".
func legacyEventID(r ReconcileParams, suffix string) string {
	id := r.RunID + "/" + r.OperationID + "/reconciled/" + suffix
	if len(id) > kernel.MaxKeyLen {
		return qualifiedEventID(r, suffix)
	}
	return id
}

func qualifiedEventID(r ReconcileParams, suffix string) string {
	return "reconciled/" + digest(r.Project, r.RunID, r.OperationID)[:32] + "/" + suffix
}

// sameReconciliation reports whether the recorded event says what req says.
func sameReconciliation(e kernel.Event, req ReconcileParams) bool {
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
	ops, err := operationEvents(ctx, s.pool, project, runID, operationID)
	if err != nil {
		return nil, fmt.Errorf("history of %s/%s/%s: %w", project, runID, operationID, err)
	}
	if len(ops) == 0 {
		return nil, kernel.Errorf(kernel.ENotFound, "no events for operation %q of run %q in project %q", operationID, runID, project)
	}
	verdicts, err := verdictEvents(ctx, s.pool, project, runID, operationID)
	if err != nil {
		return nil, fmt.Errorf("history of %s/%s/%s: verdicts: %w", project, runID, operationID, err)
	}
	return mergeEvents(ops, verdicts), nil
}

// operationEvents returns every event of one operation — in the journal,
// and still on its way in the outbox, so decisions never miss a
// reconciliation that is pending — deduplicated by key (the journal's copy
// wins) in event-time order. The outbox is read first (see
// outbox.Pending).
func operationEvents(ctx context.Context, q outbox.DBTX, project, runID, operationID string) ([]kernel.Event, error) {
	pending, err := outbox.Pending(ctx, q, outbox.PendingFilter{Project: project, RunID: runID, OperationID: operationID})
	if err != nil {
		return nil, err
	}
	journaled, err := journal.OperationEvents(ctx, q, project, runID, operationID)
	if err != nil {
		return nil, err
	}
	return mergePending(journaled, pending), nil
}

// verdictEvents returns the supervisor.verdict events of a run that name
// the operation, journaled or pending.
func verdictEvents(ctx context.Context, q outbox.DBTX, project, runID, operationID string) ([]kernel.Event, error) {
	pending, err := outbox.Pending(ctx, q, outbox.PendingFilter{Project: project, RunID: runID, Types: []string{kernel.TypeSupervisorVerdict}})
	if err != nil {
		return nil, err
	}
	named := pending[:0]
	for _, ev := range pending {
		var v kernel.Verdict
		if ev.DecodeData(&v) == nil && slices.Contains(v.OperationIDs, operationID) {
			named = append(named, ev)
		}
	}
	journaled, err := journal.VerdictsNaming(ctx, q, project, runID, operationID)
	if err != nil {
		return nil, err
	}
	return mergePending(journaled, named), nil
}

// mergePending merges journaled events (in journal order) with pending
// ones (in enqueue order), dropping a pending copy of a journaled key, in
// event-time order: journaled before pending at the same instant, each
// side keeping its own order.
func mergePending(journaled []kernel.StoredEvent, pending []kernel.Event) []kernel.Event {
	seen := make(map[kernel.EventKey]bool, len(journaled))
	out := make([]kernel.Event, 0, len(journaled)+len(pending))
	for _, e := range journaled {
		seen[e.Key()] = true
		out = append(out, e.Event)
	}
	for _, e := range pending {
		if !seen[e.Key()] {
			out = append(out, e)
		}
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].TS.Before(out[j].TS) })
	return out
}

func mergeEvents(a, b []kernel.Event) []kernel.Event {
	out := append(append([]kernel.Event(nil), a...), b...)
	sort.SliceStable(out, func(i, j int) bool { return out[i].TS.Before(out[j].TS) })
	return out
}
