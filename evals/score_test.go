package evals

import (
	"context"
	"encoding/json"
	"errors"
	"math"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/seed-7bc021c3/reckon/pipeline"
)

// testStart is when every test operation started.
var testStart = time.Date(2026, 11, 30, 10, 0, 0, 0, time.UTC)

// op builds a wall operation; proof, when set, adds one probe finding
// whose preconditions hold (observed after the start, the worker
// answered, a change carrying the call's own id).
func op(id, tool, proof string) pipeline.WallOperation {
	o := pipeline.WallOperation{OperationID: id, Tool: tool, State: "failed_uncertain", StartedAt: testStart}
	if proof != "" {
		o.Evidence = []pipeline.Evidence{{Probe: "test.probe", Finding: proof, Detail: "hand-built", ObservedAt: testStart.Add(time.Hour),
			Preconditions: &pipeline.Preconditions{Answered: true, Store: &pipeline.Store{Server: "s", CallUnique: "the call's id"}}}}
	}
	return o
}

// fixture builds a fixture from ops and truth pairs, recording that a
// person is needed exactly where the wall's evidence does not prove the
// truth.
func fixture(id, scenario string, ops []pipeline.WallOperation, truth ...string) *Fixture {
	f := &Fixture{Version: FixtureVersion, ID: id, Scenario: scenario, Truth: map[string]string{}, NeedsPerson: map[string]bool{},
		Wall: pipeline.Wall{Project: "p", RunID: id, Part: 1, Parts: 1, Operations: ops}}
	for i, o := range ops {
		f.Truth[o.OperationID] = truth[i]
		e, ok := Decidable(o)
		f.NeedsPerson[o.OperationID] = !ok || e != truth[i]
		f.ExpectNeedsAttention = f.ExpectNeedsAttention || f.NeedsPerson[o.OperationID]
	}
	return f
}

// scripted answers each wall (by run id) as told, advancing a fake clock.
type scripted struct {
	mu      sync.Mutex
	now     time.Time
	answers map[string]pipeline.Decision
	errs    map[string]error
	panics  map[string]bool
	blocks  map[string]bool
	delays  map[string]time.Duration
}

func (s *scripted) Name() string { return "scripted" }

func (s *scripted) clock() time.Time {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.now
}

func (s *scripted) Decide(ctx context.Context, w pipeline.Wall) (pipeline.Decision, error) {
	s.mu.Lock()
	s.now = s.now.Add(s.delays[w.RunID])
	s.mu.Unlock()
	if s.panics[w.RunID] {
		panic("scripted panic")
	}
	if s.blocks[w.RunID] {
		<-ctx.Done()
		return pipeline.Decision{}, ctx.Err()
	}
	if err := s.errs[w.RunID]; err != nil {
		return pipeline.Decision{}, err
	}
	return s.answers[w.RunID], nil
}

// decideFunc is a supervisor made of a function.
type decideFunc func(context.Context, pipeline.Wall) (pipeline.Decision, error)

func (decideFunc) Name() string { return "scripted" }

func (f decideFunc) Decide(ctx context.Context, w pipeline.Wall) (pipeline.Decision, error) {
	return f(ctx, w)
}

func v(id, effect, basis string) pipeline.EffectAnswer {
	return pipeline.EffectAnswer{OperationID: id, Effect: effect, Basis: basis, Note: "scripted " + effect}
}

func attention(ops ...pipeline.EffectAnswer) pipeline.Decision {
	return pipeline.Decision{NeedsAttention: true, Causes: []string{"c"}, Remedies: []string{"r"}, Lesson: "l",
		Operations: ops, Supervisor: "scripted", Model: "m-1", PromptVersion: "v9"}
}

func calm(ops ...pipeline.EffectAnswer) pipeline.Decision {
	return pipeline.Decision{Operations: ops, Supervisor: "scripted", Model: "m-1", PromptVersion: "v9"}
}

func approx(t *testing.T, name string, got *float64, want float64) {
	t.Helper()
	if got == nil {
		t.Errorf("%s = nil, want %.4f", name, want)
		return
	}
	if math.Abs(*got-want) > 1e-9 {
		t.Errorf("%s = %.6f, want %.6f", name, *got, want)
	}
}

func eq[T comparable](t *testing.T, name string, got, want T) {
	t.Helper()
	if got != want {
		t.Errorf("%s = %v, want %v", name, got, want)
	}
}

