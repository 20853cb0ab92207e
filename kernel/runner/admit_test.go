package runner

import (
	"fmt"
	"strings"
	"testing"

	"github.com/seed-7bc021c3/reckon/kernel"
	"github.com/seed-7bc021c3/reckon/kernel/plan"
)

// TestAdmitBoundsDelegates: a model that asks for delegate again and again
// gets MaxAgentDelegates child runs in all, the rest refused to it, while
// its other calls still run.
func TestAdmitBoundsDelegates(t *testing.T) {
	t.Parallel()
	a := &agentRun{calls: map[string]string{}}
	var started, refused int
	for turn := 0; turn < 3; turn++ {
		var out TurnOutput
		for i := 0; i < 5; i++ {
			out.Calls = append(out.Calls, ModelCall{ID: fmt.Sprintf("d-%d-%d", turn, i), Name: kernel.DelegateTool, Arguments: `{}`})
		}
		out.Calls = append(out.Calls, ModelCall{ID: fmt.Sprintf("c-%d", turn), Name: "run_command", Arguments: `{}`})
		ops, why := a.admit(out)
		for i, c := range out.Calls {
			switch {
			case c.Name != kernel.DelegateTool && ops[i] == "":
				t.Fatalf("turn %d: run_command refused: %s", turn, why[i])
			case c.Name == kernel.DelegateTool && ops[i] != "":
				started++
			case c.Name == kernel.DelegateTool:
				refused++
				if !strings.Contains(why[i], "delegate calls per agent run") {
					t.Fatalf("turn %d: refusal says %q", turn, why[i])
				}
			}
		}
	}
	if started != plan.MaxAgentDelegates || refused != 15-plan.MaxAgentDelegates {
		t.Fatalf("%d delegates started, %d refused; want %d and %d", started, refused, plan.MaxAgentDelegates, 15-plan.MaxAgentDelegates)
	}
}
