// Package reckontest is the tests' shared bundle: Setup gives a test its
// own migrated PostgreSQL schema (internal/pgtest) with the real journal,
// an outbox publisher, the operations service and a movable clock, all
// torn down in t.Cleanup; helpers ingest events, build them, wait for
// delivery and wait for conditions instead of sleeping.
//
// It imports the kernel's storage and read side (journal, outbox,
// operations) and nothing above them, so the tests of the workflow, the
// triage pipeline, the HTTP API and the binary can all use it.
package reckontest

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"go.uber.org/goleak"

	"github.com/seed-7bc021c3/reckon/internal/pgtest"
	"github.com/seed-7bc021c3/reckon/kernel"
	"github.com/seed-7bc021c3/reckon/kernel/journal"
	"github.com/seed-7bc021c3/reckon/kernel/operations"
	"github.com/seed-7bc021c3/reckon/kernel/outbox"
)

// T0 is the bundle clock's default start: tests place events relative to
// it, so the same test sees the same times every run.
var T0 = time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)

// Clock is an injectable, movable clock.
type Clock struct {
	mu sync.Mutex
	t  time.Time
}

// NewClock returns a clock standing at t.
func NewClock(t time.Time) *Clock { return &Clock{t: t} }

// Now returns the clock's time.
func (c *Clock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }

// Set moves the clock to t.
func (c *Clock) Set(t time.Time) { c.mu.Lock(); c.t = t; c.mu.Unlock() }

// Advance moves the clock by d.
func (c *Clock) Advance(d time.Duration) { c.mu.Lock(); c.t = c.t.Add(d); c.mu.Unlock() }

// Config tunes Setup. The zero value is a bundle on the movable clock at
// T0, with the operations service reading liveness from the journal and
// no publisher running (Drain delivers on demand).
type Config struct {
	// Operations configures the operations service; its Now defaults to
	// the bundle's clock.
	Operations operations.Config
	// RealClock puts the operations service on time.Now instead of the
	// movable clock (tests whose events come from a live workflow).
	RealClock bool
	// Publish starts the publisher in the background (stopped in
	// Cleanup), polling every Outbox.PollInterval (default 20ms here).
	Publish bool
	Outbox  outbox.Config
}

// Bundle is one test's reckon: its schema, the journal, the publisher, the
// operations service and the clock.
type Bundle struct {
	T         testing.TB
	Ctx       context.Context
	Schema    *pgtest.Schema
	Journal   *journal.Store
	Publisher *outbox.Publisher
	Ops       *operations.Service
	Clock     *Clock
}

// Setup builds a test's bundle; everything it starts stops in t.Cleanup.
func Setup(t testing.TB, cfg ...Config) *Bundle {
	t.Helper()
	var c Config
	if len(cfg) > 0 {
		c = cfg[0]
	}
	s := pgtest.New(t)
	j := journal.New(s.Pool, nil)
	if c.Outbox.PollInterval == 0 {
		c.Outbox.PollInterval = 20 * time.Millisecond
	}
	b := &Bundle{T: t, Ctx: context.Background(), Schema: s, Journal: j, Clock: NewClock(T0),
		Publisher: outbox.NewPublisher(s.Pool, j, c.Outbox, nil, zerolog.Nop())}
	if c.Operations.Now == nil && !c.RealClock {
		c.Operations.Now = b.Clock.Now
	}
	b.Ops = operations.New(s.Pool, c.Operations)
	if c.Publish {
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() { defer close(done); _ = b.Publisher.Run(ctx) }()
		t.Cleanup(func() { cancel(); <-done })
	}
	return b
}

// Ingest writes events straight into the journal, as POST /v1/events does,
// and fails the test unless every one is accepted.
func (b *Bundle) Ingest(evs ...kernel.Event) {
	b.T.Helper()
	res, err := b.Journal.Ingest(b.Ctx, evs)
	if err != nil {
		b.T.Fatalf("ingest: %v", err)
	}
	for _, r := range res {
		if r.Status != kernel.StatusAccepted {
			b.T.Fatalf("ingest %s/%s: %s %s", r.SourceID, r.EventID, r.Status, r.Reason)
		}
	}
}

// Drain delivers every due outbox row to the journal now.
func (b *Bundle) Drain() {
	b.T.Helper()
	if err := b.Publisher.Drain(b.Ctx); err != nil {
		b.T.Fatalf("drain outbox: %v", err)
	}
}

// WaitDelivered waits (up to 30s) until every outbox row of the run has
// reached the journal; a running publisher (Config.Publish) delivers them.
func (b *Bundle) WaitDelivered(project, runID string) {
	b.T.Helper()
	ctx, cancel := context.WithTimeout(b.Ctx, 30*time.Second)
	defer cancel()
	if err := outbox.WaitDelivered(ctx, b.Schema.Pool, project, runID, 10*time.Millisecond); err != nil {
		b.T.Fatal(err)
	}
}

