package triage

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"sort"

	"github.com/jackc/pgx/v5"

	"github.com/seed-7bc021c3/reckon/kernel"
	"github.com/seed-7bc021c3/reckon/kernel/operations"
	"github.com/seed-7bc021c3/reckon/kernel/outbox"
	"github.com/seed-7bc021c3/reckon/pipeline"
)

// errAlreadyTriaged says the same set of operations already has a verdict
// enqueued (a concurrent sweep that got past the lock, which the lock
// prevents, or a retried write): nothing more is written.
var errAlreadyTriaged = errors.New("this wall's operations already have a supervisor verdict")

// wallKey identifies a wall by its project, run and set of operations:
// an operation set can be verdicted once, since a verdict settles every
// operation in it. It names the verdict event and keys the reconciliations.
func wallKey(w pipeline.Wall) string {
	ids := w.OperationIDs()
	sort.Strings(ids)
	h := sha256.New()
	for _, p := range append([]string{w.Project, w.RunID}, ids...) {
		fmt.Fprintf(h, "%d:%s", len(p), p)
	}
	return hex.EncodeToString(h.Sum(nil))[:24]
}

// record enqueues supervisor.verdict and one operation.reconciled per
// operation (the rules an operator's ruling goes through) in ONE
// transaction, on the connection that holds the run's lock: either the
// whole wall is journaled or nothing is. It writes on the run as read
// under the lock when it can (recordOnRead), the checked way
// (ReconcileAllTx) otherwise. The commit of the run's last wall releases
// the lock in the same round trip.
func (s *Sweeper) record(ctx context.Context, lk *runLock, w pipeline.Wall, d pipeline.Decision, last bool) (kernel.Event, []kernel.Event, error) {
	key := wallKey(w)
	now := s.cfg.Now().UTC()
	verdict, err := kernel.NewEvent(kernel.SourceKernel, w.RunID+"/verdict/"+key, w.Project, w.RunID,
		kernel.TypeSupervisorVerdict, kernel.ActorSupervisor, now, kernel.Verdict{
			Kind:           kernel.VerdictKindReconciliation,
			NeedsAttention: d.NeedsAttention,
			Causes:         nonNil(d.Causes),
			Remedies:       nonNil(d.Remedies),
			Lesson:         d.Lesson,
			OperationIDs:   w.OperationIDs(),
			Supervisor:     d.Supervisor,
			Model:          d.Model,
			PromptVersion:  d.PromptVersion,
			WallDigest:     w.Digest,
			Part:           w.Part,
			Parts:          w.Parts,
			SettlePolicy:   d.SettlePolicy,
		})
	if err != nil {
		return kernel.Event{}, nil, err
	}
	if len(verdict.EventID) > kernel.MaxKeyLen {
		verdict.EventID = "verdict/" + key
	}

	vk := verdict.Key()
	reqs, err := s.reconcileParams(w, d, vk)
	if err != nil {
		return kernel.Event{}, nil, err
	}
	if lk.read != nil {
		recs, err := s.recordOnRead(ctx, lk, verdict, reqs, last)
		if !errors.Is(err, errReadStale) {
			return verdict, recs, err
		}
		// The read is no longer the run: this wall and the run's next
		// ones are written the checked way, until a rebuild reads again.
		lk.read = nil
		s.cfg.Metrics.writes.WithLabelValues(writeReread).Inc()
	}

	// BEGIN rides in ReconcileAllTx's first batch (lazyTx).
	tx := &lazyTx{conn: lk.conn.Conn()}
	if last {
		tx.opts.CommitQuery = commitUnlockSQL
	}
	defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }()

	// The verdict and all of the wall's reconciliations in two round trips
	// (the rules of ReconcileTx, the operator's path, applied to each; the
	// verdict enqueued in the same statement).
	done, err := s.ops.ReconcileAllTx(ctx, tx, reqs, verdict)
	if err != nil {
		if kernel.ErrorCode(err) == kernel.EConflict {
			_ = tx.Rollback(ctx)
			// This wall's verdict already enqueued (with another payload)
			// is a wall already triaged; anything else is an operator's
			// ruling (a supervisor never overrides one) or another
			// reconciliation landed since the listing: the whole wall is
			// rolled back and rebuilt without that operation. Read only on
			// a conflict, the rare path.
			if _, triaged, serr := outbox.Stored(ctx, s.pool, vk); serr == nil && triaged {
				return kernel.Event{}, nil, errAlreadyTriaged
			}
			return kernel.Event{}, nil, fmt.Errorf("%w: %v", errSettledMeanwhile, err)
		}
		return kernel.Event{}, nil, fmt.Errorf("triage: reconcile: %w", err)
	}
	recs := make([]kernel.Event, len(done))
	for i, r := range done {
		recs[i] = r.Event
	}
	if err := tx.Commit(ctx); err != nil {
		return kernel.Event{}, nil, fmt.Errorf("triage: commit wall %s/%s: %w", w.Project, w.RunID, err)
	}
	if last {
		lk.held = false
	}
	s.cfg.Metrics.writes.WithLabelValues(writeChecked).Inc()
	return verdict, recs, nil
}

