package supervisor

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/seed-7bc021c3/reckon/kernel"
	"github.com/seed-7bc021c3/reckon/pipeline"
)

// agentWall holds the two unsafe cases an external agent's own reports
// would produce if taken as evidence, and their kernel-reported twins.
func agentWall() pipeline.Wall {
	t0 := time.Date(2026, 11, 30, 10, 0, 0, 0, time.UTC)
	agentKey := func(op string) kernel.EventKey { return kernel.EventKey{SourceID: "agent-x", EventID: op + "/started"} }
	kernelKey := func(op string) kernel.EventKey {
		return kernel.EventKey{SourceID: "kernel", EventID: "run-1/" + op + "/started"}
	}
	return pipeline.Wall{Project: "acme", RunID: "run-1", Part: 1, Parts: 1, BuiltAt: t0.Add(time.Hour),
		Operations: []pipeline.WallOperation{
			// The agent says its call was rejected by argument validation;
			// the effect had landed.
			{OperationID: "op-agent-validation", Tool: "mcp__create_issue", State: "failed_uncertain", StartedAt: t0,
				StartedKey: agentKey("op-agent-validation"), AgentReported: true,
				Failure: &pipeline.WallFailure{ErrorType: kernel.ErrorTypeValidation, Error: "bad title", Effect: "uncertain",
					ReportedBy: "agent-x", AgentReported: true}},
			// The agent says 2 of 2 child operations settled; the probe
			// says the child never started.
			{OperationID: "op-agent-child", Tool: "delegate", State: "failed_uncertain", StartedAt: t0,
				StartedKey: agentKey("op-agent-child"), AgentReported: true, ChildRunID: "run-1.op-agent-child",
				Failure: &pipeline.WallFailure{ErrorType: kernel.ErrorTypeDelegationFail, Error: "child failed", Effect: "uncertain",
					ReportedBy: "agent-x", AgentReported: true},
				ChildOps: &pipeline.ChildSummary{ChildSummary: kernel.ChildSummary{Total: 2, Unresolved: 0}, ReportedBy: "agent-x", AgentReported: true},
				Evidence: []pipeline.Evidence{{Probe: "journal.child_run", Finding: pipeline.FindingInconclusive,
					Detail: "child run run-1.op-agent-child has no run.started in the journal"}}},
			// A kernel tool.started with an agent-reported failure: the
			// failure is still the agent's claim.
			{OperationID: "op-mixed", Tool: "run_command", State: "failed_uncertain", StartedAt: t0, StartedKey: kernelKey("op-mixed"),
				Failure: &pipeline.WallFailure{ErrorType: kernel.ErrorTypeUnknownTool, Error: "no such tool", Effect: "uncertain",
					ReportedBy: "agent-x", AgentReported: true}},
			// The kernel's own legacy failure before the boundary: a fact.
			{OperationID: "op-kernel-validation", Tool: "run_command", State: "failed_uncertain", StartedAt: t0, StartedKey: kernelKey("op-kernel-validation"),
				Failure: &pipeline.WallFailure{ErrorType: kernel.ErrorTypeValidation, Error: "bad args", Effect: "uncertain", ReportedBy: "kernel"}},
			// A crash-window delegation whose counts the listing made up
			// from the child's events: nobody checked the child ended.
			{OperationID: "op-counted", Tool: "delegate", State: "crash_window", StartedAt: t0, StartedKey: kernelKey("op-counted"),
				ChildRunID: "run-1.op-counted", ChildOps: &pipeline.ChildSummary{ChildSummary: kernel.ChildSummary{Total: 1, Unresolved: 0}, Counted: true}},
		}}
}

func TestOnlyKernelFactsAreEvidence(t *testing.T) {
	t.Parallel()
	w := agentWall()
	d := decideValid(t, w)
	want := map[string]string{
		"op-agent-validation":  kernel.EffectUnknown,
		"op-agent-child":       kernel.EffectUnknown,
		"op-mixed":             kernel.EffectUnknown,
		"op-kernel-validation": kernel.EffectNone,
		"op-counted":           kernel.EffectUnknown,
	}
	for _, v := range d.Operations {
		if v.Effect != want[v.OperationID] {
			t.Errorf("%s: builtin said %s, want %s (note %q)", v.OperationID, v.Effect, want[v.OperationID], v.Note)
		}
		if p := Prove(mustOp(w, v.OperationID)); p.Effect != map[string]string{"op-kernel-validation": "none"}[v.OperationID] {
			t.Errorf("%s: Prove says %q", v.OperationID, p.Effect)
		}
	}
	if !d.NeedsAttention {
		t.Fatal("agent claims decided nothing, yet no attention")
	}
	note := d.Operations[0].Note
	if !strings.Contains(note, `reported by source "agent-x", not the kernel`) {
		t.Errorf("the note does not say why the agent's failure was not evidence: %q", note)
	}
}

