package triage

import (
	"context"
	"testing"
	"time"

	"github.com/seed-7bc021c3/reckon/internal/fakeopenai"
	"github.com/seed-7bc021c3/reckon/kernel"
	"github.com/seed-7bc021c3/reckon/pipeline/supervisor"
)

// seedAgentRun journals the first unsafe case the way an external
// agent reports it: its own tool.started and a tool.failed claiming
// argument_validation (the effect had in fact landed), under its source.
func (e *env) seedAgentRun(run string) {
	e.t.Helper()
	ev := func(id, typ string, ts time.Time, data any) kernel.Event {
		return e.agentEvent("agent-x", run, id, typ, ts, data)
	}
	e.ingest(
		ev(run+"/run", kernel.TypeRunStarted, e.t0, map[string]any{}),
		ev(run+"/op-a/started", kernel.TypeToolStarted, e.t0, map[string]any{"operation_id": "op-a", "tool": "mcp__create_issue", "args": map[string]any{"title": "disk full"}}),
		ev(run+"/op-a/failed", kernel.TypeToolFailed, e.t0.Add(time.Second), kernel.ToolFailed{OperationID: "op-a", ErrorType: kernel.ErrorTypeValidation, Error: "title too long", Effect: kernel.EffectUncertain}),
		ev(run+"/run/failed", kernel.TypeRunFailed, e.t0.Add(time.Minute), kernel.RunFailed{Error: "gave up"}),
	)
}

// TestWallSaysWhoReportedEachFact: the sweep marks what an agent wrote.
func TestWallSaysWhoReportedEachFact(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.seedAgentRun("agent-run")
	e.seedRun("kernel-run", opSpec{id: "op-1", outcome: "uncertain"})
	ws, err := e.sweeper(Config{}).Walls(context.Background(), "acme", "agent-run")
	if err != nil || len(ws) != 1 {
		t.Fatalf("walls: %v %v", ws, err)
	}
	op := ws[0].Operations[0]
	if !op.AgentReported || op.Failure == nil || op.Failure.ReportedBy != "agent-x" || !op.Failure.AgentReported || op.KernelFailure() != nil {
		t.Fatalf("agent operation not marked: %+v failure %+v", op, op.Failure)
	}
	ws, err = e.sweeper(Config{}).Walls(context.Background(), "acme", "kernel-run")
	if err != nil || len(ws) != 1 {
		t.Fatalf("walls: %v %v", ws, err)
	}
	op = ws[0].Operations[0]
	if op.AgentReported || op.Failure.ReportedBy != kernel.SourceKernel || op.Failure.AgentReported || op.KernelFailure() == nil {
		t.Fatalf("kernel operation marked as an agent's: %+v failure %+v", op, op.Failure)
	}
}

// TestSweepJournalsOnlyWhatEvidenceProves runs real sweeps with lying
// models and the built-in supervisor and reads back what was journaled:
// under the default policy no occurred or none without evidence reaches
// the journal, whatever the model proposed; under inference it does.
func TestSweepJournalsOnlyWhatEvidenceProves(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name, mode, policy string
		effect, proposed   string // of every reconciliation journaled; "" effect: nothing journaled
	}{
		{"builtin on an agent's own argument_validation", "", "", kernel.EffectUnknown, ""},
		{"occurred by inference", fakeopenai.OccurredInference, "", kernel.EffectUnknown, kernel.EffectOccurred},
		{"none by inference", fakeopenai.NoneInference, "", kernel.EffectUnknown, kernel.EffectNone},
		{"probe lies", fakeopenai.ProbeLies, "", "", ""},
		{"occurred by inference, inference policy", fakeopenai.OccurredInference, supervisor.SettleInference, kernel.EffectOccurred, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t)
			e.seedAgentRun("run-1")
			cfg := Config{SettlePolicy: c.policy}
			if c.mode != "" {
				f := fakeopenai.New()
				defer f.Close()
				f.SetMode(c.mode)
				model, err := supervisor.NewOpenAI(supervisor.OpenAIConfig{BaseURL: f.URL, APIKey: "k", Model: "liar", MaxAttempts: 1})
				if err != nil {
					t.Fatal(err)
				}
				cfg.Supervisor = model
			}
			if _, err := e.sweeper(cfg).Sweep(context.Background(), SweepParams{}); err != nil {
				t.Fatal(err)
			}
			e.drain()
			recs := e.reconciled("run-1")["op-a"]
			if c.effect == "" {
				if len(recs) != 0 {
					t.Fatalf("an invalid answer was journaled: %+v", recs)
				}
				return
			}
			if len(recs) != 1 {
				t.Fatalf("reconciliations: %+v", recs)
			}
			var d kernel.Reconciliation
			if err := recs[0].DecodeData(&d); err != nil {
				t.Fatal(err)
			}
			if d.Effect != c.effect || d.ProposedEffect != c.proposed {
				t.Fatalf("journaled effect %s (proposed %q), want %s (proposed %q); note %q", d.Effect, d.ProposedEffect, c.effect, c.proposed, d.Note)
			}
			vs := e.runVerdicts("run-1")
			want := c.policy
			if want == "" {
				want = supervisor.SettleEvidence
			}
			if len(vs) != 1 || vs[0].SettlePolicy != want || vs[0].NeedsAttention != (c.effect == kernel.EffectUnknown) {
				t.Fatalf("verdict: %+v", vs)
			}
		})
	}
}
