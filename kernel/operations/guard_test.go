package operations_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/seed-7bc021c3/reckon/internal/reckontest"
	"github.com/seed-7bc021c3/reckon/kernel"
	"github.com/seed-7bc021c3/reckon/kernel/operations"
)

// refund is tool.started of op calling payments.refund with args.
func refund(r reckontest.Run, op, args string, ts time.Time) kernel.Event {
	return r.Event(op+"/started", kernel.TypeToolStarted, ts, map[string]any{
		"operation_id": op, "tool": "payments.refund", "args": json.RawMessage(args)})
}

func guard(t *testing.T, e *env, p operations.GuardParams) operations.GuardAnswer {
	t.Helper()
	if p.Tool == "" {
		p.Tool = "payments.refund"
	}
	ans, err := e.Ops.Guard(e.Ctx, p)
	if err != nil {
		t.Fatalf("guard %+v: %v", p, err)
	}
	return ans
}

// TestGuard: the retry guard holds a call while an identical one is
// unsettled, whatever the key order and number spelling of its arguments;
// answers done once it is settled occurred (an operator's ruling still in
// the outbox included); proceeds after none, after a normal completion,
// for other arguments, another tool or project, outside the window, and
// past the calls it stopped itself.
func TestGuard(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	r := reckontest.Run{Project: "acme", RunID: "run-1", Source: "agent-x"}
	args := `{"order":"5521","amount_cents":4200}`
	same := json.RawMessage(`{ "amount_cents": 4200.0, "order": "5521" }`)
	p := operations.GuardParams{Project: "acme", RunID: "run-2", Args: same}

	if a := guard(t, e, p); a.Decision != operations.GuardProceed {
		t.Fatalf("empty journal: %+v", a)
	}
	s := refund(r, "op-1", args, ago(time.Hour))
	e.Ingest(s)
	a := guard(t, e, p)
	if a.Decision != operations.GuardHold || a.Operation == nil || a.Operation.OperationID != "op-1" ||
		a.Operation.RunID != "run-1" || a.Operation.State != operations.GuardUnsettled || a.Operation.StartedKey != s.Key() {
		t.Fatalf("in flight: %+v", a)
	}
	e.Ingest(r.Failed("op-1", kernel.EffectUncertain, ago(59*time.Minute)))
	// The guard's own stopped calls, however many, neither hold nor hide.
	for _, op := range []string{"held-1", "held-2"} {
		e.Ingest(refund(r, op, args, ago(30*time.Minute)), r.Blocked(op, ago(30*time.Minute)))
	}
	if a := guard(t, e, p); a.Decision != operations.GuardHold || a.Operation.OperationID != "op-1" {
		t.Fatalf("failed uncertain: %+v", a)
	}
	for name, q := range map[string]operations.GuardParams{
		"other args":    {Project: "acme", Args: json.RawMessage(`{"order":"5522","amount_cents":4200}`)},
		"other tool":    {Project: "acme", Tool: "payments.refund2", Args: same},
		"other project": {Project: "other", Args: same},
		"other run":     {Project: "acme", RunID: "run-2", Scope: operations.GuardScopeRun, Args: same},
	} {
		if a := guard(t, e, q); a.Decision != operations.GuardProceed {
			t.Errorf("%s: %+v", name, a)
		}
	}
	if a := guard(t, e, operations.GuardParams{Project: "acme", RunID: "run-1", Scope: operations.GuardScopeRun, Args: same}); a.Decision != operations.GuardHold {
		t.Errorf("same run, run scope: %+v", a)
	}

	// The ruling is in the outbox, not yet journaled: it counts.
	if _, err := e.Ops.Reconcile(e.Ctx, human("acme", "run-1", kernel.EffectOccurred, "refund R-77 on the dashboard")); err != nil {
		t.Fatal(err)
	}
	a = guard(t, e, p)
	if a.Decision != operations.GuardDone || a.Operation.OperationID != "op-1" || a.Operation.State != operations.GuardOccurred ||
		a.Reconciliation == nil || a.Reconciliation.Actor != "operator:ann" || decodeRec(t, a.Reconciliation).Note != "refund R-77 on the dashboard" {
		t.Fatalf("after occurred: %+v", a)
	}
	e.Drain()
	if a := guard(t, e, p); a.Decision != operations.GuardDone || a.Reconciliation.Type != kernel.TypeOperationReconciled {
		t.Fatalf("after occurred, journaled: %+v", a)
	}

	// none and completed do not stand in the way; unknown holds.
	r2 := reckontest.Run{Project: "acme", RunID: "run-3", Source: "agent-x"}
	other := `{"order":"9"}`
	q := operations.GuardParams{Project: "acme", Args: json.RawMessage(other)}
	e.Ingest(refund(r2, "op-1", other, ago(50*time.Minute)), r2.Failed("op-1", kernel.EffectNone, ago(49*time.Minute)),
		refund(r2, "op-2", other, ago(40*time.Minute)), r2.Completed("op-2", ago(39*time.Minute)))
	if a := guard(t, e, q); a.Decision != operations.GuardProceed {
		t.Fatalf("after none and completed: %+v", a)
	}
	e.Ingest(refund(r2, "op-3", other, ago(30*time.Minute)), r2.Failed("op-3", kernel.EffectUncertain, ago(29*time.Minute)))
	e.Ingest(ruling("acme", "run-3", "op-3", kernel.EffectUnknown, kernel.EventKey{SourceID: "agent-x", EventID: "run-3/op-3/started"}, ago(20*time.Minute)))
	if a := guard(t, e, q); a.Decision != operations.GuardHold || a.Operation.OperationID != "op-3" || a.Operation.State != operations.GuardUnknown {
		t.Fatalf("after unknown: %+v", a)
	}

	// Outside the window, nothing holds.
	// (ingested_at is the database's clock: the window must pass it too.)
	e.Clock.Set(time.Now().Add(169 * time.Hour))
	if a := guard(t, e, p); a.Decision != operations.GuardProceed {
		t.Fatalf("outside the window: %+v", a)
	}
}