// TestOldWallsReadTheStartedSource: walls recorded before reported_by
// existed (the committed drill fixtures) carry no failure source; the
// tool.started's source stands in, so kernel drills keep their meaning and
// an old agent wall stays a claim.
func TestOldWallsReadTheStartedSource(t *testing.T) {
	t.Parallel()
	var op pipeline.WallOperation
	if err := json.Unmarshal([]byte(`{"operation_id":"op-1","tool":"delegate","state":"failed_uncertain",
		"started_key":{"source_id":"kernel","event_id":"r/op-1/started"},
		"failure":{"error_type":"delegated_run_failed","error":"x","effect":"uncertain"},
		"child_summary":{"total":2,"unresolved":0}}`), &op); err != nil {
		t.Fatal(err)
	}
	if p := Prove(op); p.Effect != kernel.EffectOccurred {
		t.Fatalf("an old kernel wall lost its child-summary proof: %+v", p)
	}
	op.StartedKey.SourceID = "agent-x"
	if p := Prove(op); p.Proven() {
		t.Fatalf("an old agent wall's child summary proved %s", p.Effect)
	}
}

func TestSettle(t *testing.T) {
	t.Parallel()
	w := testWall()
	// The model answers occurred by inference wherever a probe does not
	// forbid it: op-2 has an occurred probe (basis inference, still
	// proven), op-3 a kernel child summary of a settled child, op-4 a
	// kernel pre-boundary failure (which proves none, not occurred), op-1
	// nothing at all; op-5's probes disagree, so it stays unknown.
	// Validate refuses op-4's answer (the model gets a repair round; the
	// sweep never settles what Validate refused), and Settle, applied
	// anyway, holds it under evidence as it holds any unproven inference.
	d := pipeline.Decision{Supervisor: "openai", Model: "m", NeedsAttention: true,
		Causes: []string{"probes disagree on op-5"}, Remedies: []string{"look at op-5"}, Lesson: "op-5 needs a person",
		Operations: []pipeline.EffectAnswer{
			{OperationID: "op-1", Effect: "occurred", Basis: "inference", Note: "looks done"},
			{OperationID: "op-2", Effect: "occurred", Basis: "inference", Note: "the lookup says so"},
			{OperationID: "op-3", Effect: "occurred", Basis: "inference", Note: "child settled"},
			{OperationID: "op-4", Effect: "occurred", Basis: "inference", Note: "guess"},
			{OperationID: "op-5", Effect: "unknown", Basis: "inference", Note: "probes disagree"},
		}}
	if err := Validate(w, d); err == nil || !strings.Contains(err.Error(), `"op-4").effect "occurred" contradicts a fact the kernel recorded`) ||
		strings.Count(err.Error(), "contradicts") != 1 {
		t.Fatalf("Validate: %v, want only op-4's answer refused", err)
	}
	before, _ := json.Marshal(d)

	got := Settle(SettleEvidence, w, d)
	if after, _ := json.Marshal(d); string(after) != string(before) {
		t.Fatal("Settle modified its input")
	}
	want := map[string][2]string{
		"op-1": {"unknown", "occurred"}, "op-2": {"occurred", ""}, "op-3": {"occurred", ""},
		"op-4": {"unknown", "occurred"}, "op-5": {"unknown", ""},
	}
	for _, v := range got.Operations {
		if g := [2]string{v.Effect, v.ProposedEffect}; g != want[v.OperationID] {
			t.Errorf("%s: effect/proposed %v, want %v", v.OperationID, g, want[v.OperationID])
		}
		if v.ProposedEffect != "" && (!strings.Contains(v.Note, "settlement policy evidence") || !strings.HasSuffix(v.Note, "The supervisor's note: "+map[string]string{"op-1": "looks done", "op-4": "guess"}[v.OperationID])) {
			t.Errorf("%s: note does not say why and keep the model's note: %q", v.OperationID, v.Note)
		}
	}
	if got.SettlePolicy != SettleEvidence || !got.NeedsAttention || len(got.Causes) != 2 || len(got.Remedies) != 2 {
		t.Fatalf("settled decision: %+v", got)
	}
	if !strings.Contains(got.Causes[1], `"op-1", "op-4"`) || got.Lesson != "op-5 needs a person" {
		t.Fatalf("cause/lesson: %q / %q", got.Causes[1], got.Lesson)
	}

	// A settled decision with nothing held and no attention keeps its flag.
	w2 := w
	w2.Operations = w.Operations[1:3]
	d2 := pipeline.Decision{Supervisor: "openai", Causes: []string{}, Remedies: []string{}, Lesson: "fine",
		Operations: []pipeline.EffectAnswer{
			{OperationID: "op-2", Effect: "occurred", Basis: "probe", Note: "lookup"},
			{OperationID: "op-3", Effect: "occurred", Basis: "inference", Note: "child"}}}
	if s := Settle(SettleEvidence, w2, d2); s.NeedsAttention || s.Operations[0].Effect != "occurred" || s.Operations[1].Effect != "occurred" {
		t.Fatalf("proven verdicts were held: %+v", s)
	}

	// inference keeps the decision as it is, naming the policy.
	inf := Settle(SettleInference, w, d)
	if inf.SettlePolicy != SettleInference || inf.Operations[0].Effect != "occurred" || inf.Operations[3].Effect != "occurred" || len(inf.Causes) != 1 {
		t.Fatalf("inference policy changed the decision: %+v", inf)
	}

	// A full list of causes stays within Validate's bound.
	full := d
	full.Causes = make([]string, MaxListItems)
	for i := range full.Causes {
		full.Causes[i] = "c"
	}
	if s := Settle(SettleEvidence, w, full); len(s.Causes) != MaxListItems || !strings.Contains(s.Causes[MaxListItems-1], "settlement policy") {
		t.Fatalf("bounded causes: %d %q", len(s.Causes), s.Causes[len(s.Causes)-1])
	}
	for _, in := range []string{"", "evidence", "inference"} {
		if _, err := ParseSettlePolicy(in); err != nil {
			t.Errorf("ParseSettlePolicy(%q): %v", in, err)
		}
	}
	if _, err := ParseSettlePolicy("trust"); err == nil {
		t.Error("ParseSettlePolicy accepted trust")
	}
}