// reconcileParams are the wall's reconciliations as requests of the
// operations service (the rules of an operator's ruling), keyed by the
// wall's verdict vk.
func (s *Sweeper) reconcileParams(w pipeline.Wall, d pipeline.Decision, vk kernel.EventKey) ([]operations.ReconcileParams, error) {
	key := wallKey(w)
	reqs := make([]operations.ReconcileParams, 0, len(d.Operations))
	for _, v := range d.Operations {
		op, _ := w.Operation(v.OperationID)
		evidence, err := operationEvidence(vk, w.Digest, op.Evidence)
		if err != nil {
			return nil, fmt.Errorf("triage: evidence of %s: %w", v.OperationID, err)
		}
		reqs = append(reqs, operations.ReconcileParams{
			Project: w.Project, RunID: w.RunID, OperationID: v.OperationID,
			Effect: v.Effect, Note: v.Note, Evidence: evidence, ProposedEffect: v.ProposedEffect,
			Basis: v.Basis, Actor: kernel.ActorSupervisor,
			IdempotencyKey: "wall/" + key,
		})
	}
	return reqs, nil
}

// errReadStale says a wall could not be written on the run as read under
// its lock (operations.QueueReconcileAll refused: the run changed since,
// an event was already enqueued, a request repeats a reconciliation or
// breaks a rule on the read); record then writes it the checked way,
// reading again under the operations' locks.
var errReadStale = errors.New("the run changed since it was read")

// recordOnRead writes the wall (the verdict and reqs) on the run as read
// under its lock, in ONE round trip: BEGIN, the operations' locks, a
// guard that the run has not changed since the read, the enqueue, COMMIT
// and, for the run's last wall, the release of the run's lock. What would
// make the read's answers wrong aborts the transaction before its COMMIT
// (see operations.QueueReconcileAll) and is errReadStale, after a
// rollback; nothing is written then.
func (s *Sweeper) recordOnRead(ctx context.Context, lk *runLock, verdict kernel.Event, reqs []operations.ReconcileParams, last bool) ([]kernel.Event, error) {
	if len(reqs) == 0 {
		return nil, errReadStale // a verdict alone: ReconcileAllTx writes it
	}
	b := &pgx.Batch{}
	b.Queue("BEGIN")
	done, err := s.ops.QueueReconcileAll(b, *lk.read, reqs, verdict)
	if err != nil {
		// A repeat, a rule the read says is broken (a conflict), an
		// invalid request: nothing is sent yet, and the checked way gives
		// each the answer it always has (a conflict rebuilds the wall).
		return nil, errReadStale
	}
	b.Queue("COMMIT")
	if last {
		// Queued behind COMMIT: a statement after an error is not run,
		// so the lock is never released before the wall is committed.
		b.Queue(unlockAllSQL)
	}
	conn := lk.conn.Conn()
	if err := conn.SendBatch(ctx, b).Close(); err != nil {
		if conn.PgConn().TxStatus() != 'I' {
			if _, rerr := conn.Exec(context.WithoutCancel(ctx), "ROLLBACK"); rerr != nil {
				return nil, fmt.Errorf("triage: roll back wall of %s/%s: %w (after %v)", verdict.Project, verdict.RunID, rerr, err)
			}
		}
		if operations.Stale(err) {
			return nil, errReadStale
		}
		return nil, fmt.Errorf("triage: write wall of %s/%s: %w", verdict.Project, verdict.RunID, err)
	}
	if last {
		lk.held = false
	}
	recs := make([]kernel.Event, len(done))
	for i, r := range done {
		recs[i] = r.Event
	}
	// The next wall of the run is written on the same read: what this one
	// enqueued is the run's pending events now, not a change.
	lk.read.Pending = append(append(lk.read.Pending, verdict), recs...)
	s.cfg.Metrics.writes.WithLabelValues(writeOnRead).Inc()
	return recs, nil
}

// reconcileEvidence is the evidence attached to a supervisor
// reconciliation: which verdict and wall it came from, and the probe
// findings the supervisor saw for the operation.
type reconcileEvidence struct {
	Verdict    kernel.EventKey     `json:"verdict"`
	WallDigest string              `json:"wall_digest"`
	Probes     []pipeline.Evidence `json:"probes,omitempty"`
}

// operationEvidence is one operation's reconcileEvidence, its probe
// evidence bounded so that the whole fits operations.MaxEvidenceBytes. A
// wall built by buildWalls already fits (wallEvidenceBudget leaves room for
// the envelope): the bound changes nothing then, and keeps any other wall
// from failing its record on every sweep.
func operationEvidence(verdict kernel.EventKey, wallDigest string, probes []pipeline.Evidence) (json.RawMessage, error) {
	envelope, err := json.Marshal(reconcileEvidence{Verdict: verdict, WallDigest: wallDigest})
	if err != nil {
		return nil, err
	}
	budget := operations.MaxEvidenceBytes - len(envelope) - len(`,"probes":`)
	b, err := json.Marshal(reconcileEvidence{Verdict: verdict, WallDigest: wallDigest, Probes: boundEvidence(probes, budget)})
	if err != nil {
		return nil, err
	}
	if len(b) > operations.MaxEvidenceBytes {
		// Only fixed fields (probe names, findings, times) are left over
		// the cap: many more probes than any probe set holds.
		return nil, fmt.Errorf("%d bytes even with every detail and provenance cut; at most %d", len(b), operations.MaxEvidenceBytes)
	}
	return b, nil
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}
