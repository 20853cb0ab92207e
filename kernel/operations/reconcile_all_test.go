package operations_test

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/seed-7bc021c3/reckon/internal/reckontest"
	"github.com/seed-7bc021c3/reckon/kernel"
	"github.com/seed-7bc021c3/reckon/kernel/operations"
)

// TestReconcileAllTx: several operations of one run reconciled in one call
// follow ReconcileTx's rules for each: new ones are written (parented on
// their tool.started), a repeat of the same keyed request writes nothing,
// and one operation that is already settled — here by an operator, whose
// ruling a supervisor never overrides — fails the whole call with
// EConflict naming it, so the caller's transaction writes nothing.
func TestReconcileAllTx(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	b := reckontest.Run{Project: "acme", RunID: "run-1", Source: "agent-x"}
	evs := []kernel.Event{b.RunStarted(ago(2 * time.Hour))}
	started := map[string]kernel.EventKey{}
	for _, op := range []string{"op-1", "op-2", "op-3"} {
		s := b.Started(op, "run_command", ago(time.Hour))
		started[op] = s.Key()
		evs = append(evs, s, b.Failed(op, kernel.EffectUncertain, ago(59*time.Minute)))
	}
	e.Ingest(append(evs, b.RunFailed(ago(58*time.Minute)))...)

	reqs := func(ops ...string) []operations.ReconcileParams {
		var out []operations.ReconcileParams
		for _, op := range ops {
			r := supervisor("acme", "run-1", kernel.EffectNone)
			r.OperationID, r.IdempotencyKey = op, "wall/w1"
			out = append(out, r)
		}
		return out
	}
	call := func(rs []operations.ReconcileParams) ([]operations.Recorded, error) {
		var out []operations.Recorded
		err := pgx.BeginFunc(e.Ctx, e.Schema.Pool, func(tx pgx.Tx) error {
			var err error
			out, err = e.Ops.ReconcileAllTx(e.Ctx, tx, rs)
			return err
		})
		return out, err
	}

	// A null evidence is no evidence, as in ReconcileTx.
	first := reqs("op-1", "op-2")
	first[0].Evidence = json.RawMessage(" null ")
	got, err := call(first)
	if err != nil {
		t.Fatal(err)
	}
	for i, op := range []string{"op-1", "op-2"} {
		if d := decodeRec(t, got[i]); got[i].Repeated || got[i].ParentEventID == nil || *got[i].ParentEventID != started[op] || d.OperationID != op || d.Evidence != nil {
			t.Fatalf("%s: %+v", op, got[i])
		}
	}
	if n := outboxRows(e); n != 2 {
		t.Fatalf("%d reconciliations in the outbox, want 2", n)
	}
	// The same call again, still pending in the outbox: repeats, nothing new.
	again, err := call(reqs("op-1", "op-2"))
	if err != nil {
		t.Fatal(err)
	}
	if !again[0].Repeated || !again[1].Repeated || again[0].Key() != got[0].Key() {
		t.Fatalf("repeat: %+v", again)
	}
	if n := outboxRows(e); n != 2 {
		t.Fatalf("repeat wrote: %d rows", n)
	}

	// An operator rules on op-3; a supervisor call naming op-3 (with a new
	// operation beside it) fails whole.
	ruling := human("acme", "run-1", kernel.EffectOccurred, "checked by hand")
	ruling.OperationID = "op-3"
	if _, err := e.Ops.Reconcile(e.Ctx, ruling); err != nil {
		t.Fatal(err)
	}
	e.Ingest(b.Started("op-4", "run_command", ago(30*time.Minute)), b.Failed("op-4", kernel.EffectUncertain, ago(29*time.Minute)))
	before := outboxRows(e)
	_, err = call(reqs("op-4", "op-3"))
	if kernel.ErrorCode(err) != kernel.EConflict || !strings.Contains(err.Error(), "op-3") {
		t.Fatalf("err %v, want a conflict naming op-3", err)
	}
	if n := outboxRows(e); n != before {
		t.Fatalf("a failed call wrote %d rows", n-before)
	}

	// Bad input: two runs, or one operation twice.
	other := reqs("op-1")
	other[0].RunID = "run-2"
	for name, rs := range map[string][]operations.ReconcileParams{
		"two runs":     append(reqs("op-1"), other...),
		"op-1 twice":   reqs("op-1", "op-1"),
		"invalid item": {{Project: "acme", RunID: "run-1"}},
	} {
		if _, err := call(rs); kernel.ErrorCode(err) != kernel.EInvalid {
			t.Errorf("%s: %v, want invalid", name, err)
		}
	}
}
