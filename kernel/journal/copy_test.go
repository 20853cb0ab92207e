package journal

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/seed-7bc021c3/reckon/internal/pgtest"
	"github.com/seed-7bc021c3/reckon/kernel"
)

var copyT0 = time.Date(2026, 12, 2, 10, 0, 0, 0, time.UTC)

// randomBatches is a stream of agents' events cut into batches: several
// runs, some begun in the batch and continued in the next, operations
// started, settled (completed, failed with each effect,
// reconciled), started twice under two ids, settled before they started;
// events redelivered as they were (repeats) or changed (conflicts), in a
// later batch or in the same one. Most batches are large enough for COPY.
func randomBatches(r *rand.Rand, batches int) [][]kernel.Event {
	var out [][]kernel.Event
	var sent []kernel.Event
	id := 0
	for bi := range batches {
		size := 130 + r.IntN(200)
		if r.IntN(5) == 0 {
			size = 65 + r.IntN(60) // below copyMin: the statement
		}
		// One batch in three redelivers earlier events; the others are
		// all new, so COPY writes them.
		redelivers := r.IntN(3) == 0 && len(sent) > 0
		var b []kernel.Event
		for len(b) < size {
			switch x := r.IntN(100); {
			case x < 6 && redelivers: // a repeat
				b = append(b, sent[r.IntN(len(sent))])
			case x < 9 && redelivers: // a conflict
				e := sent[r.IntN(len(sent))]
				e.Data = []byte(fmt.Sprintf(`{"operation_id":"op-x","tool":"t","args":{"changed":%d}}`, id))
				e.Type = kernel.TypeToolStarted
				b = append(b, e)
			case x < 11 && len(b) > 0: // a duplicate inside the batch
				b = append(b, b[r.IntN(len(b))])
			default:
				id++
				run := fmt.Sprintf("run-%d", r.IntN(6))
				if r.IntN(4) == 0 {
					// A run this batch begins, or the one before
					// (settleCopiedSQL looks only older runs up).
					run = fmt.Sprintf("run-b%d-%d", bi-r.IntN(2), r.IntN(2))
				}
				op := fmt.Sprintf("op-%d", r.IntN(400))
				typ, data := kernel.TypeToolStarted, fmt.Sprintf(`{"operation_id":%q,"tool":"run_command","args":{"n":%d}}`, op, id)
				switch r.IntN(7) {
				case 0, 1:
					typ, data = kernel.TypeToolCompleted, fmt.Sprintf(`{"operation_id":%q,"result_summary":"ok %d"}`, op, id)
				case 2:
					eff := []string{"none", "uncertain", "occurred"}[r.IntN(3)]
					typ, data = kernel.TypeToolFailed, fmt.Sprintf(`{"operation_id":%q,"error_type":"e","error":"x %d","effect":%q}`, op, id, eff)
				}
				// Nanoseconds the column truncates to microseconds, and
				// now and then an instant before 2000 (PostgreSQL's epoch).
				ts := copyT0.Add(time.Duration(id)*time.Millisecond + time.Duration(id%1000)*time.Nanosecond + 999)
				if r.IntN(20) == 0 {
					ts = time.Date(1995, 3, 4, 5, 6, 7, 123456789, time.FixedZone("x", 5400))
				}
				e := kernel.Event{SourceID: "agent-a", EventID: fmt.Sprintf("e-%d", id), Project: "acme",
					RunID: run, Type: typ, TS: ts, Actor: "agent", Data: []byte(data)}
				if r.IntN(10) == 0 {
					e.ParentEventID = &kernel.EventKey{SourceID: "agent-a", EventID: fmt.Sprintf("e-%d", r.IntN(id)+1)}
				}
				b = append(b, e)
			}
		}
		sent = append(sent, b...)
		out = append(out, b)
	}
	return out
}

