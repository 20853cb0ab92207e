package journal_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/seed-7bc021c3/reckon/internal/pgtest"
	"github.com/seed-7bc021c3/reckon/internal/reckontest"
	"github.com/seed-7bc021c3/reckon/kernel"
	"github.com/seed-7bc021c3/reckon/kernel/journal"
)

var t0 = time.Date(2026, 11, 30, 10, 0, 0, 0, time.UTC)

func ev(source, id, typ, data string) kernel.Event {
	return kernel.Event{SourceID: source, EventID: id, Project: "acme", RunID: "run-1", Type: typ, TS: t0, Actor: "agent", Data: []byte(data)}
}

func statuses(rs []kernel.IngestResult) []string {
	out := make([]string, len(rs))
	for i, r := range rs {
		out[i] = r.Status
	}
	return out
}

func TestIngestAcceptedRepeatedConflict(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := journal.New(pgtest.New(t).Pool, nil)

	first := ev("agent-a", "e1", kernel.TypeToolStarted, `{"operation_id":"op-1","tool":"run_command","args":{"command":"ls","timeout_s":5}}`)
	res, err := s.Ingest(ctx, []kernel.Event{first})
	if err != nil {
		t.Fatal(err)
	}
	if got := statuses(res); got[0] != kernel.StatusAccepted {
		t.Fatalf("first ingest: %v", got)
	}

	reordered := first
	reordered.Data = []byte(`{ "args": {"timeout_s": 5, "command": "ls"}, "tool": "run_command", "operation_id": "op-1" }`)
	changed := first
	changed.Data = []byte(`{"operation_id":"op-1","tool":"run_command","args":{"command":"rm -rf /","timeout_s":5}}`)
	other := ev("agent-a", "e2", kernel.TypeToolCompleted, `{"operation_id":"op-1"}`)
	res, err = s.Ingest(ctx, []kernel.Event{reordered, changed, other, other})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{kernel.StatusRepeated, kernel.StatusConflict, kernel.StatusAccepted, kernel.StatusRepeated}
	if got := statuses(res); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("statuses %v, want %v", got, want)
	}
	if res[1].Reason == "" {
		t.Fatal("conflict without a reason")
	}
	// The conflict overwrote nothing.
	stored, err := s.Event(ctx, first.Key())
	if err != nil {
		t.Fatal(err)
	}
	if p, _ := stored.Prepare(); string(p.CanonicalData) != `{"args":{"command":"ls","timeout_s":5},"operation_id":"op-1","tool":"run_command"}` {
		t.Fatalf("stored data changed: %s", p.CanonicalData)
	}
	evs, err := s.RunEvents(ctx, "acme", "run-1")
	if err != nil {
		t.Fatal(err)
	}
	if len(evs) != 2 {
		t.Fatalf("%d events in run, want 2", len(evs))
	}
}

func TestIngestDuplicateInOneBatchDifferentPayload(t *testing.T) {
	t.Parallel()
	s := journal.New(pgtest.New(t).Pool, nil)
	a := ev("x", "dup", kernel.TypeRunCompleted, `{}`)
	b := a
	b.Data = []byte(`{"note":"different"}`)
	res, err := s.Ingest(context.Background(), []kernel.Event{a, b})
	if err != nil {
		t.Fatal(err)
	}
	if got := statuses(res); got[0] != kernel.StatusAccepted || got[1] != kernel.StatusConflict {
		t.Fatalf("statuses %v", got)
	}
}

func TestIngestRejectsInvalidBatchWithoutWriting(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := journal.New(pgtest.New(t).Pool, nil)
	good := ev("x", "good", kernel.TypeRunCompleted, `{}`)
	bad := ev("x", "bad", kernel.TypeToolFailed, `{"operation_id":"op-1","error_type":"x","effect":"perhaps"}`)
	if _, err := s.Ingest(ctx, []kernel.Event{good, bad}); kernel.ErrorCode(err) != kernel.EInvalid {
		t.Fatalf("error %v, want invalid", err)
	}
	if _, err := s.Event(ctx, good.Key()); kernel.ErrorCode(err) != kernel.ENotFound {
		t.Fatalf("half-written batch: %v", err)
	}
}

