package runner

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"
	historypb "go.temporal.io/api/history/v1"

	"github.com/seed-7bc021c3/reckon/internal/reckontest"
	"github.com/seed-7bc021c3/reckon/kernel"
	"github.com/seed-7bc021c3/reckon/kernel/fault"
	"github.com/seed-7bc021c3/reckon/kernel/operations"
)

// appendStep appends the operation's id to effects.txt: each execution
// leaves one line, so the file says how often the step ran, and as whom.
func appendStep(onUncertain string) Step {
	s := cmd(`echo "$RECKON_OPERATION_ID" >> effects.txt`)
	s.OnUncertain = onUncertain
	return s
}

// start starts the plan unchecked (the run goes on in the background).
func (e *env) start(runID string, plan Plan) {
	e.t.Helper()
	if _, _, err := e.starter.StartUnchecked(context.Background(), StartParams{Project: e.project, RunID: runID, Plan: plan}); err != nil {
		e.t.Fatalf("start %s: %v", runID, err)
	}
}

// awaiting waits until GET /v1/runs/{run_id} shows the run awaiting op
// and returns the view.
func (e *env) awaiting(runID, op string) RunView {
	e.t.Helper()
	var v RunView
	reckontest.Eventually(e.t, 60*time.Second, runID+" awaiting "+op, func() bool {
		var err error
		v, err = e.starter.View(context.Background(), e.project, runID, EventPage{})
		if err != nil {
			e.t.Fatal(err)
		}
		return v.Status == StatusAwaiting && v.Awaiting != nil && v.Awaiting.OperationID == op
	})
	return v
}

// settle records a reconciliation of op the way the reconcile path does:
// an operator's ruling (basis operator), or the supervisor's (basis probe
// or inference).
func (e *env) settle(runID, op, effect, basis string) operations.Recorded {
	e.t.Helper()
	actor := kernel.OperatorActor("ann")
	if basis != kernel.BasisOperator {
		actor = kernel.ActorSupervisor
	}
	rec, err := e.b.Ops.Reconcile(context.Background(), operations.ReconcileParams{
		Project: e.project, RunID: runID, OperationID: op, Effect: effect, Note: "settled by the test", Basis: basis, Actor: actor,
	})
	if err != nil {
		e.t.Fatalf("reconcile %s %s: %v", runID, op, err)
	}
	e.b.WaitDelivered(e.project, runID)
	return rec
}

// resumer runs a Resumer over the test's schema until the test ends;
// triage, when set, is its Triage.
func (e *env) resumer(triage func(ctx context.Context, project, runID string)) *Resumer {
	e.t.Helper()
	r := &Resumer{Pool: e.pool.Pool, Client: temporalConn.Client, Triage: triage, Scan: 250 * time.Millisecond, Log: zerolog.Nop()}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = r.Run(ctx) }()
	e.t.Cleanup(func() { cancel(); <-done })
	return r
}

// resumedData is the data of the run's run.resumed for op.
func resumedData(t *testing.T, evs []kernel.Event, op string) kernel.RunResumed {
	t.Helper()
	for _, ev := range evs {
		if ev.Type == kernel.TypeRunResumed && ev.OperationID() == op {
			var d kernel.RunResumed
			if err := ev.DecodeData(&d); err != nil {
				t.Fatal(err)
			}
			return d
		}
	}
	t.Fatalf("no run.resumed for %s", op)
	return kernel.RunResumed{}
}

