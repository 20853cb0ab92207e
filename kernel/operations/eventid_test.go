package operations_test

import (
	"testing"
	"time"

	"github.com/seed-7bc021c3/reckon/internal/reckontest"
	"github.com/seed-7bc021c3/reckon/kernel"
	"github.com/seed-7bc021c3/reckon/kernel/operations"
)

// TestReconcileEventIDsOfSlashedIdsDoNotCollide: agents' run and
// operation ids may contain "/", so run "a" operation "b/op-1" and run
// "a/b" operation "op-1" are two operations (of two agents' runs). The
// same ruling on each — same operator, effect and note, or the same
// Idempotency-Key — must record two reconciliations under two keys. Were
// the event id <run>/<operation>/reconciled/<digest of the body>, both
// would share one (source, event_id): the second is a conflict with the
// first, refused (409) while the first is in the outbox, or parked by the
// publisher as a journal conflict once the outbox has let go of it — the
// operation never settled though its ruling was accepted.
func TestReconcileEventIDsOfSlashedIdsDoNotCollide(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	x := reckontest.Run{Project: "acme", RunID: "a", Source: "agent-x"}
	y := reckontest.Run{Project: "acme", RunID: "a/b", Source: "agent-y"}
	e.Ingest(x.RunStarted(ago(2*time.Hour)), x.Started("b/op-1", "run_command", ago(time.Hour)),
		x.Failed("b/op-1", kernel.EffectUncertain, ago(59*time.Minute)), x.RunFailed(ago(58*time.Minute)))
	e.Ingest(y.RunStarted(ago(2*time.Hour)), y.Started("op-1", "run_command", ago(time.Hour)),
		y.Failed("op-1", kernel.EffectUncertain, ago(59*time.Minute)), y.RunFailed(ago(58*time.Minute)))

	for _, key := range []string{"", "ticket-42"} {
		var ids []kernel.EventKey
		for _, target := range []struct{ run, op string }{{"a", "b/op-1"}, {"a/b", "op-1"}} {
			p := operations.ReconcileParams{Project: "acme", RunID: target.run, OperationID: target.op,
				Effect: kernel.EffectUnknown, Note: "checked " + key, Basis: kernel.BasisOperator, Actor: "operator:ann",
				IdempotencyKey: key}
			rec, err := e.Ops.Reconcile(e.Ctx, p)
			if err != nil {
				t.Fatalf("key %q: reconcile %s/%s: %v", key, target.run, target.op, err)
			}
			if rec.Repeated {
				t.Fatalf("key %q: reconcile %s/%s answered as a repeat of %s", key, target.run, target.op, rec.Key())
			}
			ids = append(ids, rec.Key())
		}
		if ids[0] == ids[1] {
			t.Fatalf("key %q: two operations' reconciliations share the key %s", key, ids[0])
		}
	}
	e.Drain()
	for _, target := range []struct{ run, op string }{{"a", "b/op-1"}, {"a/b", "op-1"}} {
		evs, err := e.Ops.History(e.Ctx, "acme", target.run, target.op)
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for _, ev := range evs {
			if ev.Type == kernel.TypeOperationReconciled {
				n++
			}
		}
		if n != 2 {
			t.Errorf("%s/%s: %d reconciliations journaled, want 2", target.run, target.op, n)
		}
	}
}
