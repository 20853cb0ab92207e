package operations_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/seed-7bc021c3/reckon/internal/reckontest"
	"github.com/seed-7bc021c3/reckon/kernel"
	"github.com/seed-7bc021c3/reckon/kernel/operations"
)

// uncertainOp journals a run whose op-1 failed uncertain and returns the
// tool.started key.
func uncertainOp(e *env, project, run, source string) kernel.EventKey {
	b := reckontest.Run{Project: project, RunID: run, Source: source}
	s := b.Started("op-1", "run_command", ago(time.Hour))
	e.Ingest(b.RunStarted(ago(2*time.Hour)), s, b.Failed("op-1", kernel.EffectUncertain, ago(59*time.Minute)), b.RunFailed(ago(58*time.Minute)))
	return s.Key()
}

func human(project, run, effect, note string) operations.ReconcileParams {
	return operations.ReconcileParams{Project: project, RunID: run, OperationID: "op-1", Effect: effect, Note: note,
		Basis: kernel.BasisOperator, Actor: "operator:ann"}
}

func supervisor(project, run, effect string) operations.ReconcileParams {
	return operations.ReconcileParams{Project: project, RunID: run, OperationID: "op-1", Effect: effect, Note: "inferred from the wall",
		Basis: kernel.BasisInference, Actor: kernel.ActorSupervisor}
}

func decodeRec(t *testing.T, ev interface{ DecodeData(any) error }) kernel.Reconciliation {
	t.Helper()
	var d kernel.Reconciliation
	if err := ev.DecodeData(&d); err != nil {
		t.Fatal(err)
	}
	return d
}

func outboxRows(e *env) int {
	e.T.Helper()
	var n int
	if err := e.Schema.Pool.QueryRow(e.Ctx, `SELECT count(*) FROM kernel_event_outbox WHERE event->>'type' = 'operation.reconciled'`).Scan(&n); err != nil {
		e.T.Fatal(err)
	}
	return n
}

func TestReconcileValidation(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	uncertainOp(e, "acme", "run-1", "agent-x")
	ok := human("acme", "run-1", kernel.EffectOccurred, "file is there")
	cases := []struct {
		name string
		mod  func(r *operations.ReconcileParams)
		code string
	}{
		{"effect uncertain is not a verdict", func(r *operations.ReconcileParams) { r.Effect = "uncertain" }, kernel.EInvalid},
		{"effect outside vocabulary", func(r *operations.ReconcileParams) { r.Effect = "maybe" }, kernel.EInvalid},
		{"note over 2000 bytes", func(r *operations.ReconcileParams) { r.Note = strings.Repeat("x", 2001) }, kernel.EInvalid},
		{"note missing", func(r *operations.ReconcileParams) { r.Note = "  " }, kernel.EInvalid},
		{"project missing", func(r *operations.ReconcileParams) { r.Project = "" }, kernel.EInvalid},
		{"run_id missing", func(r *operations.ReconcileParams) { r.RunID = "" }, kernel.EInvalid},
		{"operation_id missing", func(r *operations.ReconcileParams) { r.OperationID = "" }, kernel.EInvalid},
		{"effect missing", func(r *operations.ReconcileParams) { r.Effect = "" }, kernel.EInvalid},
		{"evidence not JSON", func(r *operations.ReconcileParams) { r.Evidence = json.RawMessage(`{nope`) }, kernel.EInvalid},
		{"actor missing", func(r *operations.ReconcileParams) { r.Actor = "" }, kernel.EInvalid},
		{"human with inference basis", func(r *operations.ReconcileParams) { r.Basis = kernel.BasisInference }, kernel.EInvalid},
		{"supervisor with operator basis", func(r *operations.ReconcileParams) { r.Actor = kernel.ActorSupervisor }, kernel.EInvalid},
		{"unknown operation", func(r *operations.ReconcileParams) { r.OperationID = "op-9" }, kernel.ENotFound},
		{"unknown run", func(r *operations.ReconcileParams) { r.RunID = "run-9" }, kernel.ENotFound},
		{"other project", func(r *operations.ReconcileParams) { r.Project = "other" }, kernel.ENotFound},
		{"note of exactly 2000 bytes", func(r *operations.ReconcileParams) { r.Note = strings.Repeat("x", 2000) }, ""},
	}
	for _, c := range cases {
		req := ok
		c.mod(&req)
		_, err := e.Ops.Reconcile(e.Ctx, req)
		if kernel.ErrorCode(err) != c.code {
			t.Errorf("%s: %v (code %q), want %q", c.name, err, kernel.ErrorCode(err), c.code)
		}
	}
	if n := outboxRows(e); n != 1 {
		t.Fatalf("%d reconciliations written, want only the valid one", n)
	}
}

