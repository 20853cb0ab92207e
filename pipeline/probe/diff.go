package probe

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/seed-7bc021c3/reckon/kernel"
	"github.com/seed-7bc021c3/reckon/kernel/manifest"
	"github.com/seed-7bc021c3/reckon/pipeline"
)

// DiffName names the workspace-diff probe in evidence.
const DiffName = "workspace.diff"

// errStoreUnreadable marks what a probe could not read now — the database
// its records live in, a workspace it may not enter — as opposed to what
// it read and found wanting: the former is unavailable evidence.
var errStoreUnreadable = errors.New("could not be read now")

// ManifestReader reads the manifests the kernel's worker stored
// (manifest.Store does).
type ManifestReader interface {
	Get(ctx context.Context, k manifest.Key) (manifest.Manifest, bool, error)
}

// Diff settles a workspace tool's uncertain operation by comparing the
// run's workspace with the manifest the kernel recorded just before the
// call: unchanged proves the call left no durable effect (none), changed
// proves it did (occurred), naming the changed paths.
//
// It compares against the manifest the kernel recorded before the run's
// next operation when one started (so an operation and its re-issue are
// told apart), otherwise against the workspace as it is now, once the run
// is over. A change is this operation's only when every earlier operation
// had ended before its before-manifest was taken; no change proves none
// only when the operation itself can no longer act (its worker answered,
// or its timeout bound has passed; otherwise the verdict is deferred).
// An unconfined sandbox never yields none, and a truncated manifest
// proves nothing. Why this is sound, and what it does not cover:
// docs/internals.md#workspace-diff-probe. TestDiffProbe.
type Diff struct {
	// Root is <RECKON_DATA_DIR>/workspaces; Owners tells the kernel's
	// runs; Manifests reads the stored manifests. All are required.
	Root      string
	Owners    kernel.RunOwners
	Manifests ManifestReader
	// Limits bound the walk of the current workspace.
	Limits manifest.Limits
	// Grace bounds an MCP call like MCP.Grace; default 5m.
	Grace time.Duration
}

// Name implements Probe.
func (p Diff) Name() string { return DiffName }

// maxNamed bounds the paths a finding names and its provenance lists, and
// maxPathBytes each path: the command under judgement chose those names and
// how many there are, and evidence over the reconciliation's size cap
// (operations.MaxEvidenceBytes) could never be recorded, leaving the wall to
// fail on every sweep.
const (
	maxNamed     = 20
	maxPathBytes = 256
)

// named joins at most maxNamed paths, each cut to maxPathBytes, and says how
// many more there were.
func named(paths []string) string {
	out := make([]string, 0, min(len(paths), maxNamed)+1)
	for i, p := range paths {
		if i == maxNamed {
			out = append(out, fmt.Sprintf("… %d more", len(paths)-maxNamed))
			break
		}
		out = append(out, kernel.Abbreviate(p, maxPathBytes))
	}
	return strings.Join(out, ", ")
}

// Probe implements Probe.
func (p Diff) Probe(ctx context.Context, run Run, op pipeline.WallOperation) (pipeline.Evidence, bool) {
	if op.StartedKey.SourceID != kernel.SourceKernel || p.Manifests == nil {
		return pipeline.Evidence{}, false
	}
	self, idx := startedOp(run, op.OperationID)
	if idx < 0 || self.Manifest == nil {
		// Not a workspace tool, or a run from before manifests.
		return pipeline.Evidence{}, false
	}
	d := &diffProbe{p: p, run: run, op: op, self: self, idx: idx, at: run.now(), prov: map[string]any{"before_digest": self.Manifest.Digest}}
	before, err := p.stored(ctx, run, self)
	if err != nil {
		return d.storedFailed("the manifest recorded before "+op.OperationID, err), true
	}
	cmp, ev, stop := d.comparison(ctx, before)
	if stop {
		return ev, true
	}
	return d.compare(before, cmp), true
}

// diffProbe is one operation's diff on its way through Probe's steps.
type diffProbe struct {
	p    Diff
	run  Run
	op   pipeline.WallOperation
	self StartedOp
	idx  int
	at   time.Time
	prov map[string]any
}

func (d *diffProbe) finding(finding, format string, args ...any) pipeline.Evidence {
	return evidence(DiffName, finding, fmt.Sprintf(format, args...), d.at, d.prov)
}

func (d *diffProbe) inconclusive(format string, args ...any) pipeline.Evidence {
	return d.finding(pipeline.FindingInconclusive, format, args...)
}