// journalRows is the journal in seq order, every column but seq and
// ingested_at.
func journalRows(t *testing.T, s *Store) []string {
	t.Helper()
	rows, err := s.pool.Query(context.Background(),
		`SELECT concat_ws(' ', source_id, event_id, project, run_id, type,
    (extract(epoch FROM ts) * 1000000)::bigint, actor, coalesce(parent_source_id, '-'), coalesce(parent_event_id, '-'),
    data::text, encode(payload_digest, 'hex'), coalesce(operation_id, '-'), settles, open)
FROM journal_events ORDER BY seq`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var row string
		if err := rows.Scan(&row); err != nil {
			t.Fatal(err)
		}
		out = append(out, row)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// TestCopyWritesWhatTheStatementWrites writes the same random stream of
// batches through the COPY path and through the ingest statement alone,
// into two journals: every call's answers, and the journals' rows in
// order with their open hints, must be the same.
func TestCopyWritesWhatTheStatementWrites(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	for seed := range uint64(3) {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			t.Parallel()
			viaCopy, viaStatement := New(pgtest.New(t).Pool, nil), New(pgtest.New(t).Pool, nil)
			r := rand.New(rand.NewPCG(seed, 7))
			copied := 0
			for i, b := range randomBatches(r, 16) {
				preps, err := prepare(b)
				if err != nil {
					t.Fatal(err)
				}
				for j := range preps {
					preps[j].agent = true
				}
				want, err := viaStatement.ingestRetry(ctx, preps)
				if err != nil {
					t.Fatalf("batch %d, statement: %v", i, err)
				}
				d := distinct(preps)
				seqs := make([]int64, len(d.order))
				if data := copyData(preps, d, seqs); len(data) != cap(data) {
					t.Fatalf("batch %d: copyData sized its buffer %d for %d bytes", i, cap(data), len(data))
				}
				if data := keyCopyData(preps, d, seqs); len(data) != cap(data) {
					t.Fatalf("batch %d: keyCopyData sized its buffer %d for %d bytes", i, cap(data), len(data))
				}
				got, ok, err := viaCopy.ingestCopy(ctx, preps, d)
				if err != nil {
					t.Fatalf("batch %d, copy: %v", i, err)
				}
				if ok {
					copied++
				} else if got, err = viaCopy.ingestRetry(ctx, preps); err != nil {
					t.Fatalf("batch %d, after the copy gave way: %v", i, err)
				}
				if !slices.Equal(got, want) {
					t.Fatalf("batch %d (copied %v): answers differ\ncopy:      %v\nstatement: %v", i, ok, got, want)
				}
			}
			if copied < 6 {
				t.Fatalf("%d batches were written by COPY: the test did not exercise it", copied)
			}
			a, b := journalRows(t, viaCopy), journalRows(t, viaStatement)
			if !slices.Equal(a, b) {
				for i := range min(len(a), len(b)) {
					if a[i] != b[i] {
						t.Fatalf("journals differ at row %d of %d/%d:\ncopy:      %s\nstatement: %s", i, len(a), len(b), a[i], b[i])
					}
				}
				t.Fatalf("journals differ in length: %d against %d", len(a), len(b))
			}
			t.Logf("%d rows, %d batches copied", len(a), copied)
		})
	}
}

// big is a batch of n new events of one run: tool.started and its
// completion, alternately, with the last operation left open.
func big(prefix, run string, n int) []kernel.Event {
	out := make([]kernel.Event, n)
	for i := range out {
		op := fmt.Sprintf("%s-op-%d", prefix, i/2)
		typ, data := kernel.TypeToolStarted, fmt.Sprintf(`{"operation_id":%q,"tool":"t"}`, op)
		if i%2 == 1 && i < n-1 {
			typ, data = kernel.TypeToolCompleted, fmt.Sprintf(`{"operation_id":%q}`, op)
		} else if i%2 == 1 {
			typ, data = kernel.TypeToolStarted, fmt.Sprintf(`{"operation_id":"%s-last","tool":"t"}`, prefix)
		}
		out[i] = kernel.Event{SourceID: "agent-a", EventID: fmt.Sprintf("%s-%d", prefix, i), Project: "acme", RunID: run,
			Type: typ, TS: copyT0, Actor: "agent", Data: []byte(data)}
	}
	return out
}

