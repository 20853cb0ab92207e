package operations_test

import (
	"testing"
	"time"

	"github.com/seed-7bc021c3/reckon/kernel"
	"github.com/seed-7bc021c3/reckon/kernel/operations"
)

// writeWall journals a wall of run-1 through the reconcile rules, as the
// sweep's checked path does: its verdict (asking for attention or not)
// and one supervisor reconciliation per operation with its effect.
func writeWall(e *env, id string, attention bool, effects map[string]string) {
	e.T.Helper()
	var ops []string
	var reqs []operations.ReconcileParams
	for op, effect := range effects {
		r := supervisor("acme", "run-1", effect)
		r.OperationID, r.IdempotencyKey = op, "wall/"+id
		// The key of the wall's verdict, as the sweep's evidence names it.
		r.Evidence = []byte(`{"verdict":{"source_id":"kernel","event_id":"run-1/verdict/` + id + `"}}`)
		reqs, ops = append(reqs, r), append(ops, op)
	}
	v, err := kernel.NewEvent(kernel.SourceKernel, "run-1/verdict/"+id, "acme", "run-1", kernel.TypeSupervisorVerdict,
		kernel.ActorSupervisor, ago(30*time.Minute), kernel.Verdict{Kind: kernel.VerdictKindReconciliation, NeedsAttention: attention,
			Causes: []string{}, Remedies: []string{}, OperationIDs: ops, Supervisor: "builtin", WallDigest: id})
	if err != nil {
		e.T.Fatal(err)
	}
	tx, err := e.Schema.Pool.Begin(e.Ctx)
	if err != nil {
		e.T.Fatal(err)
	}
	defer func() { _ = tx.Rollback(e.Ctx) }()
	if _, err := e.Ops.ReconcileAllTx(e.Ctx, tx, reqs, v); err != nil {
		e.T.Fatal(err)
	}
	if err := tx.Commit(e.Ctx); err != nil {
		e.T.Fatal(err)
	}
}

// journalRaw writes one event straight into the journal's table, as a
// journal that knows its type would: run.awaiting and run.resumed carry
// their operation in the operation_id column.
func journalRaw(e *env, source, project, run, typ, op string, ts time.Time) {
	e.T.Helper()
	actor := kernel.ActorAgent
	if source == kernel.SourceKernel {
		actor = kernel.ActorKernel
	}
	var opID *string
	if op != "" {
		opID = &op
	}
	if _, err := e.Schema.Pool.Exec(e.Ctx, `
INSERT INTO journal_events (source_id, event_id, project, run_id, type, ts, actor, data, payload_digest, operation_id)
VALUES ($1, $3 || '/' || $4 || '/' || $5, $2, $3, $4, $6, $7, jsonb_build_object('operation_id', $5::text), '\x00', $8)`,
		source, project, run, typ, op, ts, actor, opID); err != nil {
		e.T.Fatal(err)
	}
}

// attentionPaged is the operator's queue of project read page by page:
// its size and oldest decision.
func attentionPaged(e *env, project string) (int, time.Time) {
	e.T.Helper()
	n, oldest, cursor := 0, time.Time{}, ""
	for {
		page, err := e.Ops.Attention(e.Ctx, operations.AttentionParams{Project: project, Cursor: cursor, Limit: 1})
		if err != nil {
			e.T.Fatal(err)
		}
		for _, it := range page.Operations {
			if n == 0 || it.DecidedAt.Before(oldest) {
				oldest = it.DecidedAt
			}
			n++
		}
		if cursor = page.NextCursor; cursor == "" {
			return n, oldest
		}
	}
}

func backlogOf(e *env) map[string]operations.ProjectBacklog {
	e.T.Helper()
	bs, err := e.Ops.Backlog(e.Ctx)
	if err != nil {
		e.T.Fatal(err)
	}
	out := map[string]operations.ProjectBacklog{}
	for _, b := range bs {
		out[b.Project] = b
	}
	return out
}

// TestBacklogCountsWhatWaitsForPeople: the backlog's attention is the
// operator's queue, operation for operation (an unknown, a settled
// operation whose verdict asked for a person; not a plain settlement; not
// once an operator's ruling is on its way), and its awaiting runs are the
// kernel runs whose last wait has neither resumed nor ended, read from
// journal facts only.
func TestBacklogCountsWhatWaitsForPeople(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	seedRun(e, "op-1", "op-2", "op-3")
	writeWall(e, "w1", false, map[string]string{"op-1": kernel.EffectUnknown, "op-2": kernel.EffectNone})
	writeWall(e, "w2", true, map[string]string{"op-3": kernel.EffectOccurred})
	e.Drain()

	check := func(what string, want int) {
		t.Helper()
		n, oldest := attentionPaged(e, "acme")
		b := backlogOf(e)["acme"]
		if n != want || b.Attention != want || !b.OldestAttention.Equal(oldest) {
			t.Fatalf("%s: backlog %d since %s, queue %d since %s; want %d", what, b.Attention, b.OldestAttention, n, oldest, want)
		}
	}
	check("two walls", 2)
	if _, err := e.Ops.Reconcile(e.Ctx, human("acme", "run-1", kernel.EffectNone, "checked by hand")); err != nil {
		t.Fatal(err)
	}
	check("a ruling on its way", 1)
	e.Drain()
	check("a ruling journaled", 1)

	now := e.Clock.Now()
	journalRaw(e, kernel.SourceKernel, "acme", "run-2", "run.awaiting", "op-1", now.Add(-2*time.Hour))
	journalRaw(e, kernel.SourceKernel, "acme", "run-2", "run.resumed", "op-1", now.Add(-time.Hour))
	journalRaw(e, kernel.SourceKernel, "acme", "run-2", "run.awaiting", "op-1-r1", now.Add(-time.Minute)) // waits again
	journalRaw(e, kernel.SourceKernel, "acme", "run-3", "run.awaiting", "op-1", now.Add(-time.Hour))
	journalRaw(e, kernel.SourceKernel, "acme", "run-3", "run.resumed", "op-1", now.Add(-time.Minute)) // resumed
	journalRaw(e, kernel.SourceKernel, "acme", "run-4", "run.awaiting", "op-1", now.Add(-time.Hour))
	journalRaw(e, kernel.SourceKernel, "acme", "run-4", kernel.TypeRunFailed, "", now.Add(-time.Minute)) // timed out
	journalRaw(e, "bot", "acme", "run-5", "run.awaiting", "op-1", now.Add(-time.Hour))                   // an agent's words
	journalRaw(e, kernel.SourceKernel, "acme", "run-6", "run.awaiting", "op-1", now.Add(-200*time.Hour)) // outside the window
	journalRaw(e, kernel.SourceKernel, "beta", "run-9", "run.awaiting", "op-2", now.Add(-time.Hour))

	got := backlogOf(e)
	if a := got["acme"]; a.AwaitingRuns != 1 || a.Attention != 1 {
		t.Errorf("acme: %+v, want 1 run awaiting (run-2) and 1 in the queue", a)
	}
	if b := got["beta"]; b.AwaitingRuns != 1 || b.Attention != 0 || !b.OldestAttention.IsZero() {
		t.Errorf("beta: %+v, want 1 run awaiting and an empty queue", b)
	}
	if len(got) != 2 {
		t.Errorf("backlog of %d projects, want acme and beta: %+v", len(got), got)
	}
}
