package triage

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/seed-7bc021c3/reckon/kernel"
	"github.com/seed-7bc021c3/reckon/kernel/operations"
	"github.com/seed-7bc021c3/reckon/pipeline"
	"github.com/seed-7bc021c3/reckon/pipeline/probe"
)

// buildWalls assembles a run's current pile into walls from the run as
// read under its lock (operations.TriageRun.Read): the listed
// operations still unsettled under the run's lock (minus those settled in
// the journal since the listing and those whose reconciliation is already
// enqueued: the listing, over the journal, still shows them unsettled,
// yet they are settled) with args, failures, ages, child summaries, probe evidence and
// the run's earlier verdicts, split deterministically when it exceeds the
// bounds. Filtering the listing instead of listing again is sound because
// settling is monotone: an operation settled once never becomes unsettled.
// Operations that appear after the listing wait for the next sweep, and so
// do those held back (heldBack): operations a probe can tell about only
// later (evidence with RecheckAfter still ahead on the database's clock),
// so that a premature unknown does not settle what a probe will prove, and
// operations a probe could not reach the evidence of now (a finding
// unavailable), so that an unreachable probe never makes one unknown.
// clock is the database's clock as read with the run: the probes measure
// on it.
func (s *Sweeper) buildWalls(ctx context.Context, pile runPile, read operations.RunRead, clock pipeline.Clock) ([]pipeline.Wall, heldBack, error) {
	rk := pile.runKey
	items := unsettledItems(pile, read)
	if len(items) == 0 {
		return nil, heldBack{}, nil
	}
	sortItems(items)
	run := probeRun(rk, read.Journaled)
	run.Clock = clock
	earlier := earlierVerdicts(read.Journaled, s.cfg.MaxEarlierVerdicts)
	now := s.cfg.Now().UTC()

	probes, done := s.cfg.Probes.ForWall(run)
	defer done() // closes the wall's probe sessions, also if a probe panics
	ops := make([]pipeline.WallOperation, 0, len(items))
	var held heldBack
	for _, it := range items {
		op := s.wallOperation(it, now)
		op.JournaledAt = run.JournaledAt(it.OperationID)
		// Bounded here, not only when recorded: the supervisor decides on
		// the evidence that is journaled (see boundEvidence).
		op.Evidence = boundEvidence(probes.Probe(ctx, run, op), wallEvidenceBudget)
		if held.add(op, clock) {
			continue
		}
		ops = append(ops, op)
	}
	if len(ops) == 0 {
		return nil, held, nil
	}
	walls, err := cutWalls(rk, ops, earlier, now, s.cfg.MaxOpsPerWall, s.cfg.MaxWallBytes)
	return walls, held, err
}

// unsettledItems is the pile minus what the read shows settled: in the
// journal since the listing, or by a reconciliation already enqueued.
func unsettledItems(pile runPile, read operations.RunRead) []operations.Item {
	settled := map[string]bool{}
	for _, e := range read.Journaled {
		if e.Settles() {
			settled[e.OperationID()] = true
		}
	}
	for _, e := range read.Pending {
		if e.Type == kernel.TypeOperationReconciled {
			settled[e.OperationID()] = true
		}
	}
	var items []operations.Item
	for _, it := range pile.items {
		if !settled[it.OperationID] {
			items = append(items, it)
		}
	}
	return items
}

// cutWalls splits the run's operations into walls, each with its digest.
func cutWalls(rk runKey, ops []pipeline.WallOperation, earlier []pipeline.EarlierVerdict, now time.Time, maxOps, maxBytes int) ([]pipeline.Wall, error) {
	chunks := split(ops, maxOps, maxBytes)
	walls := make([]pipeline.Wall, len(chunks))
	for i, c := range chunks {
		var err error
		w := pipeline.Wall{
			Project: rk.project, RunID: rk.runID, Part: i + 1, Parts: len(chunks),
			Operations: c, EarlierVerdicts: earlier, BuiltAt: now,
		}
		if w.Digest, err = w.ComputeDigest(); err != nil {
			return nil, err
		}
		walls[i] = w
	}
	return walls, nil
}

// heldBack are the operations a sweep leaves for a later one.
type heldBack struct {
	// deferred: a probe can tell about them only later.
	deferred []string
	// unavailable: a probe could not reach their evidence now; why says
	// what, per operation.
	unavailable []string
	why         []string
}

