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
	Now   func() time.Time
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
	at := nowOr(p.Now)
	prov := map[string]any{"before_digest": self.Manifest.Digest}
	inconclusive := func(format string, args ...any) (pipeline.Evidence, bool) {
		return evidence(DiffName, pipeline.FindingInconclusive, fmt.Sprintf(format, args...), at, prov), true
	}
	before, err := p.stored(ctx, run, self)
	if err != nil {
		return inconclusive("the manifest recorded before %s: %v", op.OperationID, err)
	}
	var (
		after   manifest.Manifest
		against string
		cmpAt   time.Time
	)
	if idx+1 < len(run.Started) {
		next := run.Started[idx+1]
		if next.Manifest == nil {
			return inconclusive("the later operation %s (%s) ran without a workspace manifest, so nothing records the workspace between the two", next.OperationID, next.Tool)
		}
		if after, err = p.stored(ctx, run, next); err != nil {
			return inconclusive("the manifest recorded before the later operation %s: %v", next.OperationID, err)
		}
		against, cmpAt = fmt.Sprintf("the workspace as recorded before the later operation %s", next.OperationID), after.TakenAt
		prov["against"] = map[string]any{"operation_id": next.OperationID, "digest": next.Manifest.Digest, "taken_at": after.TakenAt}
	} else {
		if op.State == "stale_in_flight" || !(run.Ended || op.State == "crash_window") {
			return inconclusive("the run may still be running: a later step not yet in the journal could be changing the workspace")
		}
		if done := self.StartedAt.Add(actBound(self, p.Grace)); !self.Answered && at.Before(done) {
			ev, ok := inconclusive("%s may still be running until %s (its timeout plus slack); the workspace is compared once it cannot change any more", op.OperationID, done.UTC().Format(time.RFC3339))
			ev.RecheckAfter = &done
			return ev, ok
		}
		if after, err = p.current(ctx, run, before); err != nil {
			return inconclusive("the run's workspace: %v", err)
		}
		against, cmpAt = "the workspace now", at
		prov["against"] = map[string]any{"current": true, "digest": after.Digest(), "taken_at": after.TakenAt}
	}
	if after.Truncated != "" {
		return inconclusive("%s is incomplete (%s): it proves nothing", against, after.Truncated)
	}
	// Every earlier operation must be unable to act after this one's
	// baseline, not merely by the comparison point: one still running
	// after before.TakenAt could have made the change itself.
	if s, running := stillActing(run.Started[:idx], before.TakenAt, p.Grace); running {
		return inconclusive("the earlier operation %s may still have been running after the manifest recorded before %s (%s), so a change cannot be attributed to %s",
			s.OperationID, op.OperationID, before.TakenAt.UTC().Format(time.RFC3339), op.OperationID)
	}
	d := manifest.Compare(before, after)
	if len(d.Changes) > 0 {
		changes := d.Changes
		if len(changes) > maxNamed {
			prov["changes_total"] = len(changes)
			changes = changes[:maxNamed]
		}
		for i := range changes {
			changes[i].Path = kernel.Abbreviate(changes[i].Path, maxPathBytes)
		}
		prov["changes"] = changes
		return evidence(DiffName, pipeline.FindingOccurred,
			fmt.Sprintf("%s differs from the manifest recorded before %s: %s", against, op.OperationID, named(d.Paths())), at, prov), true
	}
	if len(d.Undecided) > 0 {
		undecided := d.Undecided
		if len(undecided) > maxNamed {
			prov["undecided_total"] = len(undecided)
			undecided = undecided[:maxNamed]
		}
		prov["undecided"] = undecided
		return inconclusive("%s matches on metadata but content could not be compared for %s", against, named(d.Undecided))
	}
	if self.Unconfined {
		return inconclusive("%s equals the manifest recorded before %s, but the command ran unconfined (RECKON_SANDBOX_UNCONFINED): it could have written outside the workspace", against, op.OperationID)
	}
	if !over(self, cmpAt, p.Grace) {
		return inconclusive("%s equals the manifest recorded before %s, but %s may still have been running then", against, op.OperationID, op.OperationID)
	}
	return evidence(DiffName, pipeline.FindingNone,
		fmt.Sprintf("%s equals the manifest recorded before %s, which can no longer act: the call left no durable effect", against, op.OperationID), at, prov), true
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
		return manifest.Manifest{}, err
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
		return manifest.Manifest{}, fmt.Errorf("could not be established: %w", err)
	case rel == "":
		return manifest.Manifest{}, errors.New(whyNot)
	}
	root, err := os.Open(p.Root)
	if err != nil {
		return manifest.Manifest{}, fmt.Errorf("the workspaces root cannot be opened: %w", err)
	}
	defer root.Close()
	ws, err := openNoFollow(root, rel, true)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return manifest.Manifest{}, fmt.Errorf("%s is gone; its absence proves nothing", filepath.Join(p.Root, rel))
	case err != nil:
		return manifest.Manifest{}, fmt.Errorf("%s cannot be opened without following a symlink: %w", filepath.Join(p.Root, rel), err)
	}
	defer ws.Close()
	return manifest.TakeAt(ctx, ws, manifest.Options{Limits: p.Limits, HashAlso: before.Hashed(), Now: time.Now})
}
