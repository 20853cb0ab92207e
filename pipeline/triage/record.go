package triage

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"sort"
	"time"

	"github.com/seed-7bc021c3/reckon/kernel"
	"github.com/seed-7bc021c3/reckon/kernel/operations"
	"github.com/seed-7bc021c3/reckon/pipeline"
)

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

// record journals the wall's decision: supervisor.verdict and one
// operation.reconciled per operation (the rules an operator's ruling goes
// through), in ONE transaction on the connection that holds the run's
// lock, either the whole wall or nothing (operations.TriageRun.WriteWall,
// whose path it counts). The commit of the run's last wall releases the
// lock in the same round trip.
func (s *Sweeper) record(ctx context.Context, run *operations.TriageRun, w pipeline.Wall, d pipeline.Decision, last bool) (kernel.Event, []kernel.Event, error) {
	verdict, err := verdictEvent(w, d, s.cfg.Now().UTC())
	if err != nil {
		return kernel.Event{}, nil, err
	}
	reqs, err := s.reconcileParams(w, d, verdict.Key())
	if err != nil {
		return kernel.Event{}, nil, err
	}
	written, err := run.WriteWall(ctx, verdict, reqs, last)
	s.countWrite(written, err)
	if kernel.ErrorCode(err) == kernel.EConflict {
		// An operator's ruling (a supervisor never overrides one) or
		// another reconciliation landed since the listing: the whole wall
		// was rolled back, and is rebuilt without that operation.
		return kernel.Event{}, nil, fmt.Errorf("%w: %v", errSettledMeanwhile, err)
	}
	if err != nil {
		return kernel.Event{}, nil, err
	}
	return verdict, written.Reconciled, nil
}

// verdictEvent is the wall's supervisor.verdict, named by its wallKey: an
// operation set is verdicted once.
func verdictEvent(w pipeline.Wall, d pipeline.Decision, now time.Time) (kernel.Event, error) {
	key := wallKey(w)
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
		return kernel.Event{}, err
	}
	if len(verdict.EventID) > kernel.MaxKeyLen {
		verdict.EventID = "verdict/" + key
	}
	return verdict, nil
}

// countWrite counts how a wall was written (reckon_triage_wall_writes_total).
func (s *Sweeper) countWrite(w operations.WallWrite, err error) {
	if w.Reread {
		s.cfg.Metrics.writes.WithLabelValues(writeReread).Inc()
	}
	switch {
	case err != nil:
	case w.OnRead:
		s.cfg.Metrics.writes.WithLabelValues(writeOnRead).Inc()
	default:
		s.cfg.Metrics.writes.WithLabelValues(writeChecked).Inc()
	}
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