// storedFailed is the evidence of a stored manifest that could not be
// used: unavailable when the store could not be read now, inconclusive
// when the manifest itself proves nothing.
func (d *diffProbe) storedFailed(what string, err error) pipeline.Evidence {
	if errors.Is(err, errStoreUnreadable) {
		return d.finding(pipeline.FindingUnavailable, "%s: %v", what, err)
	}
	return d.inconclusive("%s: %v", what, err)
}

// diffPoint is what the before-manifest is compared with.
type diffPoint struct {
	after   manifest.Manifest
	against string
	// pre is what a none found there rests on: the call unable to act
	// after it (its worker answered, or a wait measured on one clock).
	pre pipeline.Preconditions
	// over says the call could no longer act at that point.
	over bool
}

// comparison is the manifest recorded before the run's next operation
// when one started, else the workspace now once the run is over and the
// call can no longer act; stop says the probe answers ev instead.
func (d *diffProbe) comparison(ctx context.Context, before manifest.Manifest) (cmp diffPoint, ev pipeline.Evidence, stop bool) {
	run, op, self, idx := d.run, d.op, d.self, d.idx
	cmp.pre.Answered = self.Answered
	if idx+1 < len(run.Started) {
		next := run.Started[idx+1]
		if next.Manifest == nil {
			return cmp, d.inconclusive("the later operation %s (%s) ran without a workspace manifest, so nothing records the workspace between the two", next.OperationID, next.Tool), true
		}
		after, err := d.p.stored(ctx, run, next)
		if err != nil {
			return cmp, d.storedFailed("the manifest recorded before the later operation "+next.OperationID, err), true
		}
		cmp.after, cmp.against = after, fmt.Sprintf("the workspace as recorded before the later operation %s", next.OperationID)
		d.prov["against"] = map[string]any{"operation_id": next.OperationID, "digest": next.Manifest.Digest, "taken_at": after.TakenAt}
		// The later manifest was taken after the kernel recorded this
		// call's end: that event's time, on the workflow's clock like the
		// call's start, bounds it from below.
		cmp.over = over(self, self.EndedAt, d.p.Grace)
		if !self.Answered && cmp.over {
			el := pipeline.WorkflowElapsed(self.StartedAt, self.EndedAt, actBound(self, d.p.Grace))
			cmp.pre.Elapsed = &el
		}
		return cmp, ev, false
	}
	if op.State == "stale_in_flight" || !(run.Ended || op.State == "crash_window") {
		return cmp, d.inconclusive("the run may still be running: a later step not yet in the journal could be changing the workspace"), true
	}
	if !self.Answered {
		el, passed, why, due := run.waited(op.JournaledAt, actBound(self, d.p.Grace))
		if !passed {
			ev := d.inconclusive("%s may still be running (its timeout plus slack); the workspace is compared once it cannot change any more: %s", op.OperationID, why)
			ev.RecheckAfter = due
			return cmp, ev, true
		}
		cmp.pre.Elapsed = &el
	}
	after, err := d.p.current(ctx, run, before)
	if err != nil {
		return cmp, d.storedFailed("the run's workspace", err), true
	}
	cmp.after, cmp.against, cmp.over = after, "the workspace now", !self.Unconfined
	d.prov["against"] = map[string]any{"current": true, "digest": after.Digest(), "taken_at": after.TakenAt}
	return cmp, ev, false
}