// A run whose command committed its effect and then lost its worker waits
// across a worker's death; a probe's occurred resumes it without running
// the command again, and the next step runs: each line of effects.txt
// once. The journal says why the run went on; an operator's override
// that comes after is journaled and changes nothing.
func TestAwaitResumesOnAProbeVerdictAcrossAWorkerRestart(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOpts{fault: fault.Config{AfterEffect: "op-1"}})
	e.resumer(nil)
	step := appendStep(OnUncertainAwait)
	step.Postcondition = json.RawMessage(`{"path": "effects.txt"}`)
	e.start("r1", Plan{Steps: []Step{step, appendStep("")}})

	v := e.awaiting("r1", "op-1")
	if v.Awaiting.Since.IsZero() || v.Awaiting.Until == "" {
		t.Fatalf("awaiting = %+v: want since and until", v.Awaiting)
	}
	e.stopWorker()
	rec := e.settle("r1", "op-1", kernel.EffectOccurred, kernel.BasisProbe)
	e.signaled("r1") // while no worker runs: the server keeps the signal
	e.startWorker()

	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if err := e.wait(ctx, "r1"); err != nil {
		t.Fatalf("run failed: %v", err)
	}
	evs := e.events("r1")
	wantShape(t, evs, "run.started",
		"tool.started op-1", "tool.failed op-1 injected_fault effect=uncertain",
		"run.awaiting op-1", "operation.reconciled op-1", "run.resumed op-1",
		"tool.started op-2", "tool.completed op-2",
		"run.completed")
	if got := e.readFile("r1", "effects.txt"); got != "op-1\nop-2\n" {
		t.Fatalf("effects.txt = %q: want op-1 once (never run again) and op-2", got)
	}
	d := resumedData(t, evs, "op-1")
	if d.Effect != kernel.EffectOccurred || d.Basis != kernel.BasisProbe || *d.Reconciliation != rec.Event.Key() {
		t.Fatalf("run.resumed = %+v, want occurred by probe naming %s", d, rec.Event.Key())
	}

	// An override after the run resumed is the record's, not the run's.
	e.settle("r1", "op-1", kernel.EffectNone, kernel.BasisOperator)
	v, err := e.starter.View(context.Background(), e.project, "r1", EventPage{})
	if err != nil || v.Status != StatusCompleted || v.Awaiting != nil {
		t.Fatalf("after the override: status %s awaiting %+v (%v)", v.Status, v.Awaiting, err)
	}
	if got := shape(v.Events); got[len(got)-1] != "operation.reconciled op-1" {
		t.Fatalf("the override is not shown on the run: %v", got)
	}
	if got := e.readFile("r1", "effects.txt"); got != "op-1\nop-2\n" {
		t.Fatalf("effects.txt = %q after the override", got)
	}
}

// none re-issues the step once as a new operation; when the re-issue
// fails uncertain too, the run waits again, and a second none ends it
// rather than issuing the step a third time.
func TestAwaitNoneReissuesOnce(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOpts{})
	e.resumer(nil)
	step := cmd(`echo "$RECKON_OPERATION_ID" >> effects.txt; exit 3`)
	step.OnUncertain = OnUncertainAwait
	e.start("r1", Plan{Steps: []Step{step, appendStep("")}})

	e.awaiting("r1", "op-1")
	e.settle("r1", "op-1", kernel.EffectNone, kernel.BasisOperator)
	e.awaiting("r1", "op-1-r1")
	e.settle("r1", "op-1-r1", kernel.EffectNone, kernel.BasisOperator)

	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if err := e.wait(ctx, "r1"); err == nil {
		t.Fatal("run completed")
	}
	evs := e.events("r1")
	wantShape(t, evs, "run.started",
		"tool.started op-1", "tool.failed op-1 command_failed effect=uncertain",
		"run.awaiting op-1", "operation.reconciled op-1", "run.resumed op-1",
		"tool.started op-1-r1", "tool.failed op-1-r1 command_failed effect=uncertain",
		"run.awaiting op-1-r1", "operation.reconciled op-1-r1", "run.resumed op-1-r1",
		"run.failed")
	if d := data(t, evs[6]); d["reissue_of"] != "op-1" {
		t.Fatalf("the re-issue does not name op-1: %v", d)
	}
	if msg := data(t, evs[len(evs)-1])["error"].(string); !strings.Contains(msg, "op-1-r1") || !strings.Contains(msg, "settled none") {
		t.Fatalf("run.failed = %q: want it to name op-1-r1 and its settlement", msg)
	}
	if got := e.readFile("r1", "effects.txt"); got != "op-1\nop-1-r1\n" {
		t.Fatalf("effects.txt = %q: want one execution per operation, no third", got)
	}
}

