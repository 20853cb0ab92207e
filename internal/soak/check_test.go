package soak

import (
	"context"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/seed-7bc021c3/reckon/internal/pgtest"
	"github.com/seed-7bc021c3/reckon/kernel"
	"github.com/seed-7bc021c3/reckon/kernel/journal"
	"github.com/seed-7bc021c3/reckon/kernel/outbox"
)

func mustEvent(t *testing.T, source, id, run, typ, actor string, data any) kernel.Event {
	t.Helper()
	ev, err := kernel.NewEvent(source, id, "p", run, typ, actor, time.Now(), data)
	if err != nil {
		t.Fatal(err)
	}
	return ev
}

func verdictEvent(t *testing.T, id, run string, ops ...string) kernel.Event {
	return mustEvent(t, kernel.SourceKernel, id, run, kernel.TypeSupervisorVerdict, kernel.ActorSupervisor, kernel.Verdict{
		Kind: kernel.VerdictKindReconciliation, Causes: []string{}, Remedies: []string{}, OperationIDs: ops, Supervisor: "builtin",
	})
}

func recEvent(t *testing.T, id, run, op, verdictID string) kernel.Event {
	ev := mustEvent(t, kernel.SourceKernel, id, run, kernel.TypeOperationReconciled, kernel.ActorSupervisor, map[string]any{
		"operation_id": op, "effect": "unknown", "note": "n", "basis": "inference",
		"evidence": map[string]any{"verdict": kernel.EventKey{SourceID: kernel.SourceKernel, EventID: verdictID}},
	})
	ev.ParentEventID = &kernel.EventKey{SourceID: "agent", EventID: run + "/" + op + "/started"}
	return ev
}

// The triage check catches each way a killed sweep could leave the
// journal wrong: a verdict without one of its reconciliations, a
// reconciliation citing no verdict, an operation with two verdicts, a
// seeded operation never settled. A consistent wall counts nothing.
func TestVerdictCheckFindsHalfWrittenAndDoubleWalls(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := pgtest.New(t)
	evs := []kernel.Event{
		// r0: consistent.
		verdictEvent(t, "v0", "r0", "op-1", "op-2"),
		recEvent(t, "rec-r0-1", "r0", "op-1", "v0"),
		recEvent(t, "rec-r0-2", "r0", "op-2", "v0"),
		// r1: the verdict names op-2, whose reconciliation is missing.
		verdictEvent(t, "v1", "r1", "op-1", "op-2"),
		recEvent(t, "rec-r1-1", "r1", "op-1", "v1"),
		// r2: two verdicts, two reconciliations of op-1.
		verdictEvent(t, "v2", "r2", "op-1"),
		recEvent(t, "rec-r2-a", "r2", "op-1", "v2"),
		verdictEvent(t, "v3", "r2", "op-1"),
		recEvent(t, "rec-r2-b", "r2", "op-1", "v3"),
		// r3: a reconciliation whose verdict never landed.
		recEvent(t, "rec-r3-1", "r3", "op-1", "v9"),
	}
	if _, err := journal.New(s.Pool, nil).Ingest(ctx, evs); err != nil {
		t.Fatal(err)
	}
	seeded := map[opRef]bool{{"r0", "op-1"}: true, {"r0", "op-2"}: true, {"r1", "op-1"}: true, {"r1", "op-2"}: true,
		{"r2", "op-1"}: true, {"r3", "op-1"}: true, {"r4", "op-1"}: true}
	sc := &Scenario{}
	nv, nr, unsettled := checkVerdictJournal(ctx, s.Pool, sc, "p", seeded)
	// Lost: r1/op-2 (verdict without reconciliation), r3/op-1 (reconciliation without verdict).
	// Duplicated: r2/op-1 has two verdicts and two reconciliations.
	if sc.Lost != 2 || sc.Duplicated != 2 || unsettled != 2 || nv != 4 || nr != 5 {
		t.Fatalf("lost %d (want 2), duplicated %d (want 2), unsettled %d (want 2: r1/op-2, r4/op-1), verdicts %d, reconciled %d; problems:\n%s",
			sc.Lost, sc.Duplicated, unsettled, nv, nr, strings.Join(sc.Problems, "\n"))
	}

	clean := &Scenario{}
	checkVerdictJournal(ctx, s.Pool, clean, "other-project", nil)
	if clean.Lost != 0 || clean.Duplicated != 0 || len(clean.Problems) != 0 {
		t.Fatalf("an empty project: %+v", clean)
	}
}

