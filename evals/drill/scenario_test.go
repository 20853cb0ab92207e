package drill

import (
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/seed-7bc021c3/reckon/evals"
	"github.com/seed-7bc021c3/reckon/pipeline"
)

func TestGenerateIsSeededAndCoversEveryKind(t *testing.T) {
	t.Parallel()
	a := Generate(42, 2*len(Kinds)+3)
	b := Generate(42, 2*len(Kinds)+3)
	if !reflect.DeepEqual(a, b) {
		t.Fatal("the same seed produced different scenarios")
	}
	c := Generate(43, 2*len(Kinds)+3)
	if reflect.DeepEqual(a, c) {
		t.Fatal("different seeds produced the same scenarios")
	}
	seen := map[string]int{}
	ids := map[string]bool{}
	for _, s := range a {
		seen[s.Kind]++
		if ids[s.RunID] {
			t.Errorf("run id %s repeated", s.RunID)
		}
		ids[s.RunID] = true
		if s.Fault.AfterEffect == "" && s.Fault.BeforeEffect == "" && s.Lose == nil && s.Outlives == nil && s.Agent == nil {
			t.Errorf("%s: no fault, no loss, no partition and no agent's call", s.RunID)
		}
		if s.Lose != nil && ((s.Kind != KindCmdCrashWindow && s.Kind != KindCmdPartialWrite) || s.Lose.OperationID != fmt.Sprintf("op-%d", len(s.Plan.Steps))) {
			t.Errorf("%s: loses %s of a %d-step plan; only crash-window scenarios lose a run, at its last step", s.RunID, s.Lose.OperationID, len(s.Plan.Steps))
		}
		raw, err := json.Marshal(s.Plan)
		if err != nil || !strings.Contains(string(raw), `"steps"`) {
			t.Errorf("%s: plan %s, %v", s.RunID, raw, err)
		}
		// Every faulted op id names a step of the plan (a kernel agent's
		// call: TestGenerateKernelAgentScenarios).
		for _, id := range []string{s.Fault.AfterEffect, s.Fault.BeforeEffect} {
			if id == "" || s.KernelAgent != nil {
				continue
			}
			var n int
			if _, err := fmt.Sscanf(strings.TrimPrefix(id, "op-"), "%d", &n); err != nil || n < 1 || n > len(s.Plan.Steps) {
				t.Errorf("%s: fault on %s outside the plan of %d steps", s.RunID, id, len(s.Plan.Steps))
			}
		}
	}
	for _, k := range Kinds {
		if seen[k] < 2 {
			t.Errorf("kind %s dealt %d times in two rounds", k, seen[k])
		}
	}
}

func TestDisagreesComparesDecidableEffectWithTruth(t *testing.T) {
	t.Parallel()
	probe := func(finding string) pipeline.WallOperation {
		return pipeline.WallOperation{OperationID: "op-1", Tool: "run_command", State: "failed_uncertain", StartedAt: time.Unix(1, 0),
			Evidence: []pipeline.Evidence{{Probe: "workspace.diff", Finding: finding, ObservedAt: time.Unix(2, 0),
				Preconditions: &pipeline.Preconditions{Answered: true}}}}
	}
	for _, c := range []struct {
		op    pipeline.WallOperation
		truth string
		want  bool
	}{
		{probe(pipeline.FindingOccurred), evals.TruthOccurred, false},
		{probe(pipeline.FindingOccurred), evals.TruthNone, true},
		{probe(pipeline.FindingNone), evals.TruthOccurred, true},
		{pipeline.WallOperation{OperationID: "op-1", Tool: "run_command"}, evals.TruthNone, false}, // not decidable
	} {
		f := &evals.Fixture{Wall: pipeline.Wall{Operations: []pipeline.WallOperation{c.op}}, Truth: map[string]string{"op-1": c.truth}}
		if got := disagrees(f); got != c.want {
			t.Errorf("evidence %+v, truth %s: disagrees = %v, want %v", c.op.Evidence, c.truth, got, c.want)
		}
	}
}