// add holds op back when its evidence says to, and reports whether it
// did. A probe that could not reach its evidence holds it back whatever
// the other probes found: that evidence might have contradicted them.
func (h *heldBack) add(op pipeline.WallOperation, clock pipeline.Clock) bool {
	var unreachable []string
	for _, e := range op.Evidence {
		if e.Finding == pipeline.FindingUnavailable {
			unreachable = append(unreachable, e.Probe+": "+e.Detail)
		}
	}
	switch {
	case len(unreachable) > 0:
		h.unavailable = append(h.unavailable, op.OperationID)
		h.why = append(h.why, fmt.Sprintf("%s: %s", op.OperationID, strings.Join(unreachable, "; ")))
		return true
	case recheckLater(op.Evidence, clock.Now()):
		h.deferred = append(h.deferred, op.OperationID)
		return true
	}
	return false
}

// recheckLater reports whether some probe can tell about the operation
// only after now.
func recheckLater(evs []pipeline.Evidence, now time.Time) bool {
	for _, e := range evs {
		if e.RecheckAfter != nil && e.RecheckAfter.After(now) {
			return true
		}
	}
	return false
}

func (s *Sweeper) wallOperation(it operations.Item, now time.Time) pipeline.WallOperation {
	op := pipeline.WallOperation{
		OperationID:    it.OperationID,
		Tool:           it.Tool,
		State:          it.State,
		StartedAt:      it.StartedAt.UTC(),
		AgeSeconds:     int64(now.Sub(it.StartedAt).Seconds()),
		Args:           boundArgs(it.Args, s.cfg.MaxArgBytes),
		StartedKey:     it.StartedKey,
		ChildRunID:     it.ChildRunID,
		ReissueOf:      it.ReissueOf,
		Postcondition:  it.Postcondition,
		Server:         it.Server,
		UpstreamTool:   it.UpstreamTool,
		ServerEndpoint: it.ServerEndpoint,
	}
	if op.AgeSeconds < 0 {
		op.AgeSeconds = 0
	}
	// Who wrote each fact goes on the wall: only the kernel's own events
	// are facts, an external agent's report about its own call is a claim.
	op.AgentReported = it.StartedKey.SourceID != kernel.SourceKernel
	failureSource := ""
	if f := it.Failure; f != nil {
		failureSource = it.StartedKey.SourceID
		if it.FailureKey != nil {
			failureSource = it.FailureKey.SourceID
		}
		op.Failure = &pipeline.WallFailure{ErrorType: f.ErrorType, Error: kernel.Abbreviate(f.Error, 2000), Effect: f.EffectiveEffect(),
			ReportedBy: failureSource, AgentReported: failureSource != kernel.SourceKernel}
	}
	if c := it.ChildSummary; c != nil {
		op.ChildOps = &pipeline.ChildSummary{ChildSummary: *c}
		if f := it.Failure; f != nil && f.ChildSummary() != nil {
			op.ChildOps.ReportedBy, op.ChildOps.AgentReported = failureSource, failureSource != kernel.SourceKernel
		} else {
			op.ChildOps.Counted = true
		}
	}
	return op
}

// boundArgs replaces args longer than max with a JSON excerpt, so one huge
// command cannot blow a wall's budget.
func boundArgs(args json.RawMessage, max int) json.RawMessage {
	if len(args) <= max {
		return args
	}
	b, _ := json.Marshal(map[string]any{"truncated": true, "bytes": len(args), "excerpt": kernel.Abbreviate(string(args), max/2)})
	return b
}

// split cuts ops into parts of at most maxOps operations and about
// maxBytes of JSON each (a single operation larger than that is a part of
// its own). The order is the pile's deterministic order, so the same pile
// always splits the same way.
func split(ops []pipeline.WallOperation, maxOps, maxBytes int) [][]pipeline.WallOperation {
	var parts [][]pipeline.WallOperation
	var cur []pipeline.WallOperation
	size := 0
	for _, op := range ops {
		b, _ := json.Marshal(op)
		if len(cur) > 0 && (len(cur) >= maxOps || size+len(b) > maxBytes) {
			parts = append(parts, cur)
			cur, size = nil, 0
		}
		cur = append(cur, op)
		size += len(b)
	}
	if len(cur) > 0 {
		parts = append(parts, cur)
	}
	return parts
}

