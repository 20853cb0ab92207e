package operations_test

import (
	"context"
	"testing"

	"github.com/seed-7bc021c3/reckon/internal/pgtest"
	"github.com/seed-7bc021c3/reckon/kernel"
	"github.com/seed-7bc021c3/reckon/kernel/operations"
)

// Who writes each run: a kernel or gateway run's recorder reaches the runs
// beneath it (and the kernel's wins where a run is in both tables, which
// no writer lets happen), and an agent's run id without an owner of its
// own belongs to the owner of its nearest owned ancestor (migration
// 00032); KernelRuns sees kernel runs alone.
func TestRunWriters(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := pgtest.New(t)
	if _, err := s.Pool.Exec(ctx, `
INSERT INTO kernel_runs (project, run_id, plan, plan_digest, workflow_id) VALUES
  ('acme', 'k', '{}', '\x00', 'reckon/acme/k'), ('acme', 'both', '{}', '\x00', 'reckon/acme/both');
INSERT INTO gateway_runs (project, run_id, source_id, kind) VALUES
  ('acme', 'g', 'mcp-gateway', 'client'), ('acme', 'both', 'mcp-gateway', 'client');
INSERT INTO agent_runs (project, run_id, source_id) VALUES ('acme', 'a', 'agent-x'), ('other', 'k', 'agent-y'),
  ('acme', 'a.op-2', 'agent-z')`); err != nil {
		t.Fatal(err)
	}
	key := func(project, run string) kernel.RunKey { return kernel.RunKey{Project: project, RunID: run} }
	runs := []kernel.RunKey{key("acme", "k"), key("acme", "k.op-1"), key("acme", "g"), key("acme", "g.op-2.op-1"),
		key("acme", "both"), key("acme", "a"), key("acme", "a.op-1"), key("acme", "a.op-1.op-3"), key("acme", "a.op-2"), key("acme", "a.op-2.op-1"),
		key("other", "k"), key("acme", "none"), key("acme", "ax.op-1")}
	got, err := operations.Owners{Pool: s.Pool}.RunWriters(ctx, runs)
	if err != nil {
		t.Fatal(err)
	}
	want := map[kernel.RunKey]kernel.RunWriter{
		key("acme", "k"):           {Recorder: kernel.RecorderKernel},
		key("acme", "k.op-1"):      {Recorder: kernel.RecorderKernel},
		key("acme", "g"):           {Recorder: kernel.RecorderGateway},
		key("acme", "g.op-2.op-1"): {Recorder: kernel.RecorderGateway},
		key("acme", "both"):        {Recorder: kernel.RecorderKernel},
		key("acme", "a"):           {Source: "agent-x", SourceRun: "a"},
		key("acme", "a.op-1"):      {Source: "agent-x", SourceRun: "a"},
		key("acme", "a.op-1.op-3"): {Source: "agent-x", SourceRun: "a"},
		key("acme", "a.op-2"):      {Source: "agent-z", SourceRun: "a.op-2"},
		key("acme", "a.op-2.op-1"): {Source: "agent-z", SourceRun: "a.op-2"},
		key("other", "k"):          {Source: "agent-y", SourceRun: "k"},
	}
	if len(got) != len(want) {
		t.Errorf("RunWriters answered %d runs, want %d: %v", len(got), len(want), got)
	}
	for k, w := range want {
		if got[k] != w {
			t.Errorf("%s/%s: %+v, want %+v", k.Project, k.RunID, got[k], w)
		}
	}
	kr, err := operations.Owners{Pool: s.Pool}.KernelRuns(ctx, runs)
	if err != nil {
		t.Fatal(err)
	}
	if len(kr) != 3 || !kr[key("acme", "k")] || !kr[key("acme", "k.op-1")] || !kr[key("acme", "both")] {
		t.Errorf("KernelRuns: %v, want acme/k, acme/k.op-1 and acme/both", kr)
	}
}
