package drill

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/seed-7bc021c3/reckon/evals"
	"github.com/seed-7bc021c3/reckon/internal/pgtest"
	"github.com/seed-7bc021c3/reckon/internal/sandboxtest"
	"github.com/seed-7bc021c3/reckon/pipeline"
	"github.com/seed-7bc021c3/reckon/platform/config"
)

// TestInterruptedSuiteKeepsItsHandMadeFixtures: a drill interrupted before
// its first fixture (Ctrl-C, or every scenario failing) had removed the
// previous suite and its manifest and written none, so the manifest's
// hand_made list — the only record of the hand-made fixtures left in the
// folder — was lost, and the next drill wrote a manifest without them.
func TestInterruptedSuiteKeepsItsHandMadeFixtures(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	for _, id := range []string{"s-1", "h-1"} {
		w := pipeline.Wall{Project: "p", RunID: id, Part: 1, Parts: 1, Operations: []pipeline.WallOperation{{OperationID: "op-1", Tool: "run_command", State: "failed_uncertain"}}}
		f := &evals.Fixture{Version: evals.FixtureVersion, ID: id, Scenario: "s", GeneratedBy: "test", Wall: w,
			Truth: map[string]string{"op-1": evals.TruthNone}, ExpectNeedsAttention: true}
		if _, err := evals.WriteFixture(dir, f); err != nil {
			t.Fatal(err)
		}
	}
	if err := evals.WriteManifest(dir, evals.Manifest{Version: 1, Seed: 1, Count: 1, Fixtures: []string{"s-1"}, HandMade: []string{"h-1"}}); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	// Interrupted before the first scenario, the stack is never touched.
	if _, err := (&Stack{}).GenerateSuite(ctx, Params{Seed: 2, GeneratedBy: "test"}, 3, dir, nil); !errors.Is(err, context.Canceled) {
		t.Fatalf("GenerateSuite on a cancelled context: %v", err)
	}
	if _, err := os.Stat(filepath.Join(dir, "s-1.json")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the previous suite's drilled fixture is still there: %v", err)
	}
	m, err := evals.ReadManifest(dir)
	if err != nil {
		t.Fatalf("no manifest after an interrupted drill: %v", err)
	}
	if !slices.Equal(m.HandMade, []string{"h-1"}) || m.Count != 0 || len(m.Fixtures) != 0 {
		t.Errorf("manifest after an interrupted drill: %+v, want hand_made [h-1] and no drilled fixture", m)
	}
	if fx, err := evals.LoadDir(dir); err != nil || len(fx) != 1 {
		t.Errorf("the folder after an interrupted drill: %d fixtures, %v", len(fx), err)
	}
}

// TestSuiteFailsOnALabelDisagreement: a drilled wall whose decisive
// evidence says none while the recorded truth is occurred (a probe unsound
// there, or a truth taken from the wrong facts) fails the whole drill,
// naming the fixture, after writing it for inspection; `reckon drill`
// returns that error and exits non-zero.
func TestSuiteFailsOnALabelDisagreement(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	lying := func(_ context.Context, sc Scenario, o Params) ([]*evals.Fixture, error) {
		start := time.Date(2026, 11, 30, 10, 0, 0, 0, time.UTC)
		op := pipeline.WallOperation{OperationID: "op-1", Tool: "run_command", State: "failed_uncertain", StartedAt: start, JournaledAt: &start,
			Evidence: []pipeline.Evidence{{Probe: "workspace.diff", Finding: pipeline.FindingNone, ObservedAt: start.Add(time.Hour),
				Preconditions: &pipeline.Preconditions{Answered: true}}}}
		f := &evals.Fixture{Version: evals.FixtureVersion, ID: sc.RunID, Scenario: sc.Kind, Seed: o.Seed, GeneratedBy: o.GeneratedBy,
			Wall:  pipeline.Wall{Project: "p", RunID: sc.RunID, Part: 1, Parts: 1, Operations: []pipeline.WallOperation{op}},
			Truth: map[string]string{"op-1": evals.TruthOccurred}, NeedsPerson: map[string]bool{"op-1": false}}
		return []*evals.Fixture{f}, nil
	}
	res, err := generateSuite(context.Background(), lying, Params{Seed: 5, GeneratedBy: "test"}, 2, dir, nil)
	if err == nil || len(res.Disagreements) != 2 {
		t.Fatalf("a suite whose walls disagree with their truth: %v, disagreements %v", err, res.Disagreements)
	}
	for _, id := range res.Disagreements {
		if !strings.Contains(err.Error(), id) {
			t.Errorf("the error does not name %s: %v", id, err)
		}
	}
	if fx, lerr := evals.LoadDir(dir); lerr != nil || len(fx) != 2 {
		t.Errorf("the disagreeing fixtures are not written for inspection: %d, %v", len(fx), lerr)
	}
}

// TestStackChecksTheSandboxReachesItsDataDirectory: a drill whose data
// directory the sandbox's user cannot traverse would run every scenario
// for minutes, each command refused, before failing; it stops before the
// first, naming the directory.
func TestStackChecksTheSandboxReachesItsDataDirectory(t *testing.T) {
	t.Parallel()
	s := pgtest.New(t)
	locked := filepath.Join(sandboxtest.Dir(t), "locked")
	data := filepath.Join(locked, "data")
	if err := os.MkdirAll(data, 0o755); err != nil {
		t.Fatal(err)
	}
	// Searchable by no one but its owner: not by the sandbox's user.
	if err := os.Chmod(locked, 0o700); err != nil {
		t.Fatal(err)
	}
	cfg, err := config.LoadFrom(func(k string) string {
		return map[string]string{"DATABASE_URL": s.URL, "RECKON_DATA_DIR": data, "RECKON_LOG_LEVEL": "error"}[k]
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	st, err := OpenStack(ctx, StackConfig{Config: cfg, Log: zerolog.Nop()})
	if err == nil {
		st.Close()
		t.Fatal("a drill stack opened on a data directory its sandbox cannot reach")
	}
	if !strings.Contains(err.Error(), data) || !strings.Contains(err.Error(), "sandbox") {
		t.Fatalf("the error does not name the data directory and the sandbox: %v", err)
	}
	t.Log(err)
}