// compare reads what the before-manifest and the comparison point prove.
func (d *diffProbe) compare(before manifest.Manifest, cmp diffPoint) pipeline.Evidence {
	op, self, run := d.op, d.self, d.run
	if cmp.after.Truncated != "" {
		return d.inconclusive("%s is incomplete (%s): it proves nothing", cmp.against, cmp.after.Truncated)
	}
	// Every earlier operation must be unable to act after this one's
	// baseline, not merely by the comparison point: one still running
	// after the before-manifest was taken could have made the change
	// itself. The manifest was taken after the kernel recorded the end of
	// every earlier operation: the latest such time, on the workflow's
	// clock like their starts, bounds it from below.
	baseline := latestEnd(run.Started[:d.idx])
	if s, running := stillActing(run.Started[:d.idx], baseline, d.p.Grace); running {
		return d.inconclusive("the earlier operation %s may still have been running after the manifest recorded before %s was taken, so a change cannot be attributed to %s",
			s.OperationID, op.OperationID, op.OperationID)
	}
	diff := manifest.Compare(before, cmp.after)
	if len(diff.Changes) > 0 {
		changes := diff.Changes
		if len(changes) > maxNamed {
			d.prov["changes_total"] = len(changes)
			changes = changes[:maxNamed]
		}
		for i := range changes {
			changes[i].Path = kernel.Abbreviate(changes[i].Path, maxPathBytes)
		}
		d.prov["changes"] = changes
		return d.finding(pipeline.FindingOccurred, "%s differs from the manifest recorded before %s: %s", cmp.against, op.OperationID, named(diff.Paths()))
	}
	if len(diff.Undecided) > 0 {
		undecided := diff.Undecided
		if len(undecided) > maxNamed {
			d.prov["undecided_total"] = len(undecided)
			undecided = undecided[:maxNamed]
		}
		d.prov["undecided"] = undecided
		return d.inconclusive("%s matches on metadata but content could not be compared for %s", cmp.against, named(diff.Undecided))
	}
	if self.Unconfined {
		return d.inconclusive("%s equals the manifest recorded before %s, but the command ran unconfined (RECKON_SANDBOX_UNCONFINED): it could have written outside the workspace", cmp.against, op.OperationID)
	}
	if !cmp.over {
		return d.inconclusive("%s equals the manifest recorded before %s, but %s may still have been running then", cmp.against, op.OperationID, op.OperationID)
	}
	ev := d.finding(pipeline.FindingNone, "%s equals the manifest recorded before %s, which can no longer act: the call left no durable effect", cmp.against, op.OperationID)
	return withPreconditions(ev, cmp.pre)
}

// latestEnd is the latest time the kernel recorded the end of one of ops
// (zero when it recorded none).
func latestEnd(ops []StartedOp) time.Time {
	var t time.Time
	for _, s := range ops {
		if s.EndedAt.After(t) {
			t = s.EndedAt
		}
	}
	return t
}

// stored reads s's before-manifest and checks it is complete and the one
// its tool.started names.
func (p Diff) stored(ctx context.Context, run Run, s StartedOp) (manifest.Manifest, error) {
	return storedBefore(ctx, p.Manifests, run, s)
}

// storedBefore reads s's before-manifest from r and checks it is complete
// and the one its tool.started names.
func storedBefore(ctx context.Context, r ManifestReader, run Run, s StartedOp) (manifest.Manifest, error) {
	m, ok, err := r.Get(ctx, manifest.Key{Project: run.Project, RunID: run.RunID, OperationID: s.OperationID, Phase: manifest.PhaseBefore})
	switch {
	case err != nil:
		return manifest.Manifest{}, fmt.Errorf("%w: %w", errStoreUnreadable, err)
	case !ok:
		return manifest.Manifest{}, errors.New("not stored")
	case m.Digest() != s.Manifest.Digest:
		return manifest.Manifest{}, fmt.Errorf("the stored manifest's digest %s is not the %s tool.started names", m.Digest(), s.Manifest.Digest)
	case m.Truncated != "":
		return manifest.Manifest{}, fmt.Errorf("incomplete (%s), so it proves nothing", m.Truncated)
	}
	return m, nil
}

// current walks the run's workspace now, from the kernel's own layout
// (Workspaces) and without following a symlink on the way.
func (p Diff) current(ctx context.Context, run Run, before manifest.Manifest) (manifest.Manifest, error) {
	rel, whyNot, err := Workspaces{Root: p.Root, Owners: p.Owners}.Of(ctx, run.Project, run.RunID)
	switch {
	case err != nil:
		return manifest.Manifest{}, fmt.Errorf("%w: could not be established: %w", errStoreUnreadable, err)
	case rel == "":
		return manifest.Manifest{}, errors.New(whyNot)
	}
	root, err := os.Open(p.Root)
	if err != nil {
		return manifest.Manifest{}, fmt.Errorf("%w: the workspaces root cannot be opened: %w", errStoreUnreadable, err)
	}
	defer root.Close()
	ws, err := openNoFollow(root, rel, true)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return manifest.Manifest{}, fmt.Errorf("%s is gone; its absence proves nothing", filepath.Join(p.Root, rel))
	case errors.Is(err, fs.ErrPermission):
		return manifest.Manifest{}, fmt.Errorf("%w: %s cannot be entered by this process: %w", errStoreUnreadable, filepath.Join(p.Root, rel), err)
	case err != nil:
		return manifest.Manifest{}, fmt.Errorf("%s cannot be opened without following a symlink: %w", filepath.Join(p.Root, rel), err)
	}
	defer ws.Close()
	return manifest.TakeAt(ctx, ws, manifest.Options{Limits: p.Limits, HashAlso: before.Hashed(), Now: time.Now})
}