// TestKernelChildSummaryFollowsTheKernelsRule: since a child run's
// operations settled unknown or all none stopped making its delegation
// occurred (kernel.ChildSummary.Effect), the kernel records such a
// delegation's failure uncertain (or none) with every child operation
// settled. "All settled" must not prove occurred by inference then.
func TestKernelChildSummaryFollowsTheKernelsRule(t *testing.T) {
	t.Parallel()
	var f kernel.ToolFailed
	if err := json.Unmarshal([]byte(`{"operation_id":"op-1","error_type":"delegated_run_failed","error":"x","effect":"uncertain",
		"child_ops_total":2,"child_ops_unresolved":0,"child_ops_unknown":1}`), &f); err != nil {
		t.Fatal(err)
	}
	c := f.ChildSummary()
	if c == nil || c.Unknown != 1 {
		t.Fatalf("tool.failed's child summary %+v lost child_ops_unknown", c)
	}
	op := pipeline.WallOperation{OperationID: "op-1", Tool: "delegate", State: "failed_uncertain",
		StartedKey: kernel.EventKey{SourceID: "kernel", EventID: "r/op-1/started"}, ChildRunID: "r.op-1",
		Failure:  &pipeline.WallFailure{ErrorType: kernel.ErrorTypeDelegationFail, Error: "x", Effect: "uncertain", ReportedBy: "kernel"},
		ChildOps: &pipeline.ChildSummary{ChildSummary: *c, ReportedBy: "kernel"}}
	if p := Prove(op); p.Effect == kernel.EffectOccurred {
		t.Fatalf("a child with an operation ruled unknown proved its delegation occurred: %+v", p)
	}
	op.ChildOps.Unknown, op.ChildOps.None = 0, 2
	if p := Prove(op); p.Effect == kernel.EffectOccurred {
		t.Fatalf("a child whose every operation settled none proved its delegation occurred: %+v", p)
	}
	op.ChildOps.None = 1
	if p := Prove(op); p.Effect != kernel.EffectOccurred {
		t.Fatalf("a child with an operation that occurred, all settled: %+v, want occurred", p)
	}
}

