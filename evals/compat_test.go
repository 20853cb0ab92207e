package evals

import (
	"context"
	"testing"
	"time"

	"github.com/seed-7bc021c3/reckon/pipeline/supervisor"
)

// The suites committed before, with the baselines recorded with them,
// keep loading and scoring: v1 from before workspace manifests (its events
// carry no workspace_manifest, so the diff probe has nothing to compare),
// v2 from before findings carried their preconditions and fixtures
// recorded truth rather than a rule (its delegations are labelled by
// whether the child started). Their findings carry no preconditions, so a
// none that rests on a wait (never measured on one clock) or a state read
// from a shared store proves nothing now. The built-in supervisor settles
// the rest with nothing unsafe and every decided operation right, on the
// very suite each baseline was recorded on; coverage now falls below
// those baselines by what the old findings proved without their
// preconditions, which the scorecard shows as unknown where the fixture
// recorded a proof (or, on a wall that needed a person for another
// operation, as an abstention: those fixtures say which only of the whole
// wall).
func TestPreviousSuitesStillLoadAndScore(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		dir, baseline string
		fixtures      int
	}{
		{"testdata/suite-20261130-v1", "testdata/baseline-20261130-v1.json", 74},
		{"testdata/suite-20261130-v2", "testdata/baseline-20261130-v2.json", 102},
	} {
		fx, err := LoadDir(c.dir)
		if err != nil {
			t.Fatalf("load the previous suite %s: %v", c.dir, err)
		}
		if len(fx) != c.fixtures {
			t.Fatalf("previous suite %s: %d fixtures loaded, want %d", c.dir, len(fx), c.fixtures)
		}
		bl, err := ReadBaseline(c.baseline)
		if err != nil {
			t.Fatalf("read the previous baseline: %v", err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		rep, err := Score(ctx, supervisor.Builtin{}, fx, ScoreParams{CaseTimeout: 10 * time.Second})
		cancel()
		if err != nil {
			t.Fatal(err)
		}
		m := rep.Metrics
		if m.UnsafeNone+m.UnsafeOccurred+m.InvalidOutputs+m.Errored > 0 || m.Accuracy == nil || *m.Accuracy < 1 {
			t.Fatalf("previous suite %s scored unsafe or inaccurate: %s", c.dir, Markdown(rep))
		}
		if m.Walls != bl.Walls || m.Operations != bl.Operations {
			t.Fatalf("previous suite %s: %d walls and %d operations, its baseline %d and %d", c.dir, m.Walls, m.Operations, bl.Walls, bl.Operations)
		}
		t.Logf("previous suite %s: coverage %s (baseline %.1f%%), proof recall %s, accuracy %s, unknown where a proof was recorded %d",
			c.dir, pct(m.Coverage), bl.Coverage*100, pct(m.ProofRecall), pct(m.Accuracy), m.UnknownWithProof)
	}
}
