package probe

import (
	"context"
	"fmt"

	"github.com/seed-7bc021c3/reckon/kernel"
	"github.com/seed-7bc021c3/reckon/pipeline"
)

// ChildName names the delegation probe in evidence.
const ChildName = "journal.child_run"

// RunEvents is what the delegation probe reads of the journal: a run's
// events in journal order (the kernel's journal store serves it).
type RunEvents interface {
	RunEvents(ctx context.Context, project, runID string) ([]kernel.StoredEvent, error)
}

// Child replays a delegated child run from the journal, as the kernel's
// summarize_child_run does at failure time, but now: operations settled
// since (reconciled by hand, for instance) count. A child run that has
// ended with every operation settled proves the delegation occurred (none
// when it performed no operation, or every one settled with effect none;
// inconclusive when one settled unknown) — the kernel's own rule for a
// delegation's effect (kernel.ChildSummary.Effect). A child still
// running, never seen, or with unresolved operations is inconclusive.
//
// Only the kernel's delegations are probed, as the other probes read only
// what the kernel started: an agent's tool.started naming the tool
// "delegate" is its account of a call, and the child run id in it (or
// derived from it) is whatever run the agent pointed at — its own, which it
// may have ended with nothing in it, or anyone's that ended settled. A
// replay of that run is no proof of what the agent's call did. And only
// the child the kernel starts for the operation (kernel.ChildRunID) is
// replayed, and only when the kernel wrote every event of it: a child run
// holding another source's events (journaled before migration 00028
// refused agents' writes beneath kernel runs) is inconclusive.
type Child struct {
	Journal RunEvents
}

// Name implements Probe.
func (p Child) Name() string { return ChildName }

// Probe implements Probe.
func (p Child) Probe(ctx context.Context, run Run, op pipeline.WallOperation) (pipeline.Evidence, bool) {
	if op.Tool != kernel.DelegateTool || op.StartedKey.SourceID != kernel.SourceKernel {
		return pipeline.Evidence{}, false
	}
	at := run.now()
	childID := kernel.ChildRunID(run.RunID, op.OperationID)
	if op.ChildRunID != "" && op.ChildRunID != childID {
		return evidence(ChildName, pipeline.FindingInconclusive,
			fmt.Sprintf("the operation names child run %s, not %s, the run the kernel starts for it", op.ChildRunID, childID), at,
			map[string]any{"child_run_id": op.ChildRunID}), true
	}
	evs, err := p.Journal.RunEvents(ctx, run.Project, childID)
	if err != nil {
		// The journal could not be read now: no finding about the child.
		return evidence(ChildName, pipeline.FindingUnavailable, fmt.Sprintf("replay child run %s: %v", childID, err), at,
			map[string]any{"child_run_id": childID}), true
	}
	var lastSeq int64
	plain := make([]kernel.Event, len(evs))
	for i, e := range evs {
		if e.SourceID != kernel.SourceKernel {
			return evidence(ChildName, pipeline.FindingInconclusive,
				fmt.Sprintf("child run %s holds events of source %q: only a run the kernel wrote alone can be replayed as proof", childID, e.SourceID), at,
				map[string]any{"child_run_id": childID}), true
		}
		lastSeq, plain[i] = e.Seq, e.Event
	}
	// The kernel's own rule (kernel.Replay), now rather than at failure
	// time: operations settled since count.
	r := kernel.Replay(plain)
	started, ended, order, open := r.Started, r.Ended, r.Operations, r.Unsettled
	unresolved := len(open)
	prov := map[string]any{"child_run_id": childID, "events": len(evs), "last_seq": lastSeq,
		"child_ops_total": len(order), "child_ops_unresolved": unresolved, "ended": ended}
	switch {
	case !started:
		return evidence(ChildName, pipeline.FindingInconclusive,
			fmt.Sprintf("child run %s has no run.started in the journal: it may never have started, or its events are not yet published", childID), at, prov), true
	case !ended:
		return evidence(ChildName, pipeline.FindingInconclusive,
			fmt.Sprintf("child run %s has not ended in the journal (%d operations, %d unresolved)", childID, len(order), unresolved), at, prov), true
	case unresolved > 0:
		return evidence(ChildName, pipeline.FindingInconclusive,
			fmt.Sprintf("child run %s ended with %d of %d operations unresolved (%v)", childID, unresolved, len(order), open), at, prov), true
	case len(order) == 0:
		return evidence(ChildName, pipeline.FindingNone,
			fmt.Sprintf("child run %s ended having performed no operations", childID), at, prov), true
	}
	// The settled operations' own effects, as kernel.ChildSummary reads
	// them: a child whose every call was refused before it ran did
	// nothing, and one settled unknown proves neither way.
	sum := r.Summary()
	prov["child_ops_none"], prov["child_ops_unknown"] = sum.None, sum.Unknown
	switch {
	case sum.Unknown > 0:
		return evidence(ChildName, pipeline.FindingInconclusive,
			fmt.Sprintf("child run %s ended with all %d operations settled, %d of them as unknown", childID, len(order), sum.Unknown), at, prov), true
	case sum.None == len(order):
		return evidence(ChildName, pipeline.FindingNone,
			fmt.Sprintf("child run %s ended and all %d of its operations are settled with effect none", childID, len(order)), at, prov), true
	}
	return evidence(ChildName, pipeline.FindingOccurred,
		fmt.Sprintf("child run %s ended and all %d of its operations are settled in the journal", childID, len(order)), at, prov), true
}
