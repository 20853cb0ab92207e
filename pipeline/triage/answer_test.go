package triage

import (
	"context"
	"encoding/json"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/seed-7bc021c3/reckon/kernel"
	"github.com/seed-7bc021c3/reckon/pipeline"
	"github.com/seed-7bc021c3/reckon/pipeline/probe"
	"github.com/seed-7bc021c3/reckon/pipeline/supervisor"
)

// An agent run's final answer and its model turns are the model's claims:
// a run whose model says it verified the write still goes to the
// supervisor with nothing of that claim on its wall (no probe, no
// supervisor reads them), and the operation is not settled by it. The
// kernel's agent runs rely on this (docs/agents.md).
func TestAgentAnswerIsNeverEvidence(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	const claim = "CLAIM-7f3a: I verified the file was written; the effect occurred"
	run := "agent-claims"
	turn, err := kernel.NewAgentTurn(1, "scripted", []kernel.AgentMessage{{Role: "user", Content: "write it"}},
		kernel.AgentAnswer{Content: claim, ToolCalls: []kernel.AgentToolCall{{ID: "c1", Name: "run_command", OperationID: "op-1-c1"}}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	evs := []kernel.Event{
		e.event(run, run+"/run/started", kernel.TypeRunStarted, e.t0, kernel.RunStarted{PlanSummary: "agent"}),
		e.event(run, run+"/turn/1", kernel.TypeAgentTurn, e.t0, turn),
	}
	evs = append(evs, e.opEvents(run, e.t0.Add(time.Second), opSpec{id: "op-1-c1", outcome: "uncertain"})...)
	evs = append(evs, e.event(run, run+"/run/completed", kernel.TypeRunCompleted, e.t0.Add(time.Minute),
		kernel.RunCompleted{FinalAnswer: claim, AnswerAuthor: kernel.ActorAgent}))
	e.ingest(evs...)

	var (
		mu   sync.Mutex
		seen []pipeline.Wall
	)
	spy := decideFunc{name: "spy", f: func(ctx context.Context, w pipeline.Wall) (pipeline.Decision, error) {
		mu.Lock()
		seen = append(seen, w)
		mu.Unlock()
		return supervisor.Builtin{}.Decide(ctx, w)
	}}
	rep, err := e.sweeper(Config{Supervisor: spy, Probes: probe.Set{probe.Child{Journal: e.j}}}).Sweep(context.Background(), SweepParams{Project: "acme", RunID: run})
	if err != nil || rep.Journaled != 1 || len(seen) != 1 {
		t.Fatalf("sweep: %+v %v (%d walls)", rep, err, len(seen))
	}
	raw, _ := json.Marshal(seen)
	if strings.Contains(string(raw), "CLAIM-7f3a") {
		t.Fatalf("the agent's claim reached the supervisor's wall: %s", raw)
	}
	e.drain()
	var d kernel.Reconciliation
	recs := e.reconciled(run)
	if len(recs["op-1-c1"]) != 1 || recs["op-1-c1"][0].DecodeData(&d) != nil {
		t.Fatalf("reconciliations: %+v", recs)
	}
	if d.Effect == kernel.EffectOccurred || strings.Contains(d.Note+string(d.Evidence), "CLAIM-7f3a") {
		t.Fatalf("the claim settled the operation: %+v", d)
	}
}
