package drill

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/seed-7bc021c3/reckon/evals"
	"github.com/seed-7bc021c3/reckon/pipeline"
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
