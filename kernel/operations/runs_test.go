package operations_test

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/seed-7bc021c3/reckon/internal/reckontest"
	"github.com/seed-7bc021c3/reckon/kernel"
	"github.com/seed-7bc021c3/reckon/kernel/operations"
)

// TestRunsList: the runs index lists every run the journal holds, newest
// first, whoever wrote it: its kind and source, the status its lifecycle
// events give it, its times, its parent (only one its id descends from)
// and children, and its operations counted as kernel.Replay counts them;
// pages walk every run once; status and parent filters; bad requests name
// their parameter.
func TestRunsList(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	ctx := context.Background()
	agent := reckontest.Run{Project: "acme", RunID: "a-1", Source: "bot"}
	k := reckontest.Run{Project: "acme", RunID: "k-1", Source: kernel.SourceKernel}
	child := reckontest.Run{Project: "acme", RunID: "k-1.op-1", Source: kernel.SourceKernel}
	gw := reckontest.Run{Project: "acme", RunID: "gw-1", Source: "mcp-gateway"}
	bare := reckontest.Run{Project: "acme", RunID: "bare-1", Source: "bot"}
	spoof := reckontest.Run{Project: "acme", RunID: "spoof", Source: "eve"}
	agentEvents := []kernel.Event{agent.RunStarted(ago(5 * time.Hour)),
		agent.Started("op-1", "run_command", ago(5*time.Hour)), agent.Completed("op-1", ago(5*time.Hour)),
		agent.Started("op-2", "run_command", ago(5*time.Hour)), agent.Failed("op-2", kernel.EffectUncertain, ago(5*time.Hour)),
		agent.Started("op-3", "run_command", ago(5*time.Hour)), agent.Blocked("op-3", ago(5*time.Hour)),
		// A settling event of an operation that never started, and a
		// second tool.started of op-2: neither counts as an operation.
		agent.Completed("op-9", ago(5*time.Hour)),
		agent.Event("op-2/started-again", kernel.TypeToolStarted, ago(5*time.Hour), map[string]any{"operation_id": "op-2", "tool": "run_command"}),
		agent.Started("op-4", "run_command", ago(5*time.Hour)),
		agent.RunFailed(ago(4 * time.Hour))}
	e.Ingest(agentEvents...)
	e.Ingest(k.RunStarted(ago(3*time.Hour)), k.Started("op-1", kernel.DelegateTool, ago(3*time.Hour)))
	e.Ingest(child.Event("run/started", kernel.TypeRunStarted, ago(3*time.Hour), kernel.RunStarted{ParentRunID: "k-1"}),
		child.Started("op-1", "run_command", ago(3*time.Hour)))
	e.Ingest(k.RunCompleted(ago(2 * time.Hour)))
	if _, err := e.Schema.Pool.Exec(ctx, `INSERT INTO gateway_runs (project, run_id, source_id, kind) VALUES ('acme', 'gw-1', 'mcp-gateway', 'session')`); err != nil {
		t.Fatal(err)
	}
	e.Ingest(gw.RunStarted(ago(time.Hour)))
	e.Ingest(bare.Started("op-1", "http_post", ago(30*time.Minute)))
	// A run.started naming a parent its id does not descend from: no parent.
	e.Ingest(spoof.Event("run/started", kernel.TypeRunStarted, ago(10*time.Minute), kernel.RunStarted{ParentRunID: "k-1"}))
	e.Ingest(reckontest.Run{Project: "zeta", RunID: "z-1", Source: "bot"}.RunStarted(ago(time.Minute)))

	page, err := e.Ops.Runs(ctx, operations.RunsParams{Project: "acme"})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := runIDs(page.Runs), []string{"spoof", "bare-1", "gw-1", "k-1.op-1", "k-1", "a-1"}; !slices.Equal(got, want) || page.NextCursor != "" {
		t.Fatalf("runs = %v (next %q), want %v, newest first", got, page.NextCursor, want)
	}
	byID := map[string]operations.RunSummary{}
	for _, r := range page.Runs {
		byID[r.RunID] = r
	}
	replay := kernel.Replay(agentEvents).Summary()
	a := byID["a-1"]
	if a.Kind != operations.RunKindAgent || a.SourceID != "bot" || a.Status != operations.RunFailed ||
		!a.StartedAt.Equal(ago(5*time.Hour)) || a.EndedAt == nil || !a.EndedAt.Equal(ago(4*time.Hour)) || a.ParentRunID != nil ||
		a.Operations != (operations.RunCounts{Total: replay.Total, Unresolved: replay.Unresolved, Settled: replay.Total - replay.Unresolved}) ||
		a.Operations != (operations.RunCounts{Total: 4, Unresolved: 2, Settled: 2}) {
		t.Errorf("agent run: %+v (replay %+v)", a, replay)
	}
	if r := byID["k-1"]; r.Kind != operations.RunKindKernel || r.Status != operations.RunCompleted || r.ChildRuns != 1 ||
		r.Operations != (operations.RunCounts{Total: 1, Unresolved: 1}) {
		t.Errorf("kernel run: %+v", r)
	}
	if r := byID["k-1.op-1"]; r.Kind != operations.RunKindKernel || r.Status != operations.RunRunning || r.ParentRunID == nil || *r.ParentRunID != "k-1" || r.EndedAt != nil {
		t.Errorf("child run: %+v", r)
	}
	if r := byID["gw-1"]; r.Kind != operations.RunKindGateway || r.SourceID != "mcp-gateway" || r.Status != operations.RunRunning {
		t.Errorf("gateway run: %+v", r)
	}
	if r := byID["bare-1"]; r.Kind != operations.RunKindAgent || r.Status != operations.RunRunning || !r.StartedAt.Equal(ago(30*time.Minute)) ||
		r.Operations != (operations.RunCounts{Total: 1, Unresolved: 1}) {
		t.Errorf("run without run.started: %+v", r)
	}
	if r := byID["spoof"]; r.ParentRunID != nil {
		t.Errorf("a run claims a parent its id does not descend from: %+v", r)
	}

	var walked []string
	cursor := ""
	for pages := 0; ; pages++ {
		p, err := e.Ops.Runs(ctx, operations.RunsParams{Project: "acme", Limit: 2, Cursor: cursor})
		if err != nil || len(p.Runs) > 2 || pages > 3 {
			t.Fatalf("page %d: %+v %v", pages, p, err)
		}
		walked = append(walked, runIDs(p.Runs)...)
		if cursor = p.NextCursor; cursor == "" {
			break
		}
	}
	if !slices.Equal(walked, runIDs(page.Runs)) {
		t.Errorf("pages of 2 walked %v, want %v", walked, runIDs(page.Runs))
	}

	for _, c := range []struct {
		p    operations.RunsParams
		want []string
	}{
		{operations.RunsParams{Status: operations.RunFailed}, []string{"a-1"}},
		{operations.RunsParams{Status: operations.RunCompleted}, []string{"k-1"}},
		{operations.RunsParams{Status: operations.RunRunning, Limit: 3}, []string{"spoof", "bare-1", "gw-1"}},
		{operations.RunsParams{Status: operations.RunAwaiting}, nil},
		{operations.RunsParams{ParentRunID: "k-1"}, []string{"k-1.op-1"}},
		{operations.RunsParams{ParentRunID: "k-1", Status: operations.RunCompleted}, nil},
	} {
		c.p.Project = "acme"
		p, err := e.Ops.Runs(ctx, c.p)
		if err != nil || !slices.Equal(runIDs(p.Runs), c.want) {
			t.Errorf("%+v: %v %v, want %v", c.p, runIDs(p.Runs), err, c.want)
		}
	}
	if s, err := e.Ops.RunSummary(ctx, "acme", "k-1"); err != nil || s == nil || s.ChildRuns != 1 || s.Status != operations.RunCompleted {
		t.Errorf("summary of k-1: %+v %v", s, err)
	}
	if s, err := e.Ops.RunSummary(ctx, "acme", "nope"); err != nil || s != nil {
		t.Errorf("summary of a run the journal does not hold: %+v %v", s, err)
	}

	for _, c := range []struct {
		p     operations.RunsParams
		field string
	}{
		{operations.RunsParams{}, "project"},
		{operations.RunsParams{Project: "acme", Status: "done"}, "status"},
		{operations.RunsParams{Project: "acme", Limit: operations.MaxRunsLimit + 1}, "limit"},
		{operations.RunsParams{Project: "acme", Cursor: "bogus"}, "cursor"},
		{operations.RunsParams{Project: "acme", Cursor: kernel.EncodeCursor("v1:", t0, 1)}, "cursor"},
	} {
		_, err := e.Ops.Runs(ctx, c.p)
		if kernel.ErrorCode(err) != kernel.EInvalid || !containsFold(kernel.ErrorMessage(err), c.field) {
			t.Errorf("%+v: %v, want a 400 naming %s", c.p, err, c.field)
		}
	}
}

