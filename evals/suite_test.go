package evals_test

import (
	"testing"

	"github.com/seed-7bc021c3/reckon/evals"
	"github.com/seed-7bc021c3/reckon/evals/drill"
)

// TestSuiteCoversEveryScenario checks the committed suite came from the
// drill generator with every scenario kind it has present (and the child
// walls of delegate_unsettled), so a kind added to the generator fails here
// until the suite is regenerated.
func TestSuiteCoversEveryScenario(t *testing.T) {
	t.Parallel()
	m, err := evals.ReadManifest("fixtures")
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range append(append([]string(nil), drill.Kinds...), drill.KindDelegateChild) {
		if m.Scenarios[k] == 0 {
			t.Errorf("scenario %s has no fixture in the suite", k)
		}
	}
	if m.Seed == 0 || m.GeneratedBy == "" {
		t.Errorf("manifest does not record the seed and command: %+v", m)
	}
}
