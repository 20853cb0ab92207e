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
	fx, err := LoadDir(Tau2Fixtures)
	if err != nil {
		t.Fatal(err)
	}
	m, err := ReadManifest(Tau2Fixtures)
	if err != nil {
		t.Fatalf("the tau2 suite has no manifest (reckon drill --suite tau2-retail writes it): %v", err)
	}
	if m.Count != len(fx) || len(fx) < 16 {
		t.Fatalf("manifest lists %d fixtures, folder holds %d (at least 16 wanted)", m.Count, len(fx))
	}
	bl, err := ReadBaseline("baseline-tau2.json")
	if err != nil {
		t.Fatal(err)
	}
	rep := scoreBuiltin(t, fx)
	rep.Fixtures, rep.Suite = "evals/"+Tau2Fixtures, m
	if err := Gate(rep, bl); err != nil {
		t.Error(err)
		t.Log(Markdown(rep))
	}
	for _, sm := range rep.Scenarios {
		if !strings.HasPrefix(sm.Scenario, "tau2_") {
			t.Errorf("scenario %s in the tau2 suite", sm.Scenario)
		}
	}
	t.Logf("built-in supervisor on tau2-retail: accuracy %s, coverage %s, unsafe-none %d, unsafe-occurred %d over %d walls",
		pct(rep.Metrics.Accuracy), pct(rep.Metrics.Coverage), rep.Metrics.UnsafeNone, rep.Metrics.UnsafeOccurred, rep.Metrics.Walls)
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