// RunEvents returns a run's journal events in journal order.
func (b *Bundle) RunEvents(project, runID string) []kernel.Event {
	b.T.Helper()
	stored, err := b.Journal.RunEvents(b.Ctx, project, runID)
	if err != nil {
		b.T.Fatal(err)
	}
	out := make([]kernel.Event, len(stored))
	for i, e := range stored {
		out[i] = e.Event
	}
	return out
}

// Eventually polls cond every 10ms until it holds, failing the test with
// what after timeout: a condition wait, never a fixed sleep.
func Eventually(t testing.TB, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	if !Poll(timeout, cond) {
		t.Fatalf("timed out after %s waiting for %s", timeout, what)
	}
}

// Poll is Eventually without a test to fail, for a goroutine of the test
// (which may not call t.Fatal): it polls cond every 10ms and reports
// whether it held before timeout.
func Poll(timeout time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(10 * time.Millisecond)
	}
	return true
}

// Run builds events of one run under one source, with ids
// <run>/<suffix>; the actor is kernel under the kernel's source, agent
// otherwise.
type Run struct {
	Project, RunID, Source string
}

// Event builds one event of the run with data marshalled from data.
func (r Run) Event(id, typ string, ts time.Time, data any) kernel.Event {
	raw, err := json.Marshal(data)
	if err != nil {
		panic(fmt.Sprintf("reckontest: marshal %s data: %v", typ, err))
	}
	actor := kernel.ActorAgent
	if r.Source == kernel.SourceKernel {
		actor = kernel.ActorKernel
	}
	return kernel.Event{SourceID: r.Source, EventID: r.RunID + "/" + id, Project: r.Project, RunID: r.RunID,
		Type: typ, TS: ts.UTC(), Actor: actor, Data: raw}
}

// RunStarted is the run's run.started.
func (r Run) RunStarted(ts time.Time) kernel.Event {
	return r.Event("run/started", kernel.TypeRunStarted, ts, map[string]any{})
}

// RunCompleted is the run's run.completed.
func (r Run) RunCompleted(ts time.Time) kernel.Event {
	return r.Event("run/completed", kernel.TypeRunCompleted, ts, map[string]any{})
}

// RunFailed is the run's run.failed.
func (r Run) RunFailed(ts time.Time) kernel.Event {
	return r.Event("run/failed", kernel.TypeRunFailed, ts, kernel.RunFailed{Error: "boom"})
}

// Started is tool.started of op with a run_command-like args object.
func (r Run) Started(op, tool string, ts time.Time) kernel.Event {
	return r.Event(op+"/started", kernel.TypeToolStarted, ts, map[string]any{
		"operation_id": op, "tool": tool, "args": map[string]any{"command": "echo ok > proof.txt"}})
}

// Completed is tool.completed of op.
func (r Run) Completed(op string, ts time.Time) kernel.Event {
	return r.Event(op+"/completed", kernel.TypeToolCompleted, ts, kernel.ToolCompleted{OperationID: op})
}

// Blocked is tool.blocked of op.
func (r Run) Blocked(op string, ts time.Time) kernel.Event {
	return r.Event(op+"/blocked", kernel.TypeToolBlocked, ts, kernel.ToolBlocked{OperationID: op, Reason: "policy"})
}

// Failed is tool.failed of op with effect ("" leaves it out: the legacy
// failure).
func (r Run) Failed(op, effect string, ts time.Time) kernel.Event {
	return r.Event(op+"/failed", kernel.TypeToolFailed, ts, kernel.ToolFailed{
		OperationID: op, ErrorType: kernel.ErrorTypeActivityFailed, Error: "worker lost", Effect: effect})
}

// Ruling is an operator's ruling on op under the kernel's source, as the
// reconcile path writes it (for journals built by hand).
func (r Run) Ruling(op, effect string, parent kernel.EventKey, ts time.Time) kernel.Event {
	raw, _ := json.Marshal(kernel.Reconciliation{OperationID: op, Effect: effect, Note: "checked", Basis: kernel.BasisOperator})
	return kernel.Event{SourceID: kernel.SourceKernel, EventID: r.RunID + "/" + op + "/reconciled/manual",
		Project: r.Project, RunID: r.RunID, Type: kernel.TypeOperationReconciled, TS: ts.UTC(),
		Actor: kernel.OperatorActor("ann"), ParentEventID: &parent, Data: raw}
}

// List returns every listed item of project (all pages) keyed by
// run/operation, and whether any page was degraded; an operation listed
// twice fails the test.
func (b *Bundle) List(project string) (map[string]operations.Item, bool) {
	b.T.Helper()
	out := map[string]operations.Item{}
	degraded := false
	cursor := ""
	for {
		p, err := b.Ops.List(b.Ctx, operations.ListParams{Project: project, Cursor: cursor})
		if err != nil {
			b.T.Fatalf("list %s: %v", project, err)
		}
		degraded = degraded || p.Degraded
		for _, it := range p.Operations {
			k := it.RunID + "/" + it.OperationID
			if _, dup := out[k]; dup {
				b.T.Fatalf("operation %s listed twice", k)
			}
			out[k] = it
		}
		if p.NextCursor == "" {
			return out, degraded
		}
		cursor = p.NextCursor
	}
}

