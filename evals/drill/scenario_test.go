package drill

import (
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"testing"
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
		if s.Fault.AfterEffect == "" && s.Fault.BeforeEffect == "" {
			t.Errorf("%s: no fault", s.RunID)
		}
		raw, err := json.Marshal(s.Plan)
		if err != nil || !strings.Contains(string(raw), `"steps"`) {
			t.Errorf("%s: plan %s, %v", s.RunID, raw, err)
		}
		// Every faulted op id names a step of the plan.
		for _, id := range []string{s.Fault.AfterEffect, s.Fault.BeforeEffect} {
			if id == "" {
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