func runIDs(runs []operations.RunSummary) []string {
	var out []string
	for _, r := range runs {
		out = append(out, r.RunID)
	}
	return out
}

// TestRunStatusFromLifecycle: a run's status follows its lifecycle
// events, as the journal holds them in whatever order they came: a kernel
// run.awaiting whose operation has no run.resumed makes it awaiting (an
// agent's does not), a run.resumed running again, the newest run.completed
// or run.failed ends it whatever comes after; a run.started that comes
// late still dates the run.
func TestRunStatusFromLifecycle(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	ctx := context.Background()
	w := rawWriter(t, e)
	status := func(run string) operations.RunSummary {
		t.Helper()
		s, err := e.Ops.RunSummary(ctx, "acme", run)
		if err != nil || s == nil {
			t.Fatalf("summary of %s: %+v %v", run, s, err)
		}
		return *s
	}
	k := reckontest.Run{Project: "acme", RunID: "k-1", Source: kernel.SourceKernel}
	e.Ingest(k.RunStarted(ago(time.Hour)), k.Started("op-1", "run_command", ago(time.Hour)))
	steps := []struct {
		typ, source, op, want string
	}{
		{"run.awaiting", kernel.SourceKernel, "op-1", operations.RunAwaiting},
		{"run.awaiting", kernel.SourceKernel, "op-2", operations.RunAwaiting},
		{"run.resumed", kernel.SourceKernel, "op-1", operations.RunAwaiting},
		{"run.resumed", kernel.SourceKernel, "op-2", operations.RunRunning},
		{"run.completed", kernel.SourceKernel, "", operations.RunCompleted},
		{"run.awaiting", kernel.SourceKernel, "op-3", operations.RunCompleted},
		{"run.failed", kernel.SourceKernel, "", operations.RunFailed},
	}
	for i, s := range steps {
		w(ctx, "k-1", s.typ, s.source, s.op, ago(time.Duration(len(steps)-i)*time.Minute))
		if got := status("k-1"); got.Status != s.want {
			t.Fatalf("after %s %s: %s, want %s", s.typ, s.op, got.Status, s.want)
		}
	}
	if got := status("k-1"); got.EndedAt == nil || !got.EndedAt.Equal(ago(time.Minute)) {
		t.Errorf("ended_at = %v, want the newest terminal event's ts", got.EndedAt)
	}

	a := reckontest.Run{Project: "acme", RunID: "a-1", Source: "bot"}
	e.Ingest(a.Started("op-1", "run_command", ago(time.Hour)))
	w(ctx, "a-1", "run.awaiting", "bot", "op-1", ago(50*time.Minute))
	if got := status("a-1"); got.Status != operations.RunRunning {
		t.Errorf("an agent's own run.awaiting: %s, want running", got.Status)
	}
	e.Ingest(a.RunCompleted(ago(40 * time.Minute)))
	e.Ingest(a.RunStarted(ago(2 * time.Hour)))
	if got := status("a-1"); got.Status != operations.RunCompleted || !got.StartedAt.Equal(ago(2*time.Hour)) {
		t.Errorf("a late run.started: %+v, want completed, started at its ts", got)
	}
}