func TestReconcileWritesThroughOutbox(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	started := uncertainOp(e, "acme", "run-1", "agent-x")
	if items, _ := e.List("acme"); items["run-1/op-1"].State != operations.StateFailedUncertain {
		t.Fatalf("before: %v", items)
	}
	req := human("acme", "run-1", kernel.EffectOccurred, "drill-proof.txt is in the workspace")
	req.Evidence = json.RawMessage(`{"workspace_file": "/ws/acme/run-1/drill-proof.txt"}`)
	ev, err := e.Ops.Reconcile(e.Ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	d := decodeRec(t, ev)
	if ev.SourceID != kernel.SourceKernel || ev.Type != kernel.TypeOperationReconciled || ev.Actor != "operator:ann" ||
		ev.ParentEventID == nil || *ev.ParentEventID != started || d.Basis != kernel.BasisOperator ||
		d.Effect != kernel.EffectOccurred || d.Supersedes != nil || d.OperationID != "op-1" || !ev.TS.Equal(t0) {
		t.Fatalf("event %+v data %+v", ev, d)
	}
	// Not yet published: the journal has not seen it, the listing still
	// shows the operation (it clears when the event lands).
	if items, _ := e.List("acme"); len(items) != 1 {
		t.Fatalf("listing before publication: %v", items)
	}
	e.Drain()
	if items, _ := e.List("acme"); len(items) != 0 {
		t.Fatalf("listing after reconcile: %v", items)
	}
	stored, err := e.Journal.Event(e.Ctx, ev.Key())
	if err != nil {
		t.Fatal(err)
	}
	if stored.Actor != "operator:ann" {
		t.Fatalf("stored %+v", stored)
	}
}

func TestReconcileIdempotent(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	uncertainOp(e, "acme", "run-1", "agent-x")

	// Same Idempotency-Key: same event, even after publication and with the
	// clock moved on.
	keyed := human("acme", "run-1", kernel.EffectOccurred, "seen it")
	keyed.IdempotencyKey = "k-123"
	first, err := e.Ops.Reconcile(e.Ctx, keyed)
	if err != nil {
		t.Fatal(err)
	}
	e.Clock.Set(t0.Add(time.Minute))
	again, err := e.Ops.Reconcile(e.Ctx, keyed)
	if err != nil || again.Key() != first.Key() || !again.TS.Equal(first.TS) {
		t.Fatalf("repeat while pending: %v %+v", err, again)
	}
	e.Drain()
	again, err = e.Ops.Reconcile(e.Ctx, keyed)
	if err != nil || again.Key() != first.Key() || !again.TS.Equal(first.TS) {
		t.Fatalf("repeat after publication: %v %+v", err, again)
	}
	// The same key for a different verdict is a conflict, not a silent no-op.
	changed := keyed
	changed.Effect = kernel.EffectNone
	if _, err := e.Ops.Reconcile(e.Ctx, changed); kernel.ErrorCode(err) != kernel.EConflict {
		t.Fatalf("key reuse with another body: %v", err)
	}
	if n := outboxRows(e); n != 1 {
		t.Fatalf("%d rows after keyed repeats", n)
	}

	// Same body without a key, within the window: same event.
	uncertainOp(e, "acme", "run-2", "agent-x")
	body := human("acme", "run-2", kernel.EffectNone, "never ran")
	a, err := e.Ops.Reconcile(e.Ctx, body)
	if err != nil {
		t.Fatal(err)
	}
	e.Clock.Set(t0.Add(2 * time.Hour))
	b, err := e.Ops.Reconcile(e.Ctx, body)
	if err != nil || b.Key() != a.Key() {
		t.Fatalf("body repeat: %v %v vs %v", err, b.Key(), a.Key())
	}
	// A different verdict, then the first body again: a new event that
	// supersedes the second (a repeat only counts against the latest).
	other := body
	other.Effect, other.Note = kernel.EffectOccurred, "found the file after all"
	c, err := e.Ops.Reconcile(e.Ctx, other)
	if err != nil {
		t.Fatal(err)
	}
	d, err := e.Ops.Reconcile(e.Ctx, body)
	if err != nil {
		t.Fatal(err)
	}
	if d.Key() == a.Key() || decodeRec(t, d).Supersedes == nil || *decodeRec(t, d).Supersedes != c.Key() {
		t.Fatalf("A,B,A: %v supersedes %v", d.Key(), decodeRec(t, d).Supersedes)
	}
	// Beyond the window the same body is a new verdict.
	e.Clock.Set(t0.Add(2*time.Hour + 169*time.Hour))
	f, err := e.Ops.Reconcile(e.Ctx, body)
	if err != nil || f.Key() == d.Key() {
		t.Fatalf("repeat beyond the window: %v %v", err, f.Key())
	}
	if n := outboxRows(e); n != 5 {
		t.Fatalf("%d rows, want 5", n)
	}
	e.Drain()
}

func TestOverrideAndSupervisorProtection(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)

	// Supervisor first (published), then a human: an override.
	uncertainOp(e, "acme", "run-1", "agent-x")
	sv, err := e.Ops.Reconcile(e.Ctx, supervisor("acme", "run-1", kernel.EffectNone))
	if err != nil {
		t.Fatal(err)
	}
	e.Drain()
	h, err := e.Ops.Reconcile(e.Ctx, human("acme", "run-1", kernel.EffectOccurred, "the issue exists"))
	if err != nil {
		t.Fatal(err)
	}
	if s := decodeRec(t, h).Supersedes; s == nil || *s != sv.Key() {
		t.Fatalf("override supersedes %v, want %v", s, sv.Key())
	}
	e.Drain()
	// A later supervisor pass never overrides the human.
	if _, err := e.Ops.Reconcile(e.Ctx, supervisor("acme", "run-1", kernel.EffectUnknown)); kernel.ErrorCode(err) != kernel.EConflict {
		t.Fatalf("supervisor over human: %v", err)
	}

	// A human may correct a human: recorded, superseding the first.
	h2, err := e.Ops.Reconcile(e.Ctx, human("acme", "run-1", kernel.EffectUnknown, "not sure after all"))
	if err != nil || decodeRec(t, h2).Supersedes == nil || *decodeRec(t, h2).Supersedes != h.Key() {
		t.Fatalf("human over human: %v %+v", err, h2)
	}

	// A supervisor verdict built from a stale listing is refused: over its
	// own earlier verdict, and over a late terminal event.
	uncertainOp(e, "acme", "run-6", "agent-x")
	if _, err := e.Ops.Reconcile(e.Ctx, supervisor("acme", "run-6", kernel.EffectNone)); err != nil {
		t.Fatal(err)
	}
	second := supervisor("acme", "run-6", kernel.EffectOccurred)
	if _, err := e.Ops.Reconcile(e.Ctx, second); kernel.ErrorCode(err) != kernel.EConflict {
		t.Fatalf("supervisor over supervisor: %v", err)
	}
	late := reckontest.Run{Project: "acme", RunID: "run-7", Source: "agent-x"}
	e.Ingest(late.Started("op-1", "run_command", ago(time.Hour)), late.Completed("op-1", ago(time.Minute)))
	if _, err := e.Ops.Reconcile(e.Ctx, supervisor("acme", "run-7", kernel.EffectNone)); kernel.ErrorCode(err) != kernel.EConflict {
		t.Fatalf("supervisor over a completed operation: %v", err)
	}

	// The human verdict still pending in the outbox protects too.
	uncertainOp(e, "acme", "run-2", "agent-x")
	if _, err := e.Ops.Reconcile(e.Ctx, human("acme", "run-2", kernel.EffectOccurred, "checked")); err != nil {
		t.Fatal(err)
	}
	if _, err := e.Ops.Reconcile(e.Ctx, supervisor("acme", "run-2", kernel.EffectNone)); kernel.ErrorCode(err) != kernel.EConflict {
		t.Fatalf("supervisor over pending human: %v", err)
	}
	// And a pending supervisor verdict is superseded by a human.
	uncertainOp(e, "acme", "run-3", "agent-x")
	sv3, err := e.Ops.Reconcile(e.Ctx, supervisor("acme", "run-3", kernel.EffectNone))
	if err != nil {
		t.Fatal(err)
	}
	h3, err := e.Ops.Reconcile(e.Ctx, human("acme", "run-3", kernel.EffectOccurred, "checked"))
	if err != nil || decodeRec(t, h3).Supersedes == nil || *decodeRec(t, h3).Supersedes != sv3.Key() {
		t.Fatalf("human over pending supervisor: %v %+v", err, h3)
	}

	// A tool.started still pending in the outbox is found (no 404).
	b := reckontest.Run{Project: "acme", RunID: "run-4", Source: kernel.SourceKernel}
	tx, err := e.Schema.Pool.Begin(e.Ctx)
	if err != nil {
		t.Fatal(err)
	}
	pending := b.Started("op-1", "run_command", ago(time.Minute))
	if _, err := tx.Exec(e.Ctx, `INSERT INTO kernel_event_outbox (source_id, event_id, event, payload_digest) VALUES ($1, $2, $3, '\x00')`,
		pending.SourceID, pending.EventID, mustJSON(pending)); err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(e.Ctx); err != nil {
		t.Fatal(err)
	}
	ev, err := e.Ops.Reconcile(e.Ctx, human("acme", "run-4", kernel.EffectNone, "never started"))
	if err != nil || *ev.ParentEventID != pending.Key() {
		t.Fatalf("reconcile of a pending tool.started: %v %+v", err, ev)
	}

	// ReconcileTx joins the caller's transaction: rolled back, nothing is
	// written.
	uncertainOp(e, "acme", "run-5", "agent-x")
	before := outboxRows(e)
	tx, err = e.Schema.Pool.Begin(e.Ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.Ops.ReconcileTx(e.Ctx, tx, supervisor("acme", "run-5", kernel.EffectNone)); err != nil {
		t.Fatal(err)
	}
	_ = tx.Rollback(e.Ctx)
	if outboxRows(e) != before {
		t.Fatal("rolled-back ReconcileTx left a row")
	}
}

func mustJSON(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return b
}

// TestConcurrentHumanAndSupervisor races a human and a supervisor verdict
// on the same operation many times: whatever the interleaving, a supervisor
// verdict never lands after a human one.
func TestConcurrentHumanAndSupervisor(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	for i := 0; i < 10; i++ {
		run := "race-" + string(rune('a'+i))
		uncertainOp(e, "acme", run, "agent-x")
		var wg sync.WaitGroup
		var hErr, sErr error
		wg.Add(2)
		go func() {
			defer wg.Done()
			_, hErr = e.Ops.Reconcile(e.Ctx, human("acme", run, kernel.EffectOccurred, "checked"))
		}()
		go func() { defer wg.Done(); _, sErr = e.Ops.Reconcile(e.Ctx, supervisor("acme", run, kernel.EffectNone)) }()
		wg.Wait()
		if hErr != nil {
			t.Fatalf("human verdict failed: %v", hErr)
		}
		evs, err := e.Ops.History(e.Ctx, "acme", run, "op-1")
		if err != nil {
			t.Fatal(err)
		}
		var actors []string
		for _, ev := range evs {
			if ev.Type == kernel.TypeOperationReconciled {
				actors = append(actors, ev.Actor)
			}
		}
		switch {
		case sErr != nil && kernel.ErrorCode(sErr) == kernel.EConflict && len(actors) == 1 && actors[0] == "operator:ann":
		case sErr == nil && len(actors) == 2 && actors[0] == kernel.ActorSupervisor && actors[1] == "operator:ann":
		default:
			t.Fatalf("run %s: supervisor err %v, reconciliations by %v", run, sErr, actors)
		}
	}
}

func TestHistoryChain(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	started := uncertainOp(e, "acme", "run-1", "agent-x")
	e.Clock.Set(t0.Add(time.Minute))
	sv, err := e.Ops.Reconcile(e.Ctx, supervisor("acme", "run-1", kernel.EffectNone))
	if err != nil {
		t.Fatal(err)
	}
	verdict, _ := kernel.NewEvent(kernel.SourceKernel, "run-1/verdict/1", "acme", "run-1", kernel.TypeSupervisorVerdict, kernel.ActorSupervisor,
		t0.Add(time.Minute), kernel.Verdict{Kind: kernel.VerdictKindReconciliation, OperationIDs: []string{"op-1"}, Supervisor: "builtin",
			Causes: []string{}, Remedies: []string{}})
	e.Ingest(verdict)
	e.Drain()
	e.Clock.Set(t0.Add(2 * time.Minute))
	h, err := e.Ops.Reconcile(e.Ctx, human("acme", "run-1", kernel.EffectOccurred, "the file is there"))
	if err != nil {
		t.Fatal(err)
	}
	// h is still pending in the outbox: history shows it already.
	evs, err := e.Ops.History(e.Ctx, "acme", "run-1", "op-1")
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, ev := range evs {
		got = append(got, ev.Type+"@"+ev.Actor)
	}
	want := []string{"tool.started@agent", "tool.failed@agent", "operation.reconciled@supervisor", "supervisor.verdict@supervisor", "operation.reconciled@operator:ann"}
	if strings.Join(got, " ") != strings.Join(want, " ") {
		t.Fatalf("history %v\nwant %v", got, want)
	}
	if evs[0].Key() != started || evs[2].Key() != sv.Key() || evs[4].Key() != h.Key() {
		t.Fatal("history keys")
	}
	if d := decodeRec(t, evs[4]); d.Basis != kernel.BasisOperator || *d.Supersedes != sv.Key() {
		t.Fatalf("override in history: %+v", d)
	}
	e.Drain()
	evs2, err := e.Ops.History(e.Ctx, "acme", "run-1", "op-1")
	if err != nil || len(evs2) != len(evs) {
		t.Fatalf("history after publication: %d events, %v", len(evs2), err)
	}
	if _, err := e.Ops.History(e.Ctx, "acme", "run-1", "op-9"); kernel.ErrorCode(err) != kernel.ENotFound {
		t.Fatalf("history of unknown op: %v", err)
	}
}

// t0 is "now" in most tests (the bundle clock's start); events are placed
// relative to it.
var t0 = reckontest.T0

// env is one test's bundle: schema, journal, publisher, the operations
// service on the bundle's clock.
type env = reckontest.Bundle

func newEnv(t *testing.T, live operations.Liveness) *env {
	t.Helper()
	return reckontest.Setup(t, reckontest.Config{Operations: operations.Config{
		Window: 168 * time.Hour, StaleAfter: 10 * time.Minute, Liveness: live,
	}})
}

// ruling is an operator's ruling under the kernel's source, as the
// reconcile path writes it (used to build journals by hand).
func ruling(project, run, op, effect string, parent kernel.EventKey, ts time.Time) kernel.Event {
	return reckontest.Run{Project: project, RunID: run, Source: kernel.SourceKernel}.Ruling(op, effect, parent, ts)
}

// fakeLiveness answers from a map; runs in errs fail.
type fakeLiveness struct {
	mu      sync.Mutex
	running map[string]bool
	errs    map[string]bool
	failAll bool
	calls   int
	asked   map[string]int
}

func (f *fakeLiveness) Running(_ context.Context, project, runID string) (bool, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls++
	if f.asked == nil {
		f.asked = map[string]int{}
	}
	f.asked[runID]++
	if f.failAll || f.errs[runID] {
		return false, fmt.Errorf("temporal unavailable")
	}
	return f.running[runID], nil
}

func intp(n int) *int { return &n }

// TestRulingNeverPrecedesWhatItSupersedes: the API process's clock behind
// the sweep's (two machines, or a clock stepped back) must not record an
// operator's ruling with a ts before the supervisor's reconciliation it
// supersedes. Event time orders an operation's reconciliations for the
// queue, the verdicts' resolutions and the next reconcile's "latest", so
// such a ruling left the operation in the operator's queue as undecided.
func TestRulingNeverPrecedesWhatItSupersedes(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	uncertainOp(e, "acme", "run-1", "agent-x")
	e.Clock.Set(t0.Add(time.Minute))
	sv, err := e.Ops.Reconcile(e.Ctx, supervisor("acme", "run-1", kernel.EffectUnknown))
	if err != nil {
		t.Fatal(err)
	}
	e.Drain()
	if q, err := e.Ops.Attention(e.Ctx, operations.AttentionParams{Project: "acme"}); err != nil || len(q.Operations) != 1 {
		t.Fatalf("queue before the ruling: %+v %v", q, err)
	}
	e.Clock.Set(t0) // the operator's process is a minute behind
	h, err := e.Ops.Reconcile(e.Ctx, human("acme", "run-1", kernel.EffectOccurred, "the file is there"))
	if err != nil {
		t.Fatal(err)
	}
	if !h.TS.After(sv.TS) {
		t.Errorf("ruling at %v does not follow the reconciliation it supersedes (%v)", h.TS, sv.TS)
	}
	e.Drain()
	if q, err := e.Ops.Attention(e.Ctx, operations.AttentionParams{Project: "acme"}); err != nil || len(q.Operations) != 0 {
		t.Fatalf("queue after the operator's ruling: %+v %v", q, err)
	}
	last, err := e.Ops.LastReconciliations(e.Ctx, "acme", []operations.OperationRef{{RunID: "run-1", OperationID: "op-1"}})
	if err != nil || last[operations.OperationRef{RunID: "run-1", OperationID: "op-1"}].Key != h.Key() {
		t.Fatalf("newest reconciliation %+v %v, want the ruling %v", last, err, h.Key())
	}
	// A correction made at the same skewed clock supersedes the ruling,
	// not the supervisor's reconciliation.
	h2, err := e.Ops.Reconcile(e.Ctx, human("acme", "run-1", kernel.EffectNone, "wrong workspace, it never ran"))
	if err != nil {
		t.Fatal(err)
	}
	if s := decodeRec(t, h2).Supersedes; s == nil || *s != h.Key() || !h2.TS.After(h.TS) {
		t.Fatalf("correction at %v supersedes %v, want %v after %v", h2.TS, s, h.Key(), h.TS)
	}
}