// threeWalls is the hand-computed set: 3 walls, 7 operations.
//
//	wall a (s1): a1 truth occurred, proof occurred; a2 truth none, no proof      → expect attention
//	wall b (s1): b1 occurred/proof occurred; b2 none/no proof; b3 occurred/none  → expect attention
//	wall c (s2): c1 none/proof none; c2 occurred/proof occurred                  → expect calm
func threeWalls() []*Fixture {
	return []*Fixture{
		fixture("a", "s1", []pipeline.WallOperation{op("a1", "run_command", "occurred"), op("a2", "run_command", "")}, "occurred", "none"),
		fixture("b", "s1", []pipeline.WallOperation{op("b1", "mcp__create_issue", "occurred"), op("b2", "mcp__create_issue", ""), op("b3", "run_command", "")}, "occurred", "none", "occurred"),
		fixture("c", "s2", []pipeline.WallOperation{op("c1", "run_command", "none"), op("c2", "delegate", "occurred")}, "none", "occurred"),
	}
}

func TestScoreHandComputed(t *testing.T) {
	t.Parallel()
	fx := threeWalls()
	eq(t, "expect a", fx[0].ExpectNeedsAttention, true)
	eq(t, "expect b", fx[1].ExpectNeedsAttention, true)
	eq(t, "expect c", fx[2].ExpectNeedsAttention, false)

	sup := &scripted{now: time.Date(2026, 11, 30, 1, 0, 0, 0, time.UTC),
		answers: map[string]pipeline.Decision{
			// a: both right, attention raised (TP).
			"a": attention(v("a1", "occurred", "probe"), v("a2", "none", "inference")),
			// b: b2 said occurred by inference (unsafe-occurred), b3 said
			// none (unsafe-none), attention not raised (FN).
			"b": calm(v("b1", "occurred", "probe"), v("b2", "occurred", "inference"), v("b3", "none", "inference")),
			// c: c2 abstained, attention raised although everything is proven (FP).
			"c": attention(v("c1", "none", "probe"), v("c2", "unknown", "inference")),
		},
		delays: map[string]time.Duration{"a": 5 * time.Millisecond, "b": 40 * time.Millisecond, "c": 15 * time.Millisecond},
	}
	for id, u := range map[string]pipeline.Usage{"a": {PromptTokens: 100, CompletionTokens: 20}, "b": {PromptTokens: 200, CompletionTokens: 30}, "c": {PromptTokens: 50, CompletionTokens: 5}} {
		d := sup.answers[id]
		d.Usage = u
		sup.answers[id] = d
	}
	var progress []string
	// Under the inference policy every valid verdict settles as given.
	rep, err := Score(context.Background(), sup, fx, ScoreParams{Policy: "inference", Now: sup.clock, Progress: func(done, total int, c CaseResult) {
		progress = append(progress, c.ID)
		eq(t, "progress total", total, 3)
	}})
	if err != nil {
		t.Fatal(err)
	}
	eq(t, "progress calls", strings.Join(progress, ","), "a,b,c")
	m := rep.Metrics
	eq(t, "walls", m.Walls, 3)
	eq(t, "walls ok", m.WallsOK, 3)
	eq(t, "operations", m.Operations, 7)
	eq(t, "truth occurred", m.TruthOccurred, 4)
	eq(t, "truth none", m.TruthNone, 3)
	eq(t, "decided", m.Decided, 6)
	eq(t, "correct", m.Correct, 4)
	eq(t, "unknown", m.Unknown, 1)
	eq(t, "invalid", m.Invalid, 0)
	approx(t, "accuracy", m.Accuracy, 4.0/6.0)
	approx(t, "coverage", m.Coverage, 6.0/7.0)
	eq(t, "unsafe none", m.UnsafeNone, 1)
	eq(t, "unsafe occurred", m.UnsafeOccurred, 1)
	approx(t, "unsafe none rate", m.UnsafeNoneRate, 1.0/4.0)
	approx(t, "unsafe occurred rate", m.UnsafeOccurredRate, 1.0/3.0)
	eq(t, "TP", m.NeedsAttention.TruePositives, 1)
	eq(t, "FP", m.NeedsAttention.FalsePositives, 1)
	eq(t, "FN", m.NeedsAttention.FalseNegatives, 1)
	eq(t, "TN", m.NeedsAttention.TrueNegatives, 0)
	approx(t, "precision", m.NeedsAttention.Precision, 0.5)
	approx(t, "recall", m.NeedsAttention.Recall, 0.5)
	eq(t, "prompt tokens", m.Usage.PromptTokens, 350)
	eq(t, "completion tokens", m.Usage.CompletionTokens, 55)
	eq(t, "latency mean", m.Latency.MeanMS, 20.0)
	eq(t, "latency p50", m.Latency.P50MS, 15.0)
	eq(t, "latency p95", m.Latency.P95MS, 40.0)
	eq(t, "latency max", m.Latency.MaxMS, 40.0)
	eq(t, "duration", rep.DurationMS, 60.0)
	want := map[string]map[string]int{
		"occurred": {"occurred": 2, "none": 1, "unknown": 1, "invalid": 0},
		"none":     {"occurred": 1, "none": 2, "unknown": 0, "invalid": 0},
	}
	for tr, row := range want {
		for said, n := range row {
			eq(t, "confusion "+tr+"→"+said, m.Confusion[tr][said], n)
		}
	}
	eq(t, "model", rep.Model, "m-1")
	eq(t, "prompt version", rep.PromptVersion, "v9")
	eq(t, "supervisor", rep.Supervisor, "scripted")

	if len(rep.Scenarios) != 2 {
		t.Fatalf("scenarios = %d, want 2", len(rep.Scenarios))
	}
	s1, s2 := rep.Scenarios[0], rep.Scenarios[1]
	eq(t, "s1 name", s1.Scenario, "s1")
	eq(t, "s1 ops", s1.Metrics.Operations, 5)
	approx(t, "s1 accuracy", s1.Metrics.Accuracy, 3.0/5.0)
	approx(t, "s1 coverage", s1.Metrics.Coverage, 1.0)
	if s1.Metrics.NeedsAttention.Precision == nil || *s1.Metrics.NeedsAttention.Precision != 1 {
		t.Errorf("s1 precision = %v, want 1", s1.Metrics.NeedsAttention.Precision)
	}
	approx(t, "s2 accuracy", s2.Metrics.Accuracy, 1.0)
	approx(t, "s2 coverage", s2.Metrics.Coverage, 0.5)
	if s2.Metrics.NeedsAttention.Recall != nil {
		t.Errorf("s2 recall = %v, want undefined (no wall expected attention)", *s2.Metrics.NeedsAttention.Recall)
	}

	b := rep.Cases[1]
	eq(t, "b2 unsafe", b.Operations[1].Unsafe, UnsafeOccurred)
	eq(t, "b3 unsafe", b.Operations[2].Unsafe, UnsafeNone)
	eq(t, "b1 correct", b.Operations[0].Correct, true)
	eq(t, "policy", rep.SettlePolicy, "inference")
	eq(t, "proposed unsafe none", m.ProposedUnsafeNone, 1)
	eq(t, "proposed unsafe occurred", m.ProposedUnsafeOccurred, 1)
	eq(t, "held", m.Held, 0)

	// Under the evidence policy (the default) the same answers settle only
	// what a probe proves: a2, b2 and b3 are held as unknown with their
	// proposals, b's wall now asks for attention, nothing unsafe is
	// journaled, and the proposed counts still show the model's two errors.
	sup.now = time.Date(2026, 11, 30, 1, 0, 0, 0, time.UTC)
	ev, err := Score(context.Background(), sup, fx, ScoreParams{Now: sup.clock})
	if err != nil {
		t.Fatal(err)
	}
	em := ev.Metrics
	eq(t, "evidence policy", ev.SettlePolicy, "evidence")
	eq(t, "evidence decided", em.Decided, 3)
	eq(t, "evidence correct", em.Correct, 3)
	eq(t, "evidence unknown", em.Unknown, 4)
	eq(t, "evidence unsafe none", em.UnsafeNone, 0)
	eq(t, "evidence unsafe occurred", em.UnsafeOccurred, 0)
	eq(t, "evidence proposed unsafe none", em.ProposedUnsafeNone, 1)
	eq(t, "evidence proposed unsafe occurred", em.ProposedUnsafeOccurred, 1)
	eq(t, "evidence held", em.Held, 3)
	eq(t, "evidence TP", em.NeedsAttention.TruePositives, 2)
	eq(t, "evidence FN", em.NeedsAttention.FalseNegatives, 0)
	eb := ev.Cases[1].Operations
	eq(t, "b2 said", eb[1].Said, "unknown")
	eq(t, "b2 proposed", eb[1].Proposed, "occurred")
	eq(t, "b2 proposed unsafe", eb[1].ProposedUnsafe, UnsafeOccurred)
	eq(t, "b2 unsafe", eb[1].Unsafe, "")
	eq(t, "a2 proposed unsafe", ev.Cases[0].Operations[1].ProposedUnsafe, "")

	if _, err := Score(context.Background(), sup, fx, ScoreParams{Policy: "trust"}); err == nil || !strings.Contains(err.Error(), "evidence or inference") {
		t.Fatalf("a bad policy was accepted: %v", err)
	}
}