// rawWriter writes a lifecycle event straight into journal_events, as
// every writer's statement does: run.awaiting and run.resumed are events
// of the kernel's own runs, which no API takes from outside.
func rawWriter(t *testing.T, e *env) func(ctx context.Context, run, typ, source, op string, ts time.Time) {
	n := 0
	return func(ctx context.Context, run, typ, source, op string, ts time.Time) {
		t.Helper()
		n++
		if _, err := e.Schema.Pool.Exec(ctx, rawEventSQL, source, run+"/raw/"+string(rune('a'+n)), run, typ, ts, op); err != nil {
			t.Fatalf("write %s: %v", typ, err)
		}
	}
}

const rawEventSQL = `
INSERT INTO journal_events (source_id, event_id, project, run_id, type, ts, actor, data, payload_digest, operation_id)
VALUES ($1, $2, 'acme', $3, $4, $5, 'kernel',
        CASE WHEN $6 = '' THEN '{}'::jsonb ELSE jsonb_build_object('operation_id', $6::text) END, '\x00', nullif($6, ''))`

// TestRunStatusConcurrentWriters: two transactions journal lifecycle
// events of one run at once. The second, held until the first commits,
// reads the run's lifecycle again once it holds the run's row: the run
// ends completed, not awaiting as the second's own snapshot (taken
// before the first committed) would say.
func TestRunStatusConcurrentWriters(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	ctx := context.Background()
	k := reckontest.Run{Project: "acme", RunID: "k-1", Source: kernel.SourceKernel}
	e.Ingest(k.RunStarted(t0.Add(-time.Hour)))
	first, err := e.Schema.Pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = first.Rollback(ctx) }()
	if _, err := first.Exec(ctx, rawEventSQL, kernel.SourceKernel, "k-1/done", "k-1", "run.completed", t0, ""); err != nil {
		t.Fatal(err)
	}
	second, err := e.Schema.Pool.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer second.Release()
	var pid int
	if err := second.QueryRow(ctx, `SELECT pg_backend_pid()`).Scan(&pid); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		_, err := second.Exec(ctx, rawEventSQL, kernel.SourceKernel, "k-1/wait", "k-1", "run.awaiting", t0, "op-1")
		done <- err
	}()
	reckontest.Eventually(t, 10*time.Second, "the second writer waiting for the run's row", func() bool {
		var waiting bool
		_ = e.Schema.Pool.QueryRow(ctx, `SELECT coalesce(wait_event_type = 'Lock', false) FROM pg_stat_activity WHERE pid = $1`, pid).Scan(&waiting)
		return waiting
	})
	if err := first.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if s, err := e.Ops.RunSummary(ctx, "acme", "k-1"); err != nil || s == nil || s.Status != operations.RunCompleted {
		t.Fatalf("status after both commits: %+v %v, want completed", s, err)
	}
}

