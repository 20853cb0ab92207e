package operations_test

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/seed-7bc021c3/reckon/internal/reckontest"
	"github.com/seed-7bc021c3/reckon/kernel"
	"github.com/seed-7bc021c3/reckon/kernel/journal"
	"github.com/seed-7bc021c3/reckon/kernel/operations"
	"github.com/seed-7bc021c3/reckon/kernel/outbox"
)

// readRunOf reads run-1 of acme as the triage sweep does before it takes
// the operations' locks: its pending events first, then the journal.
func readRunOf(e *env) operations.RunRead {
	e.T.Helper()
	var (
		b    pgx.Batch
		read operations.RunRead
	)
	if err := outbox.QueuePending(&b, outbox.PendingFilter{Project: "acme", RunID: "run-1"}, &read.Pending); err != nil {
		e.T.Fatal(err)
	}
	journal.QueueRunEvents(&b, "acme", "run-1", &read.Journaled)
	if err := e.Schema.Pool.SendBatch(e.Ctx, &b).Close(); err != nil {
		e.T.Fatal(err)
	}
	return read
}

// writeOnRead sends QueueReconcileAll's statements between BEGIN and
// COMMIT in one round trip, as the sweep does, and returns what it
// answered and the error of the round trip (the transaction is rolled
// back when it fails).
func writeOnRead(e *env, read operations.RunRead, reqs []operations.ReconcileParams, also ...kernel.Event) ([]operations.Recorded, error) {
	e.T.Helper()
	conn, err := e.Schema.Pool.Acquire(e.Ctx)
	if err != nil {
		e.T.Fatal(err)
	}
	defer conn.Release()
	b := &pgx.Batch{}
	b.Queue("BEGIN")
	recs, err := e.Ops.QueueReconcileAll(b, read, reqs, also...)
	if err != nil {
		return nil, err
	}
	b.Queue("COMMIT")
	if err := conn.SendBatch(e.Ctx, b).Close(); err != nil {
		if _, rerr := conn.Exec(e.Ctx, "ROLLBACK"); rerr != nil {
			e.T.Fatal(rerr)
		}
		return nil, err
	}
	return recs, nil
}

func wallReqs(key string, ops ...string) []operations.ReconcileParams {
	var out []operations.ReconcileParams
	for _, op := range ops {
		r := supervisor("acme", "run-1", kernel.EffectNone)
		r.OperationID, r.IdempotencyKey = op, key
		out = append(out, r)
	}
	return out
}

// TestQueueReconcileAllWritesWhatReconcileAllTxWrites: on an unchanged
// run, the one-round-trip write answers and enqueues exactly what
// ReconcileAllTx would (the same events, byte for byte), the caller's
// also first.
func TestQueueReconcileAllWritesWhatReconcileAllTxWrites(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	seedRun(e, "op-1", "op-2", "op-3")
	verdict := wallVerdict(t, "op-1", "op-2")
	reqs := wallReqs("wall/w1", "op-1", "op-2")

	// What ReconcileAllTx writes, rolled back.
	var want []operations.Recorded
	tx, err := e.Schema.Pool.Begin(e.Ctx)
	if err != nil {
		t.Fatal(err)
	}
	if want, err = e.Ops.ReconcileAllTx(e.Ctx, tx, reqs, verdict); err != nil {
		t.Fatal(err)
	}
	if err := tx.Rollback(e.Ctx); err != nil {
		t.Fatal(err)
	}

	got, err := writeOnRead(e, readRunOf(e), reqs, verdict)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != len(want) {
		t.Fatalf("%d answers, want %d", len(got), len(want))
	}
	for i := range want {
		g, w := got[i].Event, want[i].Event
		gp, err := g.Prepare()
		if err != nil {
			t.Fatal(err)
		}
		wp, err := w.Prepare()
		if err != nil {
			t.Fatal(err)
		}
		if g.Key() != w.Key() || string(gp.Digest) != string(wp.Digest) || got[i].Repeated {
			t.Fatalf("answer %d: %s %x, want %s %x", i, g.Key(), gp.Digest, w.Key(), wp.Digest)
		}
		if _, ok, err := outbox.Stored(e.Ctx, e.Schema.Pool, g.Key()); err != nil || !ok {
			t.Fatalf("%s not enqueued (%v)", g.Key(), err)
		}
	}
	if _, ok, err := outbox.Stored(e.Ctx, e.Schema.Pool, verdict.Key()); err != nil || !ok {
		t.Fatalf("verdict not enqueued (%v)", err)
	}
	if n := outboxRows(e); n != 2 {
		t.Fatalf("%d reconciliations in the outbox, want 2", n)
	}
}