func TestScoreFailedCasesAreRecordedAndTheRunGoesOn(t *testing.T) {
	t.Parallel()
	fx := []*Fixture{
		fixture("d-invalid", "s", []pipeline.WallOperation{op("d1", "run_command", ""), op("d2", "run_command", "")}, "occurred", "none"),
		fixture("e-error", "s", []pipeline.WallOperation{op("e1", "run_command", "")}, "occurred"),
		fixture("f-panic", "s", []pipeline.WallOperation{op("f1", "run_command", "")}, "none"),
		fixture("g-timeout", "s", []pipeline.WallOperation{op("g1", "run_command", "")}, "none"),
		fixture("h-ok", "s", []pipeline.WallOperation{op("h1", "run_command", "")}, "occurred"),
	}
	sup := &scripted{
		answers: map[string]pipeline.Decision{
			"d-invalid": attention(v("d1", "unknown", "inference")), // d2 missing
			"h-ok":      attention(v("h1", "unknown", "inference")),
		},
		errs:   map[string]error{"e-error": errors.New("model said 500")},
		panics: map[string]bool{"f-panic": true},
		blocks: map[string]bool{"g-timeout": true},
	}
	rep, err := Score(context.Background(), sup, fx, ScoreParams{CaseTimeout: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	statuses := []string{}
	for _, c := range rep.Cases {
		statuses = append(statuses, c.Status)
	}
	eq(t, "statuses", strings.Join(statuses, ","), "invalid,error,error,error,ok")
	if !strings.Contains(rep.Cases[0].Error, `operations is missing "d2"`) {
		t.Errorf("invalid case error = %q, want it to name d2", rep.Cases[0].Error)
	}
	if !strings.Contains(rep.Cases[1].Error, "model said 500") {
		t.Errorf("error case = %q", rep.Cases[1].Error)
	}
	if !strings.Contains(rep.Cases[2].Error, "panicked") {
		t.Errorf("panic case = %q", rep.Cases[2].Error)
	}
	if !strings.Contains(rep.Cases[3].Error, "deadline") {
		t.Errorf("timeout case = %q", rep.Cases[3].Error)
	}
	m := rep.Metrics
	eq(t, "invalid outputs", m.InvalidOutputs, 1)
	eq(t, "errored", m.Errored, 3)
	eq(t, "walls ok", m.WallsOK, 1)
	eq(t, "invalid ops", m.Invalid, 5)
	eq(t, "unknown ops", m.Unknown, 1)
	eq(t, "decided", m.Decided, 0)
	if m.Accuracy != nil {
		t.Errorf("accuracy = %v, want undefined with nothing decided", *m.Accuracy)
	}
	approx(t, "coverage", m.Coverage, 0)
	eq(t, "confusion occurred→invalid", m.Confusion["occurred"]["invalid"], 2)
	eq(t, "confusion none→invalid", m.Confusion["none"]["invalid"], 3)
	eq(t, "confusion occurred→unknown", m.Confusion["occurred"]["unknown"], 1)
	// Attention is scored only where a valid decision exists: h-ok alone.
	eq(t, "TP", m.NeedsAttention.TruePositives, 1)
	eq(t, "FN", m.NeedsAttention.FalseNegatives, 0)
	if rep.Cases[0].NeedsAttention != nil {
		t.Error("invalid case carries a needs_attention flag")
	}
}

func TestScoreConcurrentKeepsFixtureOrder(t *testing.T) {
	t.Parallel()
	fx := threeWalls()
	sup := &scripted{answers: map[string]pipeline.Decision{
		"a": attention(v("a1", "occurred", "probe"), v("a2", "unknown", "inference")),
		"b": attention(v("b1", "occurred", "probe"), v("b2", "unknown", "inference"), v("b3", "unknown", "inference")),
		"c": calm(v("c1", "none", "probe"), v("c2", "occurred", "probe")),
	}}
	// Wall a is decided only once case c has finished (its progress
	// reported), so the cases finish out of fixture order (a after c); the
	// report must still list them in it. Releasing a when c's decision
	// returned, rather than when its case was reported, let a's report
	// overtake c's (120 runs in 9,000).
	cDone := make(chan struct{})
	ordered := decideFunc(func(ctx context.Context, w pipeline.Wall) (pipeline.Decision, error) {
		if w.RunID == "a" {
			select {
			case <-cDone:
			case <-ctx.Done():
				return pipeline.Decision{}, ctx.Err()
			}
		}
		return sup.Decide(ctx, w)
	})
	var finished []string
	rep, err := Score(context.Background(), ordered, fx, ScoreParams{Concurrency: 3, CaseTimeout: 10 * time.Second,
		Progress: func(_, _ int, c CaseResult) {
			finished = append(finished, c.ID)
			if c.ID == "c" {
				close(cDone)
			}
		}})
	if err != nil {
		t.Fatal(err)
	}
	if len(finished) != 3 || slices.Index(finished, "a") < slices.Index(finished, "c") {
		t.Fatalf("cases finished in order %v, want a after c", finished)
	}
	for i, id := range []string{"a", "b", "c"} {
		eq(t, "case order", rep.Cases[i].ID, id)
	}
	m := rep.Metrics
	approx(t, "accuracy", m.Accuracy, 1)
	approx(t, "coverage", m.Coverage, 4.0/7.0)
	approx(t, "precision", m.NeedsAttention.Precision, 1)
	approx(t, "recall", m.NeedsAttention.Recall, 1)
	eq(t, "unsafe", m.UnsafeNone+m.UnsafeOccurred, 0)
}

func TestScoreStopsWhenContextEnds(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := Score(ctx, &scripted{}, threeWalls(), ScoreParams{}); !errors.Is(err, context.Canceled) {
		t.Fatalf("Score on a cancelled context = %v, want context.Canceled", err)
	}
	if _, err := Score(context.Background(), &scripted{}, nil, ScoreParams{}); !errors.Is(err, ErrNoFixtures) {
		t.Fatalf("Score on no fixtures = %v, want ErrNoFixtures", err)
	}
}

// TestScoreAbandonsASupervisorThatIgnoresItsContext: --case-timeout
// bounds a case even when the supervisor never looks at its context: Score
// does not wait for Decide to return, for ever.
func TestScoreAbandonsASupervisorThatIgnoresItsContext(t *testing.T) {
	t.Parallel()
	block := make(chan struct{})
	t.Cleanup(func() { close(block) })
	stuck := decideFunc(func(context.Context, pipeline.Wall) (pipeline.Decision, error) {
		<-block
		return pipeline.Decision{}, errors.New("released")
	})
	type result struct {
		rep *Report
		err error
	}
	done := make(chan result, 1)
	go func() {
		rep, err := Score(context.Background(), stuck, threeWalls(), ScoreParams{CaseTimeout: 50 * time.Millisecond, Concurrency: 2})
		done <- result{rep, err}
	}()
	select {
	case r := <-done:
		if r.err != nil {
			t.Fatal(r.err)
		}
		for _, c := range r.rep.Cases {
			if c.Status != StatusError || !strings.Contains(c.Error, "abandoned") {
				t.Errorf("case %s: %s %q, want an error saying the call was abandoned", c.ID, c.Status, c.Error)
			}
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Score still waits for a supervisor that ignores its context, 10 s past a 50 ms case timeout")
	}
}

func TestScoreUsesTheSweepsValidation(t *testing.T) {
	t.Parallel()
	fx := threeWalls()
	sup := &scripted{answers: map[string]pipeline.Decision{
		// A probe basis the wall does not support: the sweep rejects it.
		"a": attention(v("a1", "occurred", "probe"), v("a2", "none", "probe")),
		// An unknown effect without needs_attention: rejected too.
		"b": calm(v("b1", "occurred", "probe"), v("b2", "none", "probe"), v("b3", "unknown", "inference")),
		// An invented id.
		"c": calm(v("c1", "none", "probe"), v("c2", "occurred", "probe"), v("c9", "none", "inference")),
	}}
	rep, err := Score(context.Background(), sup, fx, ScoreParams{})
	if err != nil {
		t.Fatal(err)
	}
	for i, want := range []string{"a2", "needs_attention must be true", "c9"} {
		c := rep.Cases[i]
		if c.Status != StatusInvalid || !strings.Contains(c.Error, want) {
			t.Errorf("case %s: status %s error %q, want invalid naming %q", c.ID, c.Status, c.Error, want)
		}
	}
	eq(t, "invalid outputs", rep.Metrics.InvalidOutputs, 3)
	eq(t, "invalid ops", rep.Metrics.Invalid, 7)
}

// TestReportsWrittenBeforeThePolicyStillLoad: a report.json from before
// the settlement policy (no settle_policy, proposed or proposed_unsafe
// fields) loads, and recomputing its metrics counts what it said as what
// was proposed.
func TestReportsWrittenBeforeThePolicyStillLoad(t *testing.T) {
	t.Parallel()
	old := `{"version":1,"supervisor":"openai","model":"m","fixtures":"evals/fixtures","model_invalid_answers":0,
	 "started_at":"2026-11-30T01:00:00Z","duration_ms":12,"metrics":{"walls":1,"unsafe_none":1},"scenarios":[],
	 "cases":[{"id":"a","scenario":"s","status":"ok","expect_needs_attention":true,"needs_attention":false,"latency_ms":1,
	   "usage":{"prompt_tokens":1,"completion_tokens":1},
	   "operations":[{"operation_id":"a1","tool":"run_command","truth":"occurred","said":"none","basis":"inference","correct":false,"unsafe":"unsafe_none"},
	                 {"operation_id":"a2","tool":"run_command","truth":"none","said":"none","basis":"inference","correct":true}]}]}`
	var rep Report
	if err := json.Unmarshal([]byte(old), &rep); err != nil {
		t.Fatal(err)
	}
	if rep.SettlePolicy != "" || rep.Cases[0].Operations[0].Proposed != "" {
		t.Fatalf("old report read with new fields: %+v", rep)
	}
	m := Compute(rep.Cases)
	eq(t, "unsafe none", m.UnsafeNone, 1)
	eq(t, "proposed unsafe none", m.ProposedUnsafeNone, 1)
	eq(t, "held", m.Held, 0)
	if !strings.Contains(Markdown(&rep), "settlement policy: `-`") {
		t.Error("an old report's markdown does not show the policy as unknown")
	}
}

// forger answers every operation with the truth on basis probe, after
// writing the probe finding that would back it into the wall it was given.
type forger struct{ truth map[string]string }

func (forger) Name() string { return "forger" }

func (f forger) Decide(_ context.Context, w pipeline.Wall) (pipeline.Decision, error) {
	var d pipeline.Decision
	for i := range w.Operations {
		o := &w.Operations[i]
		e := f.truth[o.OperationID]
		o.Evidence = append(o.Evidence[:0], pipeline.Evidence{Probe: "forged", Finding: e, Detail: "written by the supervisor"})
		d.Operations = append(d.Operations, pipeline.EffectAnswer{OperationID: o.OperationID, Effect: e, Basis: "probe", Note: "forged"})
	}
	d.Supervisor = "forger"
	return d, nil
}

// TestScoreJudgesTheFixturesWallNotTheSupervisorsCopy: a supervisor that
// writes the probe finding its answer needs into the wall it is handed
// must not be validated and settled against that forged wall (were its
// operations to share memory with the fixture, an inference would pass as
// a proof, and the fixture stay forged for every later case and
// supervisor).
func TestScoreJudgesTheFixturesWallNotTheSupervisorsCopy(t *testing.T) {
	t.Parallel()
	f := fixture("w", "s", []pipeline.WallOperation{op("w1", "run_command", ""), op("w2", "run_command", "")}, "occurred", "none")
	rep, err := Score(context.Background(), forger{truth: f.Truth}, []*Fixture{f}, ScoreParams{})
	if err != nil {
		t.Fatal(err)
	}
	if c := rep.Cases[0]; c.Status != StatusInvalid || !strings.Contains(c.Error, "basis is probe") {
		t.Errorf("forged probe basis scored %s (%q), want invalid", c.Status, c.Error)
	}
	for _, o := range f.Wall.Operations {
		if len(o.Evidence) != 0 {
			t.Errorf("the supervisor wrote into the fixture: %s has evidence %+v", o.OperationID, o.Evidence)
		}
	}
}
