package runner

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/seed-7bc021c3/reckon/kernel"
)

// The start of a run and an ingest into it must not race: were each to
// check the other's rows before writing its own, a foreign event written
// in the same instant as the run's start would be read as the kernel's.
// These tests hold one side at its critical point, with the start's own
// advisory lock (lockRunStartSQL) or the ingest's own refusal
// (reckon_refuse_kernel_runs), and check that the other side refuses (the
// start after waiting).

// waitForLockWaiter waits until a session waits for the start lock of
// project/runID, or done is closed first (the other side did not wait).
func waitForLockWaiter(t *testing.T, e *env, runID string, done <-chan struct{}) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		var waiting bool
		if err := e.pool.Pool.QueryRow(context.Background(), `
SELECT EXISTS (SELECT 1 FROM pg_locks
WHERE locktype = 'advisory' AND NOT granted
  AND ((classid::bigint << 32) | objid::bigint) = hashtextextended($1::text || '/' || $2::text, 0))`,
			e.project, runID).Scan(&waiting); err != nil {
			t.Fatal(err)
		}
		if waiting {
			return
		}
		select {
		case <-done:
			t.Fatal("the other side went through without waiting")
		default:
		}
		if time.Now().After(deadline) {
			t.Fatal("nobody waited for the lock")
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func foreignEvent(t *testing.T, e *env, runID string) kernel.Event {
	t.Helper()
	ev, err := kernel.NewEvent("agent-x", runID+"/op-1/failed", e.project, runID, kernel.TypeToolFailed, "agent", time.Now(),
		kernel.ToolFailed{OperationID: "op-1", ErrorType: "validation", Error: "forged", Effect: kernel.EffectNone})
	if err != nil {
		t.Fatal(err)
	}
	return ev
}

// A start holds its lock while it checks for foreign events and records
// the run: an ingest into the run (or a child run of it) in that moment is
// refused at once, without waiting for the start, and nothing of it is
// written; once the run is recorded, it is refused as a kernel run.
func TestIngestDuringAStartIsRefused(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOpts{})
	ctx := context.Background()
	conn, err := e.pool.Pool.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	// A failed check must not leave the lock or the connection held (the
	// schema's cleanup would wait for it forever).
	t.Cleanup(func() {
		_, _ = conn.Exec(ctx, unlockRunStartSQL, e.project, "racing")
		conn.Release()
	})
	if _, err := conn.Exec(ctx, lockRunStartSQL, e.project, "racing"); err != nil {
		t.Fatal(err)
	}
	runs := []string{"racing", "racing" + kernel.ChildSeparator + "op-2"}
	ingest := func(want string) {
		t.Helper()
		for _, runID := range runs {
			_, err := e.journal.IngestAgentEvents(ctx, []kernel.Event{foreignEvent(t, e, runID)})
			if kernel.ErrorCode(err) != kernel.EForbidden || !strings.Contains(err.Error(), `run "racing"`) || !strings.Contains(err.Error(), want) {
				t.Fatalf("ingest into %s: %v, want a refusal naming racing, %q", runID, err, want)
			}
		}
		var n int
		if err := e.pool.Pool.QueryRow(ctx, "SELECT count(*) FROM journal_events WHERE run_id = ANY($1)", runs).Scan(&n); err != nil || n != 0 {
			t.Fatalf("events written: %d %v", n, err)
		}
	}
	ingest("is being started")
	if _, err := conn.Exec(ctx, insertRunSQL, e.project, "racing", `{}`, []byte{1}, kernel.WorkflowID(e.project, "racing")); err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Exec(ctx, unlockRunStartSQL, e.project, "racing"); err != nil {
		t.Fatal(err)
	}
	ingest("is a kernel run")
}

// An ingest holds its shared lock from its refusal check to its commit:
// a start of that run in the meantime waits, then sees the events and is
// refused (the run id is claimed).
func TestStartWaitsForAnIngestUnderWay(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOpts{})
	ctx := context.Background()
	tx, err := e.pool.Pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback(ctx) }()
	if _, err := tx.Exec(ctx, "SELECT reckon_refuse_kernel_runs($1::text[], $2::text[])", []string{e.project}, []string{"contested"}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.journal.IngestTx(ctx, tx, []kernel.Event{foreignEvent(t, e, "contested")}); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	var startErr error
	go func() {
		defer close(done)
		_, _, startErr = e.starter.Start(ctx, StartParams{Project: e.project, RunID: "contested", Plan: Plan{Steps: []Step{cmd("true")}}})
	}()
	waitForLockWaiter(t, e, "contested", done)
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	<-done
	if kernel.ErrorCode(startErr) != kernel.EConflict || !strings.Contains(startErr.Error(), `"agent-x"`) {
		t.Fatalf("start during an ingest into its run: %v, want a conflict naming agent-x", startErr)
	}
	var n int
	if err := e.pool.Pool.QueryRow(ctx, "SELECT count(*) FROM kernel_runs WHERE run_id = 'contested'").Scan(&n); err != nil || n != 0 {
		t.Fatalf("kernel_runs rows: %d %v", n, err)
	}
}
