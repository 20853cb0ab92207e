package operations_test

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/seed-7bc021c3/reckon/internal/pgtest"
	"github.com/seed-7bc021c3/reckon/kernel"
	"github.com/seed-7bc021c3/reckon/kernel/journal"
	"github.com/seed-7bc021c3/reckon/kernel/operations"
	"github.com/seed-7bc021c3/reckon/kernel/outbox"
)

// t0 is "now" in most tests; events are placed relative to it.
var t0 = time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)

// clock is an injectable, movable clock.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) Now() time.Time  { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *clock) Set(t time.Time) { c.mu.Lock(); c.t = t; c.mu.Unlock() }

// env is one test's database, journal, publisher and service.
type env struct {
	t     *testing.T
	ctx   context.Context
	s     *pgtest.Schema
	j     *journal.Store
	pub   *outbox.Publisher
	clock *clock
	svc   *operations.Service
}

func newEnv(t *testing.T, live operations.Liveness) *env {
	t.Helper()
	s := pgtest.New(t)
	j := journal.New(s.Pool, nil)
	c := &clock{t: t0}
	e := &env{t: t, ctx: context.Background(), s: s, j: j, clock: c,
		pub: outbox.NewPublisher(s.Pool, j, outbox.Config{}, nil, zerolog.Nop())}
	e.svc = operations.New(s.Pool, operations.Options{
		Window: 168 * time.Hour, StaleAfter: 10 * time.Minute, Liveness: live, Now: c.Now,
	})
	return e
}

// ingest writes events straight into the journal, as POST /v1/events does.
func (e *env) ingest(evs ...kernel.Event) {
	e.t.Helper()
	res, err := e.j.Ingest(e.ctx, evs)
	if err != nil {
		e.t.Fatalf("ingest: %v", err)
	}
	for _, r := range res {
		if r.Status != kernel.StatusAccepted {
			e.t.Fatalf("ingest %s/%s: %s %s", r.SourceID, r.EventID, r.Status, r.Reason)
		}
	}
}

func (e *env) drain() {
	e.t.Helper()
	if err := e.pub.Drain(e.ctx); err != nil {
		e.t.Fatalf("drain outbox: %v", err)
	}
}

// list returns every listed item of project (all pages), keyed by run/op.
func (e *env) list(project string) (map[string]operations.Item, bool) {
	e.t.Helper()
	out := map[string]operations.Item{}
	degraded := false
	cursor := ""
	for {
		p, err := e.svc.List(e.ctx, operations.ListParams{Project: project, Cursor: cursor})
		if err != nil {
			e.t.Fatalf("list %s: %v", project, err)
		}
		degraded = degraded || p.Degraded
		for _, it := range p.Operations {
			k := it.RunID + "/" + it.OperationID
			if _, dup := out[k]; dup {
				e.t.Fatalf("operation %s listed twice", k)
			}
			out[k] = it
		}
		if p.NextCursor == "" {
			return out, degraded
		}
		cursor = p.NextCursor
	}
}

// evb builds events of one project/run with a given source.
type evb struct {
	project, run, source string
}

func (b evb) ev(id, typ string, ts time.Time, data any) kernel.Event {
	raw, err := json.Marshal(data)
	if err != nil {
		panic(err)
	}
	actor := "agent"
	if b.source == kernel.SourceKernel {
		actor = "kernel"
	}
	return kernel.Event{SourceID: b.source, EventID: b.run + "/" + id, Project: b.project, RunID: b.run,
		Type: typ, TS: ts.UTC(), Actor: actor, Data: raw}
}

func (b evb) runStarted(ts time.Time) kernel.Event {
	return b.ev("run/started", kernel.TypeRunStarted, ts, map[string]any{})
}

func (b evb) runCompleted(ts time.Time) kernel.Event {
	return b.ev("run/completed", kernel.TypeRunCompleted, ts, map[string]any{})
}

func (b evb) runFailed(ts time.Time) kernel.Event {
	return b.ev("run/failed", kernel.TypeRunFailed, ts, map[string]any{"error": "boom"})
}

func (b evb) started(op, tool string, ts time.Time) kernel.Event {
	return b.ev(op+"/started", kernel.TypeToolStarted, ts, map[string]any{
		"operation_id": op, "tool": tool, "args": map[string]any{"command": "echo ok > proof.txt"}})
}

func (b evb) completed(op string, ts time.Time) kernel.Event {
	return b.ev(op+"/completed", kernel.TypeToolCompleted, ts, map[string]any{"operation_id": op})
}

func (b evb) blocked(op string, ts time.Time) kernel.Event {
	return b.ev(op+"/blocked", kernel.TypeToolBlocked, ts, map[string]any{"operation_id": op, "reason": "policy"})
}

func (b evb) failed(op, effect string, ts time.Time) kernel.Event {
	d := map[string]any{"operation_id": op, "error_type": "activity_failed", "error": "worker lost"}
	if effect != "" {
		d["effect"] = effect
	}
	return b.ev(op+"/failed", kernel.TypeToolFailed, ts, d)
}

// reconciledEv is an operation.reconciled under the kernel's source, as
// written by the reconcile path (used to build journals by hand).
func reconciledEv(project, run, op, effect string, parent kernel.EventKey, ts time.Time) kernel.Event {
	raw, _ := json.Marshal(map[string]any{"operation_id": op, "effect": effect, "note": "checked", "basis": "operator"})
	return kernel.Event{SourceID: kernel.SourceKernel, EventID: fmt.Sprintf("%s/%s/reconciled/manual", run, op),
		Project: project, RunID: run, Type: kernel.TypeOperationReconciled, TS: ts.UTC(), Actor: "operator:ann",
		ParentEventID: &parent, Data: raw}
}

// fakeLiveness answers from a map; runs in errs fail.
type fakeLiveness struct {
	mu      sync.Mutex
	running map[string]bool
	errs    map[string]bool
	failAll bool
	calls   int
	asked   map[string]int
}

func (f *fakeLiveness) Running(_ context.Context, project, runID string) (bool, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls++
	if f.asked == nil {
		f.asked = map[string]int{}
	}
	f.asked[runID]++
	if f.failAll || f.errs[runID] {
		return false, fmt.Errorf("temporal unavailable")
	}
	return f.running[runID], nil
}

func intp(n int) *int { return &n }
