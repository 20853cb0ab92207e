package operations_test

import (
	"errors"
	"testing"
	"time"

	"github.com/seed-7bc021c3/reckon/kernel"
	"github.com/seed-7bc021c3/reckon/kernel/operations"
	"github.com/seed-7bc021c3/reckon/kernel/outbox"
)

// TestTriageRun: the triage store's contract, wall by wall. A run's lock
// is one sweep's at a time, and the read taken with it shows the run. A
// wall is written on that read in one round trip; an operator's ruling
// landing meanwhile sends the next wall the checked way, which refuses it
// (EConflict) with nothing written; after a reread, a wall whose verdict
// is already enqueued is ErrWallWritten; the last wall's commit releases
// the run's lock.
func TestTriageRun(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	seedRun(e, "op-1", "op-2", "op-3")
	locks, err := e.Ops.OpenTriageLocks(e.Ctx, 2)
	if err != nil {
		t.Fatal(err)
	}
	defer locks.Close()
	run, locked, err := locks.Lock(e.Ctx, "acme", "run-1")
	if err != nil || !locked {
		t.Fatalf("lock: locked %v (%v)", locked, err)
	}
	defer run.Unlock(e.Ctx)
	if other, locked, err := locks.Lock(e.Ctx, "acme", "run-1"); err != nil || locked || other != nil {
		t.Fatalf("a second Lock of a held run: locked %v (%v), want refused", locked, err)
	}
	// run.started, tool.started and tool.failed of each operation, run.failed.
	if read := run.Read(); len(read.Journaled) != 8 || len(read.Pending) != 0 {
		t.Fatalf("read %d journaled and %d pending events, want 8 and 0", len(read.Journaled), len(read.Pending))
	}

	w, err := run.WriteWall(e.Ctx, triageVerdict(t, "w1", t0, "op-1"), wallReqs("wall/w1", "op-1"), false)
	if err != nil || !w.OnRead || w.Reread || len(w.Reconciled) != 1 || w.Reconciled[0].OperationID() != "op-1" {
		t.Fatalf("first wall: %+v (%v), want written on the read", w, err)
	}

	ruling := human("acme", "run-1", kernel.EffectOccurred, "checked by hand")
	ruling.OperationID = "op-2"
	if _, err := e.Ops.Reconcile(e.Ctx, ruling); err != nil {
		t.Fatal(err)
	}
	w2 := triageVerdict(t, "w2", t0, "op-2", "op-3")
	w, err = run.WriteWall(e.Ctx, w2, wallReqs("wall/w2", "op-2", "op-3"), false)
	if kernel.ErrorCode(err) != kernel.EConflict || w.OnRead || !w.Reread {
		t.Fatalf("wall over a ruling: %+v (%v), want the checked way's EConflict", w, err)
	}
	if _, ok, err := outbox.Stored(e.Ctx, e.Schema.Pool, w2.Key()); err != nil || ok {
		t.Fatalf("the refused wall's verdict was enqueued (%v)", err)
	}

	read, err := run.Reread(e.Ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(read.Pending) != 3 || len(run.Read().Pending) != 3 {
		t.Fatalf("reread %d pending events, want 3 (the first wall's two, the ruling)", len(read.Pending))
	}
	// The first wall again, decided anew (its verdict another payload).
	_, err = run.WriteWall(e.Ctx, triageVerdict(t, "w1", t0.Add(time.Minute), "op-1"), wallReqs("wall/w1", "op-1"), false)
	if !errors.Is(err, operations.ErrWallWritten) {
		t.Fatalf("a wall written before: %v, want ErrWallWritten", err)
	}

	w, err = run.WriteWall(e.Ctx, triageVerdict(t, "w3", t0, "op-3"), wallReqs("wall/w3", "op-3"), true)
	if err != nil || len(w.Reconciled) != 1 {
		t.Fatalf("last wall: %+v (%v)", w, err)
	}
	again, locked, err := locks.Lock(e.Ctx, "acme", "run-1")
	if err != nil || !locked {
		t.Fatalf("after the last wall the run's lock is still held: locked %v (%v)", locked, err)
	}
	again.Unlock(e.Ctx)
	if n := outboxRows(e); n != 3 {
		t.Fatalf("%d reconciliations in the outbox, want 3 (op-1, the ruling, op-3)", n)
	}
}

// triageVerdict is the supervisor.verdict of wall id of run-1 over ops.
func triageVerdict(t testing.TB, id string, ts time.Time, ops ...string) kernel.Event {
	t.Helper()
	v, err := kernel.NewEvent(kernel.SourceKernel, "run-1/verdict/"+id, "acme", "run-1", kernel.TypeSupervisorVerdict,
		kernel.ActorSupervisor, ts, kernel.Verdict{Kind: kernel.VerdictKindReconciliation, Causes: []string{}, Remedies: []string{},
			OperationIDs: ops, Supervisor: "builtin", WallDigest: id})
	if err != nil {
		t.Fatal(err)
	}
	return v
}