// TestCopySettlesEarlierRows: a copied batch's settle statement looks up
// only the operations of runs the journal held before the batch
// (settleCopiedSQL's older runs), and a run with a single earlier row is
// such a run: the batch closes the hint of an earlier open tool.started it
// settles, and writes closed its own tool.started of an operation settled
// earlier, while the hints of the runs it begins are the batch's own.
func TestCopySettlesEarlierRows(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := New(pgtest.New(t).Pool, nil)
	ev := func(id, run, typ, op string) kernel.Event {
		data := fmt.Sprintf(`{"operation_id":%q,"tool":"t"}`, op)
		if typ != kernel.TypeToolStarted {
			data = fmt.Sprintf(`{"operation_id":%q}`, op)
		}
		return kernel.Event{SourceID: "agent-a", EventID: id, Project: "acme", RunID: run,
			Type: typ, TS: copyT0, Actor: "agent", Data: []byte(data)}
	}
	// Each run's one earlier row, through the statement (a small batch).
	if _, err := s.IngestAgentEvents(ctx, []kernel.Event{
		ev("x-1", "run-started", kernel.TypeToolStarted, "op-x"),
		ev("y-1", "run-settled", kernel.TypeToolCompleted, "op-y"),
	}); err != nil {
		t.Fatal(err)
	}
	// The copied batch: the completion of op-x and the start of op-y, each
	// with rows of its run around it, and two runs the batch begins (big's
	// last operation left open in each).
	batch := append(big("a", "run-new-1", 100), ev("x-2", "run-started", kernel.TypeToolCompleted, "op-x"))
	batch = append(batch, big("b", "run-started", 20)...)
	batch = append(batch, ev("y-2", "run-settled", kernel.TypeToolStarted, "op-y"))
	batch = append(batch, big("c", "run-settled", 20)...)
	batch = append(batch, big("d", "run-new-2", 60)...)
	preps, err := prepare(batch)
	if err != nil {
		t.Fatal(err)
	}
	for i := range preps {
		preps[i].agent = true
	}
	if _, ok, err := s.ingestCopy(ctx, preps, distinct(preps)); !ok || err != nil {
		t.Fatalf("copy of %d new events: ok %v, err %v", len(preps), ok, err)
	}
	open := map[string]bool{}
	rows, err := s.pool.Query(ctx, `SELECT event_id, open FROM journal_events WHERE type = 'tool.started'`)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var id string
		var o bool
		if err := rows.Scan(&id, &o); err != nil {
			t.Fatal(err)
		}
		open[id] = o
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	if open["x-1"] {
		t.Error("the earlier tool.started x-1, settled by the copied batch, is still open")
	}
	if open["y-2"] {
		t.Error("the copied tool.started y-2, whose operation was settled earlier, is open")
	}
	for _, id := range []string{"a-99", "b-19", "c-19", "d-59"} {
		if !open[id] {
			t.Errorf("%s, the start of an operation nobody settled, is closed", id)
		}
	}
	if open["a-0"] || open["d-2"] {
		t.Error("a start the batch itself settles is open")
	}
	if n := len(open); n != 2+51+11+11+31 {
		t.Errorf("%d tool.started rows, want %d", n, 2+51+11+11+31)
	}
}

// TestCopiedRunsCountsOnlyLookedUpRuns: the settle statement counts the
// rows of a run only when one of its operations may be looked up; a run
// with no operation the batch settles or leaves open is not listed, and a
// listed run's count is every row of it the batch wrote.
func TestCopiedRunsCountsOnlyLookedUpRuns(t *testing.T) {
	t.Parallel()
	batch := big("a", "run-ops", 10)
	batch = append(batch, kernel.Event{SourceID: "agent-a", EventID: "a-run", Project: "acme", RunID: "run-ops",
		Type: kernel.TypeRunStarted, TS: copyT0, Actor: "agent", Data: []byte(`{}`)})
	for i := range 3 {
		batch = append(batch, kernel.Event{SourceID: "agent-a", EventID: fmt.Sprintf("b-run-%d", i), Project: "acme",
			RunID: fmt.Sprintf("run-plain-%d", i), Type: kernel.TypeRunStarted, TS: copyT0, Actor: "agent", Data: []byte(`{}`)})
	}
	batch = append(batch, batch[0]) // a duplicate key: written once
	preps, err := prepare(batch)
	if err != nil {
		t.Fatal(err)
	}
	d := distinct(preps)
	tp, tr, _ := touched(preps, d)
	projects, runs, copied := copiedRuns(preps, d, tp, tr)
	if !slices.Equal(runs, []string{"run-ops"}) || !slices.Equal(projects, []string{"acme"}) || !slices.Equal(copied, []int32{11}) {
		t.Fatalf("copiedRuns = %v %v %v, want [acme] [run-ops] [11]", projects, runs, copied)
	}
}

// TestCopyGivesWayToTheStatement: a large batch holding a key already in
// the journal is not written by COPY (nothing of the attempt stays), and
// the call still answers each event as the statement does.
func TestCopyGivesWayToTheStatement(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := New(pgtest.New(t).Pool, nil)
	first := big("a", "run-1", 200)
	if res, err := s.IngestAgentEvents(ctx, first); err != nil || res[0].Status != kernel.StatusAccepted {
		t.Fatalf("first batch: %v %v", res, err)
	}
	// 200 new events, one repeat at the end, one conflict in the middle.
	second := big("b", "run-1", 200)
	changed := first[3]
	changed.Data = []byte(`{"operation_id":"a-op-1","result_summary":"changed"}`)
	second = append(second[:100], append([]kernel.Event{changed}, append(second[100:], first[7])...)...)
	preps, err := prepare(second)
	if err != nil {
		t.Fatal(err)
	}
	for i := range preps {
		preps[i].agent = true
	}
	if _, ok, err := s.ingestCopy(ctx, preps, distinct(preps)); ok || err != nil {
		t.Fatalf("the copy of a batch with keys already written: ok %v, err %v; want it to give way", ok, err)
	}
	if n := len(journalRows(t, s)); n != 200 {
		t.Fatalf("after the copy gave way the journal holds %d rows, want the first batch's 200", n)
	}
	res, err := s.IngestAgentEvents(ctx, second)
	if err != nil {
		t.Fatal(err)
	}
	for i, r := range res {
		want := kernel.StatusAccepted
		switch i {
		case 100:
			want = kernel.StatusConflict
		case len(res) - 1:
			want = kernel.StatusRepeated
		}
		if r.Status != want {
			t.Fatalf("event %d (%s): %s, want %s", i, r.EventID, r.Status, want)
		}
	}
	if n := len(journalRows(t, s)); n != 400 {
		t.Fatalf("journal holds %d rows, want 400", n)
	}
}