// A supervisor's inference never resumes a run, nor does its unknown: not
// through the resumer, and not through a signal sent by anyone, since the
// run reads the settlement from the journal. An operator's ruling does.
func TestInferenceNeverResumes(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOpts{fault: fault.Config{AfterEffect: "op-1"}})
	e.resumer(nil)
	e.start("r1", Plan{Steps: []Step{appendStep(OnUncertainAwait), appendStep("")}})
	e.awaiting("r1", "op-1")

	inferred := e.settle("r1", "op-1", kernel.EffectOccurred, kernel.BasisInference)
	err := temporalConn.Client.SignalWorkflow(context.Background(), kernel.WorkflowID(e.project, "r1"), "", SignalSettled,
		Settled{OperationID: "op-1", Reconciliation: inferred.Event.Key()})
	if err != nil {
		t.Fatal(err)
	}
	// Once the run has read the journal on that signal, it still waits.
	e.settlementsRead("r1", 1)
	e.b.WaitDelivered(e.project, "r1")
	if v := e.awaiting("r1", "op-1"); len(v.Events) != 5 {
		t.Fatalf("after an inference the run shows %v", shape(v.Events))
	}

	ruled := e.settle("r1", "op-1", kernel.EffectOccurred, kernel.BasisOperator)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if err := e.wait(ctx, "r1"); err != nil {
		t.Fatalf("run failed: %v", err)
	}
	d := resumedData(t, e.events("r1"), "op-1")
	if *d.Reconciliation != ruled.Event.Key() || d.Basis != kernel.BasisOperator {
		t.Fatalf("run.resumed = %+v: want the operator's ruling %s", d, ruled.Event.Key())
	}
	if got := e.readFile("r1", "effects.txt"); got != "op-1\nop-2\n" {
		t.Fatalf("effects.txt = %q", got)
	}
}

// An operator's unknown ends the wait and fails the run naming the
// operation; so does the await bound when nobody settles it.
func TestAwaitEndsInFailure(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOpts{fault: fault.Config{AfterEffect: "run_command"}, timeouts: Timeouts{Await: 3 * time.Second}})
	e.resumer(nil)
	e.start("unknown", Plan{Steps: []Step{appendStep(OnUncertainAwait), appendStep("")}})
	e.start("bound", Plan{Steps: []Step{appendStep(OnUncertainAwait), appendStep("")}})
	e.awaiting("unknown", "op-1")
	e.settle("unknown", "op-1", kernel.EffectUnknown, kernel.BasisOperator)

	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	for run, want := range map[string][]string{
		"unknown": {"op-1", "settled unknown by operator:ann"},
		"bound":   {"op-1", "RECKON_AWAIT_TIMEOUT", "3s"},
	} {
		if err := e.wait(ctx, run); err == nil {
			t.Fatalf("%s: run completed", run)
		}
		evs := e.events(run)
		last := evs[len(evs)-1]
		msg, _ := data(t, last)["error"].(string)
		for _, w := range want {
			if last.Type != kernel.TypeRunFailed || !strings.Contains(msg, w) {
				t.Fatalf("%s: last event %s %q, want run.failed naming %q", run, last.Type, msg, w)
			}
		}
		if got := e.readFile(run, "effects.txt"); got != "op-1\n" {
			t.Fatalf("%s: effects.txt = %q: the next step must not run", run, got)
		}
	}
	wantShape(t, e.events("bound"), "run.started",
		"tool.started op-1", "tool.failed op-1 injected_fault effect=uncertain", "run.awaiting op-1", "run.failed")
}