// Main runs a package's tests and then fails them if goroutines the tests
// started are still running (goleak): a publisher, sweeper, listener or
// liveness call the package forgot to stop. Use it as TestMain in every
// package whose code starts goroutines; packages that start the embedded
// Temporal server pass TemporalLeaks().
func Main(m goleak.TestingM, opts ...goleak.Option) {
	goleak.VerifyTestMain(m, append(leakIgnores, opts...)...)
}

// FindLeaks is Main's check for a TestMain that has more to do after the
// tests ran (closing a shared server first).
func FindLeaks(opts ...goleak.Option) error {
	return goleak.Find(append(leakIgnores, opts...)...)
}

// leakIgnores are goroutines that outlive their callers by design: idle
// connection readers between tests, the sandbox's launcher.
var leakIgnores = []goleak.Option{
	goleak.IgnoreTopFunction("internal/poll.runtime_pollWait"),
	goleak.IgnoreAnyFunction("net/http.(*persistConn).writeLoop"),
	goleak.IgnoreAnyFunction("net/http.(*persistConn).readLoop"),
	// The sandbox's launcher thread, kept for the life of the process.
	goleak.IgnoreAnyFunction("github.com/seed-7bc021c3/reckon/tool/sandbox.launch"),
}

// embeddedTemporalFrames are what the embedded Temporal server (and the
// SDK workers of its own system namespace) leave running after Stop: their
// pollers, gRPC callback serializers, ringpop timers, its SQLite pool and
// metrics ticker; and the coroutines of workflows the SDK keeps in its
// process-wide sticky cache (purged only when no worker of the process
// runs); and a workflow task that was waiting for a local activity (the
// run workflow's RecordEvent) when its worker stopped, which the SDK lets
// run out until its heartbeat deadline (at most 80 % of the workflow task
// timeout), with the worker's Stop waiting on it; and the server's own
// task-queue scavenger (a system-namespace activity that sleeps 10 s
// between passes, its run loop waiting for its executor, the executor's
// workers and the SDK's heartbeat goroutine for it), which a test running
// long enough catches mid-pass at Stop. None of them is reckon's;
// reckon's own workers are stopped before the server.
var embeddedTemporalFrames = []string{
	"go.temporal.io/sdk/internal.(*workflowTaskHandlerImpl).ProcessWorkflowTask",
	"go.temporal.io/sdk/internal.awaitWaitGroup.func1",
	"go.temporal.io/sdk/internal.(*baseWorker).runPoller",
	"go.temporal.io/sdk/internal.(*baseWorker).runTaskDispatcher",
	"go.temporal.io/sdk/internal.(*baseWorker).runEagerTaskDispatcher",
	"go.temporal.io/sdk/internal.(*baseWorker).Start.func2",
	"go.temporal.io/sdk/internal.(*sharedNamespaceWorker).run",
	"google.golang.org/grpc/internal/grpcsync.(*CallbackSerializer).run",
	"google.golang.org/grpc.(*addrConn).connect",
	"google.golang.org/grpc.(*addrConn).resetTransportAndUnlock",
	// A transport the connection above was establishing when the server
	// stopped: its keepalive and handshake waiters end with it.
	"google.golang.org/grpc/internal/transport.(*http2Client).keepalive",
	"google.golang.org/grpc/internal/transport.NewHTTP2Client.func4",
	"github.com/temporalio/ringpop-go.(*Ringpop).startTimers.func1",
	"github.com/temporalio/ringpop-go.(*Ringpop).startTimers.func2",
	"go.temporal.io/server/common/membership/ringpop.(*monitor).startHeartbeatUpsertLoop.func1",
	"database/sql.(*DB).connectionOpener",
	"github.com/rcrowley/go-metrics.(*meterArbiter).tick",
	"go.temporal.io/sdk/internal.(*coroutineState).initialYield",
	"go.temporal.io/server/service/worker/scanner.TaskQueueScavengerActivity",
	"go.temporal.io/server/service/worker/scanner/taskqueue.(*Scavenger).run",
	"go.temporal.io/server/service/worker/scanner/executor.(*fixedPoolExecutor).worker",
	"go.temporal.io/sdk/internal.(*temporalInvoker).Heartbeat.func1",
}

// TemporalLeaks are the goleak options of a package that starts the
// embedded Temporal server.
func TemporalLeaks() []goleak.Option {
	out := make([]goleak.Option, len(embeddedTemporalFrames))
	for i, f := range embeddedTemporalFrames {
		out[i] = goleak.IgnoreAnyFunction(f)
	}
	return out
}