// TestCopyAgentChecks: the agents' checks refuse a large batch as they do
// a small one, with nothing written, and the connection goes back to the
// pool outside any transaction.
func TestCopyAgentChecks(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := New(pgtest.New(t).Pool, nil)
	if _, err := s.IngestAgentEvents(ctx, big("a", "run-1", 200)); err != nil {
		t.Fatal(err)
	}
	other := big("b", "run-1", 200)
	for i := range other {
		other[i].SourceID = "agent-b"
	}
	_, err := s.IngestAgentEvents(ctx, other)
	if kernel.ErrorCode(err) != kernel.EForbidden || !strings.Contains(err.Error(), `belongs to source "agent-a"`) {
		t.Fatalf("another source's batch into agent-a's run: %v, want EForbidden naming the owner", err)
	}
	gw := big("c", "run-2", 200)
	for i := range gw {
		gw[i].SourceID = "mcp-gateway"
	}
	if _, err := s.IngestAgentEvents(ctx, gw); kernel.ErrorCode(err) != kernel.EForbidden {
		t.Fatalf("a batch under the gateway's source: %v, want EForbidden", err)
	}
	// A kernel run's child, a run nobody has claimed: refused (RK001), and
	// the copy, run before the check, is rolled back with it.
	if _, err := s.pool.Exec(ctx,
		`INSERT INTO kernel_runs (project, run_id, plan, plan_digest, workflow_id) VALUES ('acme', 'kernel-run', '{}', '\x00', 'reckon/acme/kernel-run')`); err != nil {
		t.Fatal(err)
	}
	if _, err := s.IngestAgentEvents(ctx, big("d", "kernel-run"+kernel.ChildSeparator+"op-1", 200)); kernel.ErrorCode(err) != kernel.EForbidden ||
		!strings.Contains(err.Error(), `"kernel-run"`) {
		t.Fatalf("a batch into a kernel run's child: %v, want EForbidden naming kernel-run", err)
	}
	if n := len(journalRows(t, s)); n != 200 {
		t.Fatalf("journal holds %d rows after three refused batches, want 200", n)
	}
	var runs int
	if err := s.pool.QueryRow(ctx, `SELECT count(*) FROM agent_runs`).Scan(&runs); err != nil || runs != 1 {
		t.Fatalf("agent_runs holds %d runs (%v), want agent-a's one: a refused batch claimed nothing", runs, err)
	}
	// Every connection is idle: none was handed back inside a transaction.
	for range s.pool.Stat().TotalConns() {
		c, err := s.pool.Acquire(ctx)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Release()
		if st := c.Conn().PgConn().TxStatus(); st != 'I' {
			t.Fatalf("a pooled connection is in transaction state %q", st)
		}
	}
}

// TestCopyConcurrentOverlappingBatches: large batches written at once
// whose keys overlap (in opposite orders, so that the copies can deadlock
// on each other) each answer every event, every key is written once, and
// each event is accepted exactly once across the calls.
func TestCopyConcurrentOverlappingBatches(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := New(pgtest.New(t).Pool, nil)
	base := big("a", "run-1", 300)
	var wg sync.WaitGroup
	results := make([][]kernel.IngestResult, 4)
	for c := range results {
		b := slices.Clone(base)
		if c%2 == 1 {
			slices.Reverse(b)
		}
		wg.Go(func() {
			res, err := s.IngestAgentEvents(ctx, b)
			if err != nil {
				t.Error(err)
			}
			results[c] = res
		})
	}
	wg.Wait()
	accepted := map[string]int{}
	for _, res := range results {
		for _, r := range res {
			switch r.Status {
			case kernel.StatusAccepted:
				accepted[r.EventID]++
			case kernel.StatusRepeated:
			default:
				t.Fatalf("%s: %s (%s)", r.EventID, r.Status, r.Reason)
			}
		}
	}
	for _, e := range base {
		if accepted[e.EventID] != 1 {
			t.Fatalf("%s accepted %d times", e.EventID, accepted[e.EventID])
		}
	}
	if n := len(journalRows(t, s)); n != 300 {
		t.Fatalf("journal holds %d rows, want 300", n)
	}
}
