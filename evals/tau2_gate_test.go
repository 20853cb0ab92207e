package evals

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/seed-7bc021c3/reckon/pipeline/supervisor"
)

// Tau2Fixtures is the committed tau2-retail suite (docs/evals.md#tau2-retail).
const Tau2Fixtures = "fixtures-tau2"

// TestTau2GateBuiltin gates the built-in supervisor on the committed
// tau2-retail suite: nothing unsafe, accuracy 100 %, coverage at least
// evals/baseline-tau2.json's 90 %, every fixture a tau2 write, and every
// write tool of the suite decided.
func TestTau2GateBuiltin(t *testing.T) {
	t.Parallel()
	rep := gateSuite(t, Tau2Fixtures, "baseline-tau2.json", "tau2_", 16)
	t.Logf("built-in supervisor on tau2-retail: accuracy %s, coverage %s, unsafe-none %d, unsafe-occurred %d over %d walls",
		pct(rep.Metrics.Accuracy), pct(rep.Metrics.Coverage), rep.Metrics.UnsafeNone, rep.Metrics.UnsafeOccurred, rep.Metrics.Walls)
}

// gateSuite scores the built-in supervisor on the committed suite dir
// (its manifest listing every fixture, at least min of them, each of a
// scenario starting with prefix) and gates it by baseline.
func gateSuite(t *testing.T, dir, baseline, prefix string, min int) *Report {
	t.Helper()
	fx, err := LoadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	m, err := ReadManifest(dir)
	if err != nil {
		t.Fatalf("the suite %s has no manifest (reckon drill --suite writes it): %v", dir, err)
	}
	if m.Count != len(fx) || len(fx) < min {
		t.Fatalf("%s: manifest lists %d fixtures, folder holds %d (at least %d wanted)", dir, m.Count, len(fx), min)
	}
	bl, err := ReadBaseline(baseline)
	if err != nil {
		t.Fatal(err)
	}
	rep := scoreBuiltin(t, fx)
	rep.Fixtures, rep.Suite = "evals/"+dir, m
	if err := Gate(rep, bl); err != nil {
		t.Error(err)
		t.Log(Markdown(rep))
	}
	for _, sm := range rep.Scenarios {
		if !strings.HasPrefix(sm.Scenario, prefix) {
			t.Errorf("scenario %s in the suite %s", sm.Scenario, dir)
		}
	}
	return rep
}

// scoreBuiltin scores the built-in supervisor on fx.
func scoreBuiltin(t *testing.T, fx []*Fixture) *Report {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	rep, err := Score(ctx, supervisor.Builtin{}, fx, ScoreParams{CaseTimeout: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	return rep
}