func TestConcurrentSameKeyIngestYieldsOneRow(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	sch := pgtest.New(t)
	s := journal.New(sch.Pool, nil)
	const workers, keys = 8, 50
	var wg sync.WaitGroup
	results := make([][]kernel.IngestResult, workers)
	errs := make([]error, workers)
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			batch := make([]kernel.Event, keys)
			for i := range batch {
				batch[i] = ev("race", fmt.Sprintf("k%d", i), kernel.TypeToolStarted, fmt.Sprintf(`{"operation_id":"op-%d","tool":"t"}`, i))
			}
			if w%2 == 1 { // reverse order on half the workers to mix lock order
				for i, j := 0, len(batch)-1; i < j; i, j = i+1, j-1 {
					batch[i], batch[j] = batch[j], batch[i]
				}
			}
			results[w], errs[w] = s.Ingest(ctx, batch)
		}(w)
	}
	wg.Wait()
	accepted := map[string]int{}
	for w := range results {
		if errs[w] != nil {
			t.Fatalf("worker %d: %v", w, errs[w])
		}
		for _, r := range results[w] {
			switch r.Status {
			case kernel.StatusAccepted:
				accepted[r.EventID]++
			case kernel.StatusRepeated:
			default:
				t.Fatalf("worker %d: %s got %s", w, r.EventID, r.Status)
			}
		}
	}
	for i := 0; i < keys; i++ {
		if n := accepted[fmt.Sprintf("k%d", i)]; n != 1 {
			t.Fatalf("k%d accepted %d times", i, n)
		}
	}
	var rows int
	if err := sch.Pool.QueryRow(ctx, "SELECT count(*) FROM journal_events").Scan(&rows); err != nil {
		t.Fatal(err)
	}
	if rows != keys {
		t.Fatalf("%d rows, want %d", rows, keys)
	}
}

func TestOpenHintFollowsSettlingEvents(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	sch := pgtest.New(t)
	s := journal.New(sch.Pool, nil)
	open := func(op string) bool {
		var o bool
		if err := sch.Pool.QueryRow(ctx, "SELECT open FROM journal_events WHERE type='tool.started' AND operation_id=$1", op).Scan(&o); err != nil {
			t.Fatal(err)
		}
		return o
	}
	must := func(evs ...kernel.Event) {
		if _, err := s.Ingest(ctx, evs); err != nil {
			t.Fatal(err)
		}
	}
	started := func(op string) kernel.Event {
		return ev("agent", op+"/started", kernel.TypeToolStarted, `{"operation_id":"`+op+`","tool":"t"}`)
	}
	// Started then completed in separate batches.
	must(started("a"))
	if !open("a") {
		t.Fatal("a should be open")
	}
	must(ev("agent", "a/completed", kernel.TypeToolCompleted, `{"operation_id":"a"}`))
	if open("a") {
		t.Fatal("a should be settled by tool.completed")
	}
	// Uncertain failure keeps it open; a reconciliation under another source settles it.
	must(started("b"), ev("agent", "b/failed", kernel.TypeToolFailed, `{"operation_id":"b","error_type":"x","effect":"uncertain"}`))
	if !open("b") {
		t.Fatal("b should stay open after an uncertain failure")
	}
	rec := ev(kernel.SourceKernel, "b/reconciled", kernel.TypeOperationReconciled, `{"operation_id":"b","effect":"unknown","note":"n","basis":"operator"}`)
	rec.Actor = "operator:alice"
	rec.ParentEventID = &kernel.EventKey{SourceID: "agent", EventID: "b/started"}
	must(rec)
	if open("b") {
		t.Fatal("b should be settled by a kernel-source reconciliation")
	}
	// Terminal before started (out of order), in earlier batch and in the same batch.
	must(ev("agent", "c/completed", kernel.TypeToolCompleted, `{"operation_id":"c"}`))
	must(started("c"))
	if open("c") {
		t.Fatal("c arrived after its terminal event and must be settled")
	}
	must(ev("agent", "d/blocked", kernel.TypeToolBlocked, `{"operation_id":"d","reason":"policy"}`), started("d"))
	if open("d") {
		t.Fatal("d settled in the same batch")
	}
	// A conflicting settling event must not settle anything.
	must(started("e"), ev("agent", "e/x", kernel.TypeRunCompleted, `{}`))
	must(ev("agent", "e/x", kernel.TypeToolCompleted, `{"operation_id":"e"}`))
	if !open("e") {
		t.Fatal("a conflicting event settled e")
	}
	// Simulate the race the repair exists for.
	if _, err := sch.Pool.Exec(ctx, "UPDATE journal_events SET open = true WHERE operation_id = 'a' AND type = 'tool.started'"); err != nil {
		t.Fatal(err)
	}
	n, err := s.RepairOpenHints(ctx)
	if err != nil || n != 1 || open("a") {
		t.Fatalf("repair: n=%d err=%v open=%v", n, err, open("a"))
	}
}