// probeRun reads what the probes need from the run's events. (An
// operation's own postcondition comes with its listing item, read from the
// same tool.started.)
func probeRun(rk runKey, evs []kernel.StoredEvent) probe.Run {
	run := probe.Run{Project: rk.project, RunID: rk.runID}
	seen := map[string]int{} // operation id → index in run.Started
	// The kernel's waits: the operations the run began to wait for, and
	// those whose wait ended (resumed), in whatever order they came.
	awaited, resumed := map[string]bool{}, map[string]bool{}
	for _, e := range evs {
		// The run's workspace is not read from run.started: probes take it
		// from the kernel's own state (probe.Workspaces).
		switch e.Type {
		case kernel.TypeRunCompleted, kernel.TypeRunFailed:
			run.Ended = true
		case kernel.TypeRunAwaiting:
			awaited[e.OperationID()] = e.SourceID == kernel.SourceKernel || awaited[e.OperationID()]
		case kernel.TypeRunResumed:
			resumed[e.OperationID()] = e.SourceID == kernel.SourceKernel || resumed[e.OperationID()]
		case kernel.TypeToolStarted:
			var d struct {
				kernel.ToolStarted
				Unconfined bool `json:"unconfined"`
			}
			if e.DecodeData(&d) != nil {
				continue
			}
			if _, dup := seen[d.OperationID]; dup {
				continue
			}
			seen[d.OperationID] = len(run.Started)
			so := probe.StartedOp{OperationID: d.OperationID, Tool: d.Tool, JournaledAt: e.IngestedAt}
			if len(d.Postcondition) > 0 && string(d.Postcondition) != "null" {
				var pc probe.Postcondition
				if json.Unmarshal(d.Postcondition, &pc) == nil {
					so.PostconditionPath = pc.Path
				}
			}
			if e.SourceID == kernel.SourceKernel {
				so.StartedAt, so.Args, so.Manifest, so.Unconfined = e.TS, d.Args, d.WorkspaceManifest, d.Unconfined
			}
			run.Started = append(run.Started, so)
		case kernel.TypeToolCompleted, kernel.TypeToolBlocked, kernel.TypeToolFailed:
			if e.SourceID != kernel.SourceKernel {
				continue
			}
			var d kernel.ToolFailed
			if e.DecodeData(&d) != nil {
				continue
			}
			i, ok := seen[d.OperationID]
			if !ok {
				continue
			}
			if e.Type != kernel.TypeToolFailed || d.ErrorType != kernel.ErrorTypeActivityFailed {
				run.Started[i].Answered = true
			}
			if run.Started[i].EndedAt.IsZero() {
				run.Started[i].EndedAt = e.TS
			}
		}
	}
	// A kernel run that waits for a settlement starts no further step
	// until the wait ends, and it ends only on a settlement of the awaited
	// operation, which takes that operation out of every wall: for the
	// probes, nothing more of the run can act, as after its end.
	for op, ok := range awaited {
		if ok && !resumed[op] {
			run.Ended = true
		}
	}
	// Journal order is delivery order: two publishers, or a delivery
	// retried after a failure, can journal a later operation's
	// tool.started first, and the probes would take the earlier operation
	// for the run's last and credit it with what the later one did. The
	// kernel dates its events with the workflow's clock, which orders its
	// operations as they ran; an operation another writer recorded has no
	// such time, and journal order then stands.
	if !slices.ContainsFunc(run.Started, func(s probe.StartedOp) bool { return s.StartedAt.IsZero() }) {
		slices.SortStableFunc(run.Started, func(a, b probe.StartedOp) int { return a.StartedAt.Compare(b.StartedAt) })
	}
	return run
}

// earlierVerdicts returns the run's supervisor verdicts, newest max kept,
// oldest first.
func earlierVerdicts(evs []kernel.StoredEvent, max int) []pipeline.EarlierVerdict {
	var out []pipeline.EarlierVerdict
	for _, e := range evs {
		if e.Type != kernel.TypeSupervisorVerdict {
			continue
		}
		var v kernel.Verdict
		if e.DecodeData(&v) != nil {
			continue
		}
		// The lesson is what carries forward; a few causes and remedies
		// give it context without letting history crowd the wall.
		v.Causes, v.Remedies = firstN(v.Causes, maxEarlierItems), firstN(v.Remedies, maxEarlierItems)
		out = append(out, pipeline.EarlierVerdict{Key: e.Key(), TS: e.TS, Verdict: v})
	}
	if len(out) > max {
		out = out[len(out)-max:]
	}
	return out
}

// maxEarlierItems bounds the causes and remedies kept per earlier verdict.
const maxEarlierItems = 3

func firstN(s []string, n int) []string {
	if len(s) > n {
		return s[:n]
	}
	return s
}