// A run canceled while it waits ends as a canceled run does, naming the
// operation it waited for.
func TestCancelWhileAwaiting(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOpts{fault: fault.Config{AfterEffect: "op-1"}})
	e.start("r1", Plan{Steps: []Step{appendStep(OnUncertainAwait), appendStep("")}})
	e.awaiting("r1", "op-1")
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if err := temporalConn.Client.CancelWorkflow(ctx, kernel.WorkflowID(e.project, "r1"), ""); err != nil {
		t.Fatal(err)
	}
	if err := e.wait(ctx, "r1"); err == nil {
		t.Fatal("canceled run completed")
	}
	evs := e.events("r1")
	wantShape(t, evs, "run.started",
		"tool.started op-1", "tool.failed op-1 injected_fault effect=uncertain", "run.awaiting op-1", "run.failed")
	if msg := data(t, evs[4])["error"].(string); !strings.Contains(msg, "canceled") || !strings.Contains(msg, "op-1") {
		t.Fatalf("run.failed = %q", msg)
	}
}

// history is the run's workflow history as it stands.
func (e *env) history(runID string) []*historypb.HistoryEvent {
	e.t.Helper()
	var out []*historypb.HistoryEvent
	it := temporalConn.Client.GetWorkflowHistory(context.Background(), kernel.WorkflowID(e.project, runID), "", false, 0)
	for it.HasNext() {
		he, err := it.Next()
		if err != nil {
			e.t.Fatal(err)
		}
		out = append(out, he)
	}
	return out
}

// signaled waits until the run's history holds a signal.
func (e *env) signaled(runID string) {
	e.t.Helper()
	reckontest.Eventually(e.t, 30*time.Second, "a signal in the run's history", func() bool {
		return slices.ContainsFunc(e.history(runID), func(he *historypb.HistoryEvent) bool {
			return he.GetWorkflowExecutionSignaledEventAttributes() != nil
		})
	})
}

// settlementsRead waits until the run's history shows it has read the
// settlement from the journal n times (ActSettlement's markers).
func (e *env) settlementsRead(runID string, n int) {
	e.t.Helper()
	reckontest.Eventually(e.t, 30*time.Second, "the run reading its settlement", func() bool {
		got := 0
		for _, he := range e.history(runID) {
			if m := he.GetMarkerRecordedEventAttributes(); m != nil && m.GetMarkerName() == "LocalActivity" &&
				strings.Contains(string(m.GetDetails()["data"].GetPayloads()[0].GetData()), ActSettlement) {
				got++
			}
		}
		return got >= n
	})
}

// The resumer asks for one triage per wait while nothing has settled it,
// however often it looks, and none once something has; then it signals.
func TestResumerAsksOneTriagePerWait(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOpts{fault: fault.Config{AfterEffect: "op-1"}})
	var asked []string
	r := &Resumer{Pool: e.pool.Pool, Client: temporalConn.Client, Log: zerolog.Nop(),
		Triage: func(_ context.Context, project, runID string) { asked = append(asked, project+"/"+runID) }}
	r.defaults()
	pass := func() {
		var triages sync.WaitGroup
		if err := r.act(context.Background(), "", "", make(chan struct{}, 1), &triages); err != nil {
			t.Fatal(err)
		}
		triages.Wait()
	}
	e.start("r1", Plan{Steps: []Step{appendStep(OnUncertainAwait), appendStep("")}})
	e.awaiting("r1", "op-1")
	e.b.WaitDelivered(e.project, "r1")
	for range 3 {
		pass()
	}
	if len(asked) != 1 || asked[0] != e.project+"/r1" {
		t.Fatalf("triages asked after three passes: %v, want one of r1", asked)
	}
	e.settle("r1", "op-1", kernel.EffectOccurred, kernel.BasisProbe)
	pass()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if err := e.wait(ctx, "r1"); err != nil {
		t.Fatalf("run failed: %v", err)
	}
	if len(asked) != 1 {
		t.Fatalf("%d triages asked for", len(asked))
	}
}