// TestGuardValidation: a malformed request is EInvalid naming its field.
func TestGuardValidation(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	for name, p := range map[string]operations.GuardParams{
		"project":    {Tool: "t"},
		"tool":       {Project: "acme"},
		"scope":      {Project: "acme", Tool: "t", Scope: "world"},
		"run_id":     {Project: "acme", Tool: "t", Scope: operations.GuardScopeRun},
		"args":       {Project: "acme", Tool: "t", Args: json.RawMessage(`{"a":1,"a":2}`)},
		"run_id key": {Project: "acme", Tool: "t", RunID: "a\x00b"},
	} {
		if _, err := e.Ops.Guard(e.Ctx, p); kernel.ErrorCode(err) != kernel.EInvalid {
			t.Errorf("%s: %v", name, err)
		}
	}
}

// TestRequestTriage: a triage request reaches a listener of TriageChannel
// as {project, run_id} (what the pipeline's listener reads).
func TestRequestTriage(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	conn, err := pgx.ConnectConfig(e.Ctx, e.Schema.Pool.Config().ConnConfig.Copy())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(e.Ctx)
	if _, err := conn.Exec(e.Ctx, "LISTEN "+operations.TriageChannel); err != nil {
		t.Fatal(err)
	}
	if err := operations.RequestTriage(e.Ctx, e.Schema.Pool, "acme", "gw-1"); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(e.Ctx, 10*time.Second)
	defer cancel()
	n, err := conn.WaitForNotification(ctx)
	var k kernel.RunKey
	if err != nil || json.Unmarshal([]byte(n.Payload), &k) != nil || k != (kernel.RunKey{Project: "acme", RunID: "gw-1"}) {
		t.Fatalf("notification: %+v %v", n, err)
	}
}