// TestProveRejectsFindingsWithoutTheirPreconditions: a decisive finding
// proves nothing when it was observed before the operation started, when
// it rests on a wait not measured on one clock (or not yet passed), or
// when it reads a store others write without anything unique to the call;
// the built-in supervisor then answers unknown, saying why, validation
// lets a verdict contradict such a finding, and settlement does not let
// an inference rest on it.
func TestProveRejectsFindingsWithoutTheirPreconditions(t *testing.T) {
	t.Parallel()
	t0 := time.Date(2026, 11, 30, 10, 0, 0, 0, time.UTC)
	seen := t0.Add(10 * time.Minute)
	db := func(since, at time.Time, need time.Duration) *pipeline.Preconditions {
		return &pipeline.Preconditions{Elapsed: &pipeline.Elapsed{Clock: pipeline.ClockDatabase, Since: since, At: at, NeedMS: need.Milliseconds()}}
	}
	store := func(s pipeline.Store) *pipeline.Preconditions { return &pipeline.Preconditions{Store: &s} }
	for _, c := range []struct {
		name, probe, finding string
		observed             time.Time
		pre                  *pipeline.Preconditions
		why                  string // "" when the finding proves
	}{
		{"lookup completed", "mcp.lookup_operation", "occurred", seen, nil, ""},
		{"lookup completed, observed before the start", "mcp.lookup_operation", "occurred", t0.Add(-time.Second), nil, "observed at"},
		{"no observation time", "mcp.lookup_operation", "occurred", time.Time{}, nil, "does not say when it was observed"},
		{"never_seen, wait measured on the database's clock", "mcp.lookup_operation", "none", seen, db(t0, seen, 5*time.Minute), ""},
		{"never_seen, observed before the start", "mcp.lookup_operation", "none", t0.Add(-time.Minute), db(t0, seen, 5*time.Minute), "before the operation started"},
		{"never_seen without a measured wait", "mcp.lookup_operation", "none", seen, nil, "no measurement of it on one clock"},
		{"never_seen, wait not passed", "mcp.lookup_operation", "none", seen, db(t0, t0.Add(70*time.Second), 5*time.Minute), "only 1m10s of the 5m0s"},
		{"never_seen, wait measured from before the commit", "mcp.lookup_operation", "none", seen, db(t0.Add(-time.Hour), seen, 5*time.Minute), "not the journal's commit time"},
		{"never_seen, wait on another clock", "mcp.lookup_operation", "none", seen,
			&pipeline.Preconditions{Elapsed: &pipeline.Elapsed{Clock: "sweeper", Since: t0, At: seen, NeedMS: 1}}, `clock "sweeper"`},
		{"diff none, the worker answered", "workspace.diff", "none", seen, &pipeline.Preconditions{Answered: true}, ""},
		{"missing file without a measured wait", "workspace.postcondition", "none", seen, nil, "no measurement"},
		{"memory entity on a shared store", "mcp.state", "occurred", seen, store(pipeline.Store{Server: "memory"}), "which other writers can reach"},
		{"memory entity, no store named", "mcp.state", "occurred", seen, nil, "says nothing of whom"},
		{"memory entity on an exclusive store", "mcp.state", "occurred", seen, store(pipeline.Store{Server: "memory", Exclusive: true}), ""},
		{"a contract's change with the call's key", "contract.issues", "occurred", seen, store(pipeline.Store{Server: "issues", CallUnique: "the idempotency key"}), ""},
		{"child run replayed", "journal.child_run", "none", seen, nil, ""},
	} {
		op := pipeline.WallOperation{OperationID: "op-1", Tool: "mcp__x", State: "failed_uncertain", StartedAt: t0, JournaledAt: &t0,
			StartedKey: kernel.EventKey{SourceID: kernel.SourceKernel, EventID: "op-1"},
			Evidence:   []pipeline.Evidence{{Probe: c.probe, Finding: c.finding, Detail: "d", ObservedAt: c.observed, Preconditions: c.pre}}}
		p := Prove(op)
		if c.why == "" {
			if p.Effect != c.finding || len(p.Rejected) != 0 {
				t.Errorf("%s: %+v, want proven %s", c.name, p, c.finding)
			}
			continue
		}
		if p.Proven() || len(p.Rejected) != 1 || !strings.Contains(p.Rejected[0], c.why) {
			t.Errorf("%s: %+v, want unproven, rejected for %q", c.name, p, c.why)
			continue
		}
		w := pipeline.Wall{Project: "p", RunID: "r", Part: 1, Parts: 1, Operations: []pipeline.WallOperation{op}}
		d := decideValid(t, w)
		if v := d.Operations[0]; v.Effect != kernel.EffectUnknown || !d.NeedsAttention || !strings.Contains(v.Note, c.why) {
			t.Errorf("%s: the built-in answered %s (%q), want unknown saying %q", c.name, v.Effect, v.Note, c.why)
		}
		other := map[string]string{"occurred": "none", "none": "occurred"}[c.finding]
		agree := pipeline.Decision{Supervisor: "m", NeedsAttention: true, Causes: []string{"c"}, Remedies: []string{"r"}, Lesson: "l",
			Operations: []pipeline.EffectAnswer{{OperationID: "op-1", Effect: other, Basis: kernel.BasisInference, Note: "n"}}}
		if err := Validate(w, agree); err != nil {
			t.Errorf("%s: a verdict against a finding that proves nothing was refused: %v", c.name, err)
		}
		agree.Operations[0].Effect = c.finding
		if s := Settle(SettleEvidence, w, agree); s.Operations[0].Effect != kernel.EffectUnknown {
			t.Errorf("%s: an inference resting on a finding that proves nothing settled %s", c.name, s.Operations[0].Effect)
		}
		agree.Operations[0].Basis = kernel.BasisProbe
		if err := Validate(w, agree); err == nil {
			t.Errorf("%s: basis probe on a finding that proves nothing passed validation", c.name)
		}
	}
}