// TestRunOperations: a run's operations in the order they started, each
// once, in every state: in flight, the listing's unresolved states, and
// settled with the effect and the event that settled it; pages by
// cursor.
func TestRunOperations(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	ctx := context.Background()
	r := reckontest.Run{Project: "acme", RunID: "a-1", Source: "bot"}
	started := r.Started("op-5", "run_command", ago(time.Hour))
	e.Ingest(r.RunStarted(ago(2*time.Hour)),
		r.Started("op-1", "run_command", ago(2*time.Hour)), r.Completed("op-1", ago(2*time.Hour)),
		r.Started("op-2", "http_post", ago(2*time.Hour)), r.Failed("op-2", kernel.EffectUncertain, ago(2*time.Hour)),
		r.Started("op-3", "http_post", ago(2*time.Hour)), r.Blocked("op-3", ago(2*time.Hour)),
		r.Started("op-4", "run_command", ago(time.Hour)),
		started, r.Failed("op-5", kernel.EffectUncertain, ago(time.Hour)),
		r.Ruling("op-5", kernel.EffectUnknown, started.Key(), ago(30*time.Minute)),
		r.Started("op-6", kernel.DelegateTool, ago(time.Minute)),
		r.Event("op-4/started-again", kernel.TypeToolStarted, ago(time.Minute), map[string]any{"operation_id": "op-4", "tool": "run_command"}))
	page, err := e.Ops.RunOperations(ctx, operations.RunOperationsParams{Project: "acme", RunID: "a-1"})
	if err != nil {
		t.Fatal(err)
	}
	type got struct{ op, state, effect, by string }
	var have []got
	for _, o := range page.Operations {
		g := got{o.OperationID, o.State, o.Effect, ""}
		if o.SettledBy != nil {
			g.by = o.SettledBy.Type + "/" + o.SettledBy.Basis
		}
		have = append(have, g)
	}
	want := []got{
		{"op-1", operations.StateSettled, kernel.EffectOccurred, "tool.completed/"},
		{"op-2", operations.StateFailedUncertain, "", ""},
		{"op-3", operations.StateSettled, kernel.EffectNone, "tool.blocked/"},
		{"op-4", operations.StateStaleInFlight, "", ""},
		{"op-5", operations.StateSettled, kernel.EffectUnknown, "operation.reconciled/operator"},
		{"op-6", operations.StateInFlight, "", ""},
	}
	if !slices.Equal(have, want) || page.NextCursor != "" {
		t.Fatalf("operations:\n got %v\nwant %v (next %q)", have, want, page.NextCursor)
	}
	if o := page.Operations[4]; o.Failure == nil || o.FailureKey == nil || o.SettledBy.Actor != "operator:ann" {
		t.Errorf("a settled operation keeps its failure and says who settled it: %+v", o)
	}
	if o := page.Operations[5]; o.ChildRunID != "a-1.op-6" || o.ChildSummary == nil {
		t.Errorf("a delegation names its child run and counts it: %+v", o)
	}

	var walked []string
	cursor := ""
	for {
		p, err := e.Ops.RunOperations(ctx, operations.RunOperationsParams{Project: "acme", RunID: "a-1", Limit: 4, Cursor: cursor})
		if err != nil {
			t.Fatal(err)
		}
		for _, o := range p.Operations {
			walked = append(walked, o.OperationID)
		}
		if cursor = p.NextCursor; cursor == "" {
			break
		}
	}
	if want := []string{"op-1", "op-2", "op-3", "op-4", "op-5", "op-6"}; !slices.Equal(walked, want) {
		t.Errorf("pages of 4: %v, want %v", walked, want)
	}
	for _, p := range []operations.RunOperationsParams{
		{RunID: "a-1"}, {Project: "acme"}, {Project: "acme", RunID: "a-1", Cursor: "bogus"},
		{Project: "acme", RunID: "a-1", Limit: operations.MaxLimit + 1},
	} {
		if _, err := e.Ops.RunOperations(ctx, p); kernel.ErrorCode(err) != kernel.EInvalid {
			t.Errorf("%+v: %v, want invalid", p, err)
		}
	}
	if p, err := e.Ops.RunOperations(ctx, operations.RunOperationsParams{Project: "acme", RunID: "nope"}); err != nil || len(p.Operations) != 0 {
		t.Errorf("a run without operations: %+v %v", p, err)
	}
}

func containsFold(s, sub string) bool {
	return strings.Contains(strings.ToLower(s), strings.ToLower(sub))
}
