package triage

import (
	"bytes"
	"context"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/rs/zerolog"

	"github.com/seed-7bc021c3/reckon/kernel/operations"
	"github.com/seed-7bc021c3/reckon/pipeline/probe"
)

// TestWrongDataDirectoryRecordsNothing: a sweep whose probes look for the
// workspaces under a data directory that is not the workers' cannot read
// the evidence of a declared postcondition. That is no reason to record
// the operation unknown (an operator would be asked to rule on what a
// probe proves once it can see): the sweep records nothing for it, says
// why in its result and its log, and the next sweep with the right
// directory proves it.
func TestWrongDataDirectoryRecordsNothing(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	root, ws := workspace(t, "run-1")
	e.seedRunWorkspace("run-1", ws, opSpec{id: "op-1", outcome: "uncertain", postcondition: map[string]string{"path": "never.txt"}})
	sweep := func(root string) (Report, string) {
		t.Helper()
		var log bytes.Buffer
		sw := e.sweeper(Config{Log: zerolog.New(&log), Probes: probe.Set{
			probe.Workspace{Root: root, Owners: operations.Owners{Pool: e.s.Pool}},
			probe.Diff{Root: root, Owners: operations.Owners{Pool: e.s.Pool}},
		}})
		rep, err := sw.Sweep(context.Background(), SweepParams{Project: "acme", RunID: "run-1"})
		if err != nil {
			t.Fatal(err)
		}
		e.drain()
		return rep, log.String()
	}

	wrong := filepath.Join(t.TempDir(), "not-the-data-dir", "workspaces")
	rep, log := sweep(wrong)
	if rep.Journaled != 0 || rep.Unavailable != 1 || rep.Count(OutcomeUnavailable) != 1 {
		t.Fatalf("sweep with a wrong data directory: %+v", rep)
	}
	w := rep.Walls[0]
	if !slices.Equal(w.Operations, []string{"op-1"}) || !strings.Contains(w.Error, wrong) || !strings.Contains(w.Error, "cannot be opened") {
		t.Errorf("the result does not say which operation was left and why: %+v", w)
	}
	if !strings.Contains(log, `"outcome":"unavailable"`) || !strings.Contains(log, wrong) || !strings.Contains(log, `"unavailable":1`) {
		t.Errorf("the log does not say it: %s", log)
	}
	if v := e.runVerdicts("run-1"); len(v) != 0 || e.outboxRows() != 0 || len(e.reconciled("run-1")) != 0 {
		t.Fatalf("a sweep that could not see its evidence recorded %d verdicts", len(v))
	}
	if left := e.unsettled("run-1"); !slices.Equal(left, []string{"op-1"}) {
		t.Fatalf("unsettled after it: %v", left)
	}

	// With the workers' directory the same operation is proven none.
	if rep, _ := sweep(root); rep.Journaled != 1 || rep.Unavailable != 0 {
		t.Fatalf("sweep with the right data directory: %+v", rep)
	}
	if left := e.unsettled("run-1"); len(left) != 0 {
		t.Fatalf("unsettled at the end: %v", left)
	}
}