// TestQueueReconcileAllRefusesAChangedRun: whatever could change the
// answers after the run was read aborts the write with nothing written
// (operations.Stale): an operator's ruling committed meanwhile (pending,
// then delivered), a late event of one of the operations, any new pending
// event of the run, an event of the write already enqueued; a request
// that repeats a reconciliation is refused before anything is queued.
// Events of other operations in the journal, or of other runs, do not
// count.
func TestQueueReconcileAllRefusesAChangedRun(t *testing.T) {
	t.Parallel()
	rule := func(e *env, op string) {
		e.T.Helper()
		r := human("acme", "run-1", kernel.EffectOccurred, "saw it")
		r.OperationID = op
		if _, err := e.Ops.Reconcile(e.Ctx, r); err != nil {
			e.T.Fatal(err)
		}
	}
	b := reckontest.Run{Project: "acme", RunID: "run-1", Source: "agent-x"}
	cases := []struct {
		name   string
		change func(e *env)
		stale  bool
	}{
		{"unchanged", func(e *env) {}, false},
		{"an operator's ruling pending in the outbox", func(e *env) { rule(e, "op-2") }, true},
		{"an operator's ruling delivered to the journal", func(e *env) {
			rule(e, "op-2")
			e.Drain()
		}, true},
		{"a late tool.completed of an operation", func(e *env) {
			e.Ingest(b.Completed("op-1", t0))
		}, true},
		{"a pending event of another operation of the run", func(e *env) { rule(e, "op-3") }, true},
		{"a journaled event of another operation of the run", func(e *env) {
			e.Ingest(b.Completed("op-3", t0))
		}, false},
		{"an event of another run", func(e *env) {
			e.Ingest(reckontest.Run{Project: "acme", RunID: "run-2", Source: "agent-x"}.Started("op-1", "run_command", t0))
		}, false},
		{"the verdict already enqueued", func(e *env) {
			if err := outbox.Enqueue(e.Ctx, e.Schema.Pool, wallVerdict(e.T, "op-1", "op-2")); err != nil {
				e.T.Fatal(err)
			}
		}, true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t, nil)
			seedRun(e, "op-1", "op-2", "op-3")
			read := readRunOf(e)
			c.change(e)
			before := outboxRows(e)
			_, err := writeOnRead(e, read, wallReqs("wall/w1", "op-1", "op-2"), wallVerdict(t, "op-1", "op-2"))
			if c.stale != operations.Stale(err) || (!c.stale && err != nil) {
				t.Fatalf("stale %v, want %v: %v", operations.Stale(err), c.stale, err)
			}
			after := outboxRows(e)
			if c.stale && after != before {
				t.Fatalf("a refused write left %d reconciliations, had %d", after, before)
			}
			if !c.stale && after != before+2 {
				t.Fatalf("%d reconciliations after the write, want %d", after, before+2)
			}
		})
	}

	t.Run("a repeat", func(t *testing.T) {
		t.Parallel()
		e := newEnv(t, nil)
		seedRun(e, "op-1", "op-2")
		if _, err := writeOnRead(e, readRunOf(e), wallReqs("wall/w1", "op-1")); err != nil {
			t.Fatal(err)
		}
		_, err := writeOnRead(e, readRunOf(e), wallReqs("wall/w1", "op-1", "op-2"))
		if !errors.Is(err, operations.ErrRepeat) {
			t.Fatalf("got %v, want ErrRepeat", err)
		}
		if n := outboxRows(e); n != 1 {
			t.Fatalf("%d reconciliations, want 1", n)
		}
	})
}

// seedRun journals run-1 of acme, failed, with ops uncertain.
func seedRun(e *env, ops ...string) {
	e.T.Helper()
	b := reckontest.Run{Project: "acme", RunID: "run-1", Source: "agent-x"}
	evs := []kernel.Event{b.RunStarted(ago(2 * time.Hour))}
	for _, op := range ops {
		evs = append(evs, b.Started(op, "run_command", ago(time.Hour)), b.Failed(op, kernel.EffectUncertain, ago(59*time.Minute)))
	}
	e.Ingest(append(evs, b.RunFailed(ago(58*time.Minute)))...)
}