// The outbox check counts parked rows as spurious conflicts and rows
// undelivered at the deadline or marked delivered but absent from the
// journal as lost.
func TestOutboxCheck(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := pgtest.New(t)
	var evs []kernel.Event
	for _, id := range []string{"a", "b", "c", "d"} {
		evs = append(evs, mustEvent(t, kernel.SourceKernel, "r/"+id, "r", kernel.TypeRunStarted, "kernel", map[string]any{}))
	}
	if err := outbox.Enqueue(ctx, s.Pool, evs...); err != nil {
		t.Fatal(err)
	}
	if _, err := journal.New(s.Pool, nil).Ingest(ctx, evs[:1]); err != nil {
		t.Fatal(err)
	}
	// a: delivered and journaled; b: delivered, not journaled; c: parked; d: pending.
	for _, q := range []string{
		`DELETE FROM kernel_event_outbox_undelivered WHERE id IN (SELECT id FROM kernel_event_outbox WHERE event_id IN ('r/a', 'r/b', 'r/c'))`,
		`UPDATE kernel_event_outbox SET parked_at = now(), park_reason = 'conflict' WHERE event_id = 'r/c'`,
	} {
		if _, err := s.Pool.Exec(ctx, q); err != nil {
			t.Fatal(err)
		}
	}
	sc := &Scenario{}
	checkOutbox(ctx, s.Pool, sc, "p", 300*time.Millisecond)
	if sc.Lost != 2 || sc.SpuriousConflicts != 1 {
		t.Fatalf("lost %d (want 2: b and d), spurious conflicts %d (want 1: c); problems %q", sc.Lost, sc.SpuriousConflicts, sc.Problems)
	}
}

// A command that began twice or wrote its token twice ran twice; a
// completed operation without its token lost its effect.
func TestTokenCheck(t *testing.T) {
	t.Parallel()
	sc := &Scenario{}
	note := func(f string, a ...any) { sc.problem(f, a...) }
	begins := map[string]int{"r-s1": 1, "r-s2": 2, "r-s3": 1}
	toks := map[string]int{"r-s1": 1, "r-s2": 1}
	completed := map[opRef]bool{{"r", "op-1"}: true, {"r", "op-3"}: true}
	checkTokens(sc, note, "r", 3, begins, toks, completed)
	if sc.ReExecuted != 1 || sc.Lost != 1 {
		t.Fatalf("re-executed %d (want 1: step 2), lost %d (want 1: op-3); %q", sc.ReExecuted, sc.Lost, sc.Problems)
	}
	if tokenOp("k001-a-s3") != (opRef{"k001-a", "op-3"}) || tokenStep("k001-a-s3") != 3 {
		t.Fatalf("token parsing: %v %d", tokenOp("k001-a-s3"), tokenStep("k001-a-s3"))
	}
}

// The last line has the fixed format, and a soak passes only when every
// counter is zero and no scenario reported a problem.
func TestReportTotals(t *testing.T) {
	t.Parallel()
	r := &Report{Scenarios: []*Scenario{
		{Name: "a", Rounds: 3, Acknowledged: 100},
		{Name: "b", Rounds: 2, Acknowledged: 5},
	}}
	r.Scenarios[0].Recovery.add(1500 * time.Millisecond)
	r.Scenarios[1].Recovery.add(10234 * time.Millisecond)
	r.Scenarios[1].Recovery.add(2 * time.Second)
	r.total()
	want := "soak: rounds 5, acknowledged 105, lost 0, duplicated 0, spurious conflicts 0, re-executed 0, max recovery 10.2 s"
	if got := r.LastLine(); got != want || !r.Passed {
		t.Fatalf("last line %q (passed %v), want %q", got, r.Passed, want)
	}
	if d := r.Scenarios[1].Recovery; d.P50 != 2 || d.Max != 10.234 || d.Count != 2 {
		t.Fatalf("distribution %+v", d)
	}
	for _, spoil := range []func(){
		func() { r.Scenarios[0].Lost = 1 },
		func() { r.Scenarios[1].Duplicated = 1 },
		func() { r.Scenarios[0].SpuriousConflicts = 1 },
		func() { r.Scenarios[1].ReExecuted = 1 },
		func() { r.Scenarios[0].problem("the stack never came back") },
		func() { r.Aborted = "interrupted" },
	} {
		r.Scenarios[0] = &Scenario{Name: "a", Rounds: 3}
		r.Scenarios[1] = &Scenario{Name: "b", Rounds: 2}
		r.Aborted = ""
		spoil()
		r.total()
		if r.Passed {
			t.Fatalf("passed with %+v %+v aborted %q", *r.Scenarios[0], *r.Scenarios[1], r.Aborted)
		}
	}
}

// A process that names the soak's data directory and is not one of its
// children is an orphan, found and killed; the children are left alone.
func TestOrphansAreFoundAndKilled(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	// Neither process may fork: a shell's freshly forked child carries its
	// parent's command line (and so dir) until it execs, and would be
	// counted as a second orphan. The orphan waits in the shell's own read
	// builtin on a pipe held open; the child execs sleep at once.
	orphan := exec.Command("sh", "-c", "read x", "orphan", dir)
	hold, err := orphan.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	defer hold.Close()
	if err := orphan.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() { _ = orphan.Wait(); close(exited) }()
	ps := &procs{bin: "sh", logDir: t.TempDir()}
	child, err := ps.start("child", []string{"-c", "exec sleep 60", "child", dir})
	if err != nil {
		t.Fatal(err)
	}
	defer child.kill()
	if got := ps.orphans(dir); len(got) != 1 || got[0] != orphan.Process.Pid {
		t.Fatalf("orphans %v, want only %d (child %d is the soak's own)", got, orphan.Process.Pid, child.cmd.Process.Pid)
	}
	if n := ps.killOrphans(dir); n != 1 {
		t.Fatalf("killed %d orphans, want 1", n)
	}
	select {
	case <-exited:
	case <-time.After(10 * time.Second):
		t.Fatal("the orphan survived killOrphans")
	}
	if child.exited() {
		t.Fatal("killOrphans killed the soak's own child")
	}
}