// Concurrent guarded calls share group commits; the one into a kernel run
// is refused alone, and the others are written.
func TestIngestOutsideKernelRunsRefusesOnlyTheCallInAKernelRun(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	sch := pgtest.New(t)
	s := journal.New(sch.Pool, nil)
	if _, err := sch.Pool.Exec(ctx,
		`INSERT INTO kernel_runs (project, run_id, plan, plan_digest, workflow_id) VALUES ('acme', 'kernel-run', '{}', '\x00', 'reckon/acme/kernel-run')`); err != nil {
		t.Fatal(err)
	}
	const n, refused = 16, 5
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		e := ev("agent-a", fmt.Sprintf("e%d", i), kernel.TypeToolStarted, `{"operation_id":"op-1","tool":"t","args":{}}`)
		e.RunID = fmt.Sprintf("run-%d", i)
		if i == refused {
			e.RunID = "kernel-run" + kernel.ChildSeparator + "op-1"
		}
		wg.Go(func() { _, errs[i] = s.IngestAgentEvents(ctx, []kernel.Event{e}) })
	}
	wg.Wait()
	for i, err := range errs {
		if i == refused {
			if kernel.ErrorCode(err) != kernel.EForbidden || !strings.Contains(err.Error(), `"kernel-run"`) {
				t.Errorf("call into the kernel run's child: %v, want a refusal naming kernel-run", err)
			}
		} else if err != nil {
			t.Errorf("call %d: %v", i, err)
		}
	}
	var rows int
	if err := sch.Pool.QueryRow(ctx, "SELECT count(*) FROM journal_events").Scan(&rows); err != nil || rows != n-1 {
		t.Fatalf("journal rows: %d %v, want %d", rows, err, n-1)
	}
	// Ingest itself (the kernel's and the reconcilers' path) does not refuse.
	e := ev("agent-a", "plain", kernel.TypeToolStarted, `{"operation_id":"op-1","tool":"t","args":{}}`)
	e.RunID = "kernel-run"
	if _, err := s.Ingest(ctx, []kernel.Event{e}); err != nil {
		t.Fatalf("Ingest into a kernel run: %v", err)
	}
}

// Concurrent first writes of different sources into one new run: exactly
// one source gets the run, whatever group commit combined; the others are
// refused and nothing of theirs is written. Writes of the winning source
// keep going in.
func TestIngestAgentEventsOneSourceClaimsANewRun(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	sch := pgtest.New(t)
	s := journal.New(sch.Pool, nil)
	const n = 12
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		e := ev(fmt.Sprintf("agent-%d", i), fmt.Sprintf("e%d", i), kernel.TypeToolStarted, `{"operation_id":"op-1","tool":"t","args":{}}`)
		e.RunID = "contested"
		wg.Go(func() { _, errs[i] = s.IngestAgentEvents(ctx, []kernel.Event{e}) })
	}
	wg.Wait()
	winner := -1
	for i, err := range errs {
		switch {
		case err == nil && winner < 0:
			winner = i
		case err == nil:
			t.Fatalf("agent-%d and agent-%d both wrote into the new run", winner, i)
		case kernel.ErrorCode(err) != kernel.EForbidden || !strings.Contains(err.Error(), `run "contested" of project "acme" belongs to source`):
			t.Errorf("agent-%d: %v, want a refusal naming the run's owner", i, err)
		}
	}
	if winner < 0 {
		t.Fatal("no source got the run")
	}
	var owner string
	var events int
	if err := sch.Pool.QueryRow(ctx, `SELECT (SELECT source_id FROM agent_runs WHERE run_id = 'contested'),
  (SELECT count(*) FROM journal_events WHERE run_id = 'contested')`).Scan(&owner, &events); err != nil {
		t.Fatal(err)
	}
	if want := fmt.Sprintf("agent-%d", winner); owner != want || events != 1 {
		t.Fatalf("owner %q with %d events, want %s with 1", owner, events, want)
	}
	e := ev(owner, "more", kernel.TypeToolCompleted, `{"operation_id":"op-1","result_summary":"ok"}`)
	e.RunID = "contested"
	if _, err := s.IngestAgentEvents(ctx, []kernel.Event{e}); err != nil {
		t.Fatalf("the owner's next event: %v", err)
	}
}

