package fault

import (
	"context"
	"testing"

	"github.com/seed-7bc021c3/reckon/internal/pgtest"
	"github.com/seed-7bc021c3/reckon/kernel"
)

func TestFirstMatchingExecutionPerRun(t *testing.T) {
	t.Parallel()
	s := pgtest.New(t)
	ctx := context.Background()
	in := New(s.Pool, Config{AfterEffect: "run_command", BeforeEffect: "op-3"})
	call := func(run, op, tool string) kernel.ToolCall {
		return kernel.ToolCall{Project: "p", RunID: run, OperationID: op, Tool: tool}
	}
	res := kernel.ToolResult{Summary: "exit 0"}

	if err := in.After(ctx, call("r1", "op-1", "mcp__create_issue"), res); err != nil {
		t.Fatalf("a non-matching tool faulted: %v", err)
	}
	if err := in.After(ctx, call("r1", "op-2", "run_command"), res); !IsInjected(err) {
		t.Fatalf("first matching execution: %v, want an injected fault", err)
	}
	if err := in.After(ctx, call("r1", "op-4", "run_command"), res); err != nil {
		t.Fatalf("second matching execution of the run faulted: %v", err)
	}
	if err := in.After(ctx, call("r2", "op-1", "run_command"), res); !IsInjected(err) {
		t.Fatalf("first matching execution of another run: %v", err)
	}
	if err := in.Before(ctx, call("r1", "op-3", "run_command")); !IsInjected(err) {
		t.Fatalf("before-effect by operation id: %v", err)
	}
	if err := in.Before(ctx, call("r1", "op-1-r1", "run_command")); err != nil {
		t.Fatalf("before-effect matched another operation: %v", err)
	}

	recs, err := Records(ctx, s.Pool, "p", "r1")
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, r := range recs {
		got[r.OperationID] = r.Fault + ":" + r.Truth
	}
	if len(got) != 2 || got["op-2"] != "after_effect:occurred" || got["op-3"] != "before_effect:none" {
		t.Fatalf("ground truth of r1 = %v", got)
	}
	var nilInjector *Injector
	if err := nilInjector.After(ctx, call("r1", "op-9", "run_command"), res); err != nil {
		t.Fatal("a nil injector must never fire")
	}
}