// wallVerdict is the supervisor.verdict of a wall of run-1 over ops.
func wallVerdict(t testing.TB, ops ...string) kernel.Event {
	t.Helper()
	v, err := kernel.NewEvent(kernel.SourceKernel, "run-1/verdict/w1", "acme", "run-1", kernel.TypeSupervisorVerdict,
		kernel.ActorSupervisor, t0, kernel.Verdict{Kind: kernel.VerdictKindReconciliation, Causes: []string{}, Remedies: []string{},
			OperationIDs: ops, Supervisor: "builtin", WallDigest: "d"})
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// TestQueueReconcileAllAgreesWithReconcileAllTx: over operations in every
// state a wall can meet (uncertain; already reconciled unknown by the
// supervisor, or ruled by an operator, each pending in the outbox or
// delivered; completed late; never started), the one-round-trip write on
// a fresh read does what ReconcileAllTx does under the locks: the same
// events byte for byte where ReconcileAllTx writes; nothing, and a refusal,
// where ReconcileAllTx refuses or answers a repeat.
func TestQueueReconcileAllAgreesWithReconcileAllTx(t *testing.T) {
	t.Parallel()
	const scenarios = 60
	rnd := rand.New(rand.NewPCG(37, 17))
	states := []string{"uncertain", "supervisor unknown", "supervisor unknown, delivered", "operator ruling",
		"operator ruling, delivered", "completed", "not started", "same wall before"}
	type scenario struct {
		state  map[string]string
		walled []string
	}
	var cases []scenario
	for range scenarios {
		sc := scenario{state: map[string]string{}}
		for o := range 1 + rnd.IntN(4) {
			op := fmt.Sprintf("op-%d", o)
			// Mostly uncertain, as in a sweep, so that whole walls write.
			sc.state[op] = states[0]
			if rnd.IntN(3) == 0 {
				sc.state[op] = states[rnd.IntN(len(states))]
			}
			if rnd.IntN(4) > 0 {
				sc.walled = append(sc.walled, op)
			}
		}
		if len(sc.walled) == 0 {
			sc.walled = []string{"op-0"}
		}
		cases = append(cases, sc)
	}
	for i, sc := range cases {
		t.Run(fmt.Sprintf("scenario-%02d", i), func(t *testing.T) {
			t.Parallel()
			e := newEnv(t, nil)
			b := reckontest.Run{Project: "acme", RunID: "run-1", Source: "agent-x"}
			evs := []kernel.Event{b.RunStarted(ago(2 * time.Hour))}
			for op, st := range sc.state {
				if st == "not started" {
					continue
				}
				evs = append(evs, b.Started(op, "run_command", ago(time.Hour)), b.Failed(op, kernel.EffectUncertain, ago(59*time.Minute)))
				if st == "completed" {
					evs = append(evs, b.Completed(op, ago(58*time.Minute)))
				}
			}
			e.Ingest(append(evs, b.RunFailed(ago(57*time.Minute)))...)
			for op, st := range sc.state {
				var r operations.ReconcileParams
				switch st {
				case "supervisor unknown", "supervisor unknown, delivered":
					r = supervisor("acme", "run-1", kernel.EffectUnknown)
					r.IdempotencyKey = "wall/w0"
				case "operator ruling", "operator ruling, delivered":
					r = human("acme", "run-1", kernel.EffectOccurred, "saw it")
				case "same wall before":
					r = supervisor("acme", "run-1", kernel.EffectNone)
					r.IdempotencyKey = "wall/w1"
				default:
					continue
				}
				r.OperationID = op
				if _, err := e.Ops.Reconcile(e.Ctx, r); err != nil {
					t.Fatalf("%s %s: %v", op, st, err)
				}
				if strings.HasSuffix(st, "delivered") {
					e.Drain()
				}
			}
			reqs := wallReqs("wall/w1", sc.walled...)
			verdict := wallVerdict(t, sc.walled...)

			tx := e.Schema.Tx(t)
			want, wantErr := e.Ops.ReconcileAllTx(e.Ctx, tx, reqs, verdict)
			if err := tx.Rollback(e.Ctx); err != nil {
				t.Fatal(err)
			}
			repeat := false
			for _, r := range want {
				repeat = repeat || r.Repeated
			}
			before := outboxRows(e)
			got, err := writeOnRead(e, readRunOf(e), reqs, verdict)
			switch {
			case wantErr != nil || repeat:
				if err == nil {
					t.Fatalf("%v: ReconcileAllTx: %v (repeat %v); the one-round-trip write wrote", sc.state, wantErr, repeat)
				}
				if n := outboxRows(e); n != before {
					t.Fatalf("%v: a refused write left %d reconciliations, had %d", sc.state, n, before)
				}
			case err != nil:
				t.Fatalf("%v: ReconcileAllTx writes, the one-round-trip write refused: %v", sc.state, err)
			default:
				if len(got) != len(want) {
					t.Fatalf("%v: %d answers, want %d", sc.state, len(got), len(want))
				}
				for k := range want {
					gp, gerr := got[k].Prepare()
					wp, werr := want[k].Prepare()
					if gerr != nil || werr != nil {
						t.Fatalf("%v: answer %d does not prepare: %v, %v", sc.state, k, gerr, werr)
					}
					if got[k].Key() != want[k].Key() || string(gp.Digest) != string(wp.Digest) {
						t.Fatalf("%v: answer %d: %s, want %s", sc.state, k, got[k].Key(), want[k].Key())
					}
				}
			}
		})
	}
}