// A first write of a new run held open at its claim: another source's
// write into that run waits for it (the claim's primary key), then reads
// the owner it committed and is refused.
func TestIngestAgentEventsWaitsForAClaimUnderWay(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	sch := pgtest.New(t)
	s := journal.New(sch.Pool, nil)
	tx, err := sch.Pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback(ctx) }()
	if _, err := tx.Exec(ctx, `SELECT reckon_check_agent_events('{acme}', '{held}', '{acme}', '{held}', '{agent-a}')`); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		e := ev("agent-b", "b-1", kernel.TypeToolCompleted, `{"operation_id":"op-1","result_summary":"forged"}`)
		e.RunID = "held"
		_, err := s.IngestAgentEvents(ctx, []kernel.Event{e})
		done <- err
	}()
	reckontest.Eventually(t, 10*time.Second, "agent-b's write waiting for agent-a's claim", func() bool {
		select {
		case err := <-done:
			t.Fatalf("agent-b's write did not wait for the claim under way: %v", err)
		default:
		}
		var waiting bool
		if err := sch.Pool.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_locks WHERE locktype = 'transactionid' AND NOT granted)`).Scan(&waiting); err != nil {
			t.Fatal(err)
		}
		return waiting
	})
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-done; kernel.ErrorCode(err) != kernel.EForbidden || !strings.Contains(err.Error(), `belongs to source "agent-a"`) {
		t.Fatalf("agent-b's write after agent-a's claim committed: %v, want a refusal naming agent-a", err)
	}
}

// TestIngestNumberBeyondFloat64IsAConflict: the same key with a number
// changed past what float64 can tell apart (an id or an amount of more
// than 17 significant digits) is a different payload, a conflict, never a
// repeat; and the journal keeps the number that was sent.
func TestIngestNumberBeyondFloat64IsAConflict(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	sch := pgtest.New(t)
	s := journal.New(sch.Pool, nil)
	first := ev("agent-a", "e1", kernel.TypeToolStarted, `{"operation_id":"op-1","tool":"mcp__pay","args":{"invoice":12345678901234567891,"amount":0.10000000000000001}}`)
	if res, err := s.Ingest(ctx, []kernel.Event{first}); err != nil || res[0].Status != kernel.StatusAccepted {
		t.Fatalf("first: %v %v", res, err)
	}
	for _, data := range []string{
		`{"operation_id":"op-1","tool":"mcp__pay","args":{"invoice":12345678901234567890,"amount":0.10000000000000001}}`,
		`{"operation_id":"op-1","tool":"mcp__pay","args":{"invoice":12345678901234567891,"amount":0.1}}`,
	} {
		changed := first
		changed.Data = []byte(data)
		res, err := s.Ingest(ctx, []kernel.Event{changed})
		if err != nil {
			t.Fatal(err)
		}
		if res[0].Status != kernel.StatusConflict {
			t.Errorf("%s under the key of %s: %s, want conflict", data, first.Data, res[0].Status)
		}
	}
	var invoice, amount string
	if err := sch.Pool.QueryRow(ctx, `SELECT data->'args'->>'invoice', data->'args'->>'amount' FROM journal_events WHERE source_id = 'agent-a' AND event_id = 'e1'`).Scan(&invoice, &amount); err != nil {
		t.Fatal(err)
	}
	if invoice != "12345678901234567891" || amount != "0.10000000000000001" {
		t.Errorf("journal stored invoice %s amount %s, want 12345678901234567891 and 0.10000000000000001", invoice, amount)
	}
}

// The MCP gateway's source is the gateway's alone (migration 00031): an
// agent's event under it — its default name, or one a gateway instance
// registered with — could take the key the gateway will give a call's
// tool.started (<project>/<run>/op-<n>/started, whatever run the agent
// writes it into), and the gateway's own event would then be a conflict,
// parked, while its call goes upstream. The refusal comes before the
// run's claim, so nothing of the write is left; the gateway's own path
// (Ingest, from the outbox) is not an agent's write.
func TestIngestAgentEventsRefusesTheGatewaysSource(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	sch := pgtest.New(t)
	s := journal.New(sch.Pool, nil)
	if _, err := sch.Pool.Exec(ctx,
		`INSERT INTO gateway_instances (instance_id, source_id, lease) VALUES ('gw-1', 'gw-prod', '30 seconds')`); err != nil {
		t.Fatal(err)
	}
	squat := func(src string) kernel.Event {
		e := ev(src, "acme/later-run/op-1/started", kernel.TypeToolStarted, `{"operation_id":"op-1","tool":"mcp__create_issue","args":{}}`)
		e.RunID = "squat-" + src
		return e
	}
	for _, src := range []string{"mcp-gateway", "gw-prod"} {
		_, err := s.IngestAgentEvents(ctx, []kernel.Event{ev("agent-7", "mine-"+src, kernel.TypeRunStarted, `{}`), squat(src)})
		if kernel.ErrorCode(err) != kernel.EForbidden || !strings.Contains(err.Error(), `source "`+src+`" is the MCP gateway's`) {
			t.Errorf("%s: %v, want a refusal naming the gateway's source", src, err)
		}
	}
	var events, claims int
	if err := sch.Pool.QueryRow(ctx, `SELECT (SELECT count(*) FROM journal_events), (SELECT count(*) FROM agent_runs)`).Scan(&events, &claims); err != nil {
		t.Fatal(err)
	}
	if events != 0 || claims != 0 {
		t.Fatalf("after refused writes: %d events, %d claimed runs", events, claims)
	}
	if _, err := s.IngestAgentEvents(ctx, []kernel.Event{squat("agent-7")}); err != nil {
		t.Fatalf("another source: %v", err)
	}
	if _, err := s.Ingest(ctx, []kernel.Event{squat("gw-prod")}); err != nil {
		t.Fatalf("the gateway's own delivery: %v", err)
	}
}
