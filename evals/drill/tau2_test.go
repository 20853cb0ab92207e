package drill

import (
	"reflect"
	"strconv"
	"strings"
	"testing"
)

// TestTau2Generate: scenarios replay the task's actions that succeed, up
// to one write, faulted there; the same seed gives the same scenarios;
// a missing data folder says where to get the data.
func TestTau2Generate(t *testing.T) {
	t.Parallel()
	s, err := LoadTau2("../../testdata/tau2")
	if err != nil {
		t.Fatal(err)
	}
	scs := s.Generate(5, 6)
	if !reflect.DeepEqual(scs, s.Generate(5, 6)) || len(scs) != 6 {
		t.Fatalf("%d scenarios, or not the same for one seed", len(scs))
	}
	writes := map[string]bool{}
	for _, sc := range scs {
		steps := sc.Plan.Steps
		last := steps[len(steps)-1].Tool
		id := sc.Fault.AfterEffect + sc.Fault.BeforeEffect
		if id != "op-"+strconv.Itoa(len(steps)) || !strings.HasPrefix(sc.Kind, Tau2KindPrefix+strings.TrimPrefix(last, "mcp__retail__")) {
			t.Errorf("%s: fault at %q, kind %s, last step %s", sc.RunID, id, sc.Kind, last)
		}
		for _, st := range steps {
			if strings.Contains(st.Tool, "find_user_id_by_email") && st.Args["email"] == "nobody@example.com" {
				t.Errorf("%s replays a lookup that fails on the database", sc.RunID)
			}
		}
		writes[last] = true
	}
	if len(writes) != 3 {
		t.Errorf("writes drilled: %v, want the 3 of the tasks", writes)
	}
	if _, err := LoadTau2(t.TempDir()); err == nil || !strings.Contains(err.Error(), "sierra-research/tau2-bench") {
		t.Errorf("missing data: %v", err)
	}
}
