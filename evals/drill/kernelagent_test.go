package drill

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/seed-7bc021c3/reckon/evals"
	"github.com/seed-7bc021c3/reckon/kernel/plan"
	"github.com/seed-7bc021c3/reckon/pipeline/supervisor"
)

// Kernel agent scenarios are seeded like the others, and each faults the
// model's own call: its operation id embeds the call id the script gives
// it, at the call's place in the run; the model's scripted calls are
// valid for the agent's tools, and a resumed scenario awaits.
func TestGenerateKernelAgentScenarios(t *testing.T) {
	t.Parallel()
	kinds := map[string]int{}
	variants := map[string]bool{}
	for _, s := range Generate(9, 8*len(Kinds)) {
		ka := s.KernelAgent
		isAgent := s.Kind == KindKernelAgentCmd || s.Kind == KindKernelAgentMCP || s.Kind == KindKernelAgentResumed
		if (ka != nil) != isAgent {
			t.Fatalf("%s: kernel agent %v", s.RunID, ka != nil)
		}
		if ka == nil {
			continue
		}
		kinds[s.Kind]++
		target := s.Fault.AfterEffect + s.Fault.BeforeEffect
		want := plan.AgentOperationID(len(ka.Script), ka.CallID)
		if target != ka.Target || target != want || !strings.HasSuffix(target, "-"+ka.CallID) || len(s.Plan.Steps) != 0 {
			t.Errorf("%s: fault on %q, target %q, want %q, the op id of the last scripted call", s.RunID, target, ka.Target, want)
		}
		last := ka.Script[len(ka.Script)-1].ToolCalls[0]
		if last.ID != ka.CallID || (ka.Title != "") != (last.Name == issueTool) || ka.RetryCallID == ka.CallID {
			t.Errorf("%s: the last scripted call %+v is not the target (title %q)", s.RunID, last, ka.Title)
		}
		for _, st := range ka.Script {
			var args map[string]any
			if len(st.ToolCalls) != 1 || json.Unmarshal(st.ToolCalls[0].Arguments, &args) != nil {
				t.Errorf("%s: scripted answer %+v is not one call with an object of arguments", s.RunID, st)
			}
		}
		wantUncertain := map[bool]string{true: plan.OnUncertainAwait, false: plan.OnUncertainStop}[ka.Resume]
		if ka.Resume != (s.Kind == KindKernelAgentResumed) || ka.Agent.OnUncertain != wantUncertain || ka.Agent.Input == "" {
			t.Errorf("%s: resume %v, on_uncertain %q", s.RunID, ka.Resume, ka.Agent.OnUncertain)
		}
		variants[fmt.Sprintf("%s mcp=%v after=%v", s.Kind, ka.Title != "", s.Fault.AfterEffect != "")] = true
	}
	for _, k := range []string{KindKernelAgentCmd, KindKernelAgentMCP, KindKernelAgentResumed} {
		if kinds[k] != 8 {
			t.Errorf("kind %s dealt %d times in eight rounds", k, kinds[k])
		}
	}
	if len(variants) != 2+2+4 {
		t.Errorf("variants dealt: %v, want both sides of the effect for each kind and either call for the resumed one", variants)
	}
}

// pickAgentVariants returns, from seed, one kernel agent scenario of each
// kind, call and side of the effect.
func pickAgentVariants(seed uint64) []Scenario {
	seen := map[string]bool{}
	var out []Scenario
	for _, s := range Generate(seed, 12*len(Kinds)) {
		if s.KernelAgent == nil {
			continue
		}
		k := fmt.Sprintf("%s mcp=%v after=%v", s.Kind, s.KernelAgent.Title != "", s.Fault.AfterEffect != "")
		if !seen[k] {
			seen[k] = true
			out = append(out, s)
		}
	}
	return out
}

// TestDrillKernelAgentLive drills kernel agent runs on the real stack —
// embedded Temporal, PostgreSQL, the sandbox, the test MCP server — with
// the scripted model: each variant's uncertain operation is the model's
// call op-<n>-<call id>, its truth is the effect observed downstream, the
// wall's evidence decides it as that truth, and a resumed run is settled
// by the verdict, tells the model, and does not repeat the effect. The
// built-in supervisor scores the fixtures clean.
func TestDrillKernelAgentLive(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	st, _ := openTestStack(ctx, t)
	scs := pickAgentVariants(5)
	if len(scs) != 8 {
		t.Fatalf("seed 5 gave %d kernel agent variants, want 8", len(scs))
	}
	var all []*evals.Fixture
	for _, sc := range scs {
		t0 := time.Now()
		fx, err := st.Drill(ctx, sc, Params{Seed: 5, GeneratedBy: "go test ./evals/drill"})
		if err != nil {
			t.Fatalf("%s: %v", sc.RunID, err)
		}
		t.Logf("%s: %s", sc.RunID, time.Since(t0).Round(time.Millisecond))
		if len(fx) != 1 || len(fx[0].Wall.Operations) != 1 {
			t.Fatalf("%s: want one fixture of one operation, got %d", sc.RunID, len(fx))
		}
		f := fx[0]
		all = append(all, f)
		op := f.Wall.Operations[0]
		wantTruth := map[bool]string{true: "occurred", false: "none"}[sc.Fault.AfterEffect != ""]
		if op.OperationID != sc.KernelAgent.Target || op.State != "failed_uncertain" || f.Truth[op.OperationID] != wantTruth {
			t.Errorf("%s: %s state %s truth %s, want %s failed_uncertain, truth %s", f.ID, op.OperationID, op.State, f.Truth[op.OperationID], sc.KernelAgent.Target, wantTruth)
		}
		if e, ok := evals.Decidable(op); !ok || e != wantTruth {
			t.Errorf("%s: decidable=%v as %q, want decidable as %s; evidence %+v", f.ID, ok, e, wantTruth, op.Evidence)
		}
		if !strings.Contains(f.Notes, "is the effect itself") {
			t.Errorf("%s: the notes do not say where the truth comes from: %s", f.ID, f.Notes)
		}
		if sc.KernelAgent.Resume && (!strings.Contains(f.Notes, "exactly once") || !strings.Contains(f.Notes, "model's next request carried")) {
			t.Errorf("%s: a resumed run's notes lack its resumption: %s", f.ID, f.Notes)
		}
		if testing.Verbose() {
			t.Logf("%s: %s", f.ID, f.Notes)
		}
	}
	rep, err := evals.Score(ctx, supervisor.Builtin{}, all, evals.ScoreParams{})
	if err != nil {
		t.Fatal(err)
	}
	if m := rep.Metrics; m.UnsafeNone+m.UnsafeOccurred+m.InvalidOutputs+m.Errored != 0 || m.Decided != len(all) {
		t.Errorf("built-in supervisor on kernel agent walls: %+v", m)
	}
}
