package operations_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/api/workflow/v1"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/worker"
	sdkworkflow "go.temporal.io/sdk/workflow"

	"github.com/seed-7bc021c3/reckon/internal/reckontest"
	"github.com/seed-7bc021c3/reckon/kernel"
	"github.com/seed-7bc021c3/reckon/kernel/operations"
	"github.com/seed-7bc021c3/reckon/platform/temporalx"
)

// describeClient is a Temporal client whose DescribeWorkflowExecution
// answers from a table; every other method is absent.
type describeClient struct {
	client.Client
	mu     sync.Mutex
	status map[string]enums.WorkflowExecutionStatus
	errs   map[string]error
	block  bool
	calls  map[string]int
}

func (c *describeClient) DescribeWorkflowExecution(ctx context.Context, id, _ string) (*workflowservice.DescribeWorkflowExecutionResponse, error) {
	c.mu.Lock()
	c.calls[id]++
	st, ok := c.status[id]
	err := c.errs[id]
	block := c.block
	c.mu.Unlock()
	if block {
		<-ctx.Done()
		return nil, ctx.Err()
	}
	if err != nil {
		return nil, err
	}
	if !ok {
		return nil, serviceerror.NewNotFound("workflow not found")
	}
	return &workflowservice.DescribeWorkflowExecutionResponse{
		WorkflowExecutionInfo: &workflow.WorkflowExecutionInfo{Status: st},
	}, nil
}

func TestTemporalLivenessCacheAndErrors(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	fc := &describeClient{
		status: map[string]enums.WorkflowExecutionStatus{
			"reckon/acme/r-run":  enums.WORKFLOW_EXECUTION_STATUS_RUNNING,
			"reckon/acme/r-done": enums.WORKFLOW_EXECUTION_STATUS_COMPLETED,
			"reckon/acme/r-term": enums.WORKFLOW_EXECUTION_STATUS_TERMINATED,
		},
		errs:  map[string]error{"reckon/acme/r-down": serviceerror.NewUnavailable("connection refused")},
		calls: map[string]int{},
	}
	c := reckontest.NewClock(t0)
	l := operations.NewTemporalLiveness(fc, operations.WithCacheTTL(2*time.Second), operations.WithClock(c.Now))
	for _, tc := range []struct {
		run     string
		running bool
		err     bool
	}{
		{"r-run", true, false}, {"r-done", false, false}, {"r-term", false, false},
		{"r-missing", false, false}, // NotFound: not running
		{"r-down", false, true},
	} {
		got, err := l.Running(ctx, "acme", tc.run)
		if got != tc.running || (err != nil) != tc.err {
			t.Errorf("%s: running=%v err=%v, want running=%v err=%v", tc.run, got, err, tc.running, tc.err)
		}
	}
	// Cached answers within the TTL; errors are never cached.
	_, _ = l.Running(ctx, "acme", "r-run")
	_, _ = l.Running(ctx, "acme", "r-down")
	if fc.calls["reckon/acme/r-run"] != 1 || fc.calls["reckon/acme/r-down"] != 2 {
		t.Fatalf("calls %v", fc.calls)
	}
	c.Set(t0.Add(3 * time.Second))
	_, _ = l.Running(ctx, "acme", "r-run")
	if fc.calls["reckon/acme/r-run"] != 2 {
		t.Fatalf("cache did not expire: %v", fc.calls)
	}
	// A hanging Temporal costs one call timeout, then an error.
	fc.block = true
	slow := operations.NewTemporalLiveness(fc, operations.WithCallTimeout(50*time.Millisecond))
	start := time.Now()
	if _, err := slow.Running(ctx, "acme", "r-new"); err == nil || time.Since(start) > 2*time.Second {
		t.Fatalf("hanging describe: %v after %v", err, time.Since(start))
	}
}

// waitForFinish is a kernel-run stand-in: it runs until signalled.
func waitForFinish(ctx sdkworkflow.Context) error {
	sdkworkflow.GetSignalChannel(ctx, "finish").Receive(ctx, nil)
	return nil
}

// TestTemporalLivenessRealServer lists operations of kernel runs with
// liveness from a real (embedded) Temporal server: running → stale, ended →
// crash_window, server gone → degraded listing, never an error.
func TestTemporalLivenessRealServer(t *testing.T) {
	t.Parallel()
	conn, err := temporalx.Connect(context.Background(), temporalx.Config{Namespace: "reckon-ops-test", Log: zerolog.Nop()})
	if err != nil {
		t.Fatal(err)
	}
	closed := false
	defer func() {
		if !closed {
			conn.Close()
		}
	}()
	w := worker.New(conn.Client, "ops-liveness", worker.Options{})
	w.RegisterWorkflow(waitForFinish)
	if err := w.Start(); err != nil {
		t.Fatal(err)
	}
	stopped := false
	defer func() {
		if !stopped {
			w.Stop()
		}
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	wr, err := conn.Client.ExecuteWorkflow(ctx, client.StartWorkflowOptions{
		ID: kernel.WorkflowID("acme", "run-live"), TaskQueue: "ops-liveness"}, waitForFinish)
	if err != nil {
		t.Fatal(err)
	}

	live := operations.NewTemporalLiveness(conn.Client, operations.WithCacheTTL(0), operations.WithCallTimeout(time.Second))
	if ok, err := live.Running(ctx, "acme", "run-live"); !ok || err != nil {
		t.Fatalf("running workflow: %v %v", ok, err)
	}
	if ok, err := live.Running(ctx, "acme", "never-started"); ok || err != nil {
		t.Fatalf("unknown workflow: %v %v", ok, err)
	}

	e := newEnv(t, live)
	b := reckontest.Run{Project: "acme", RunID: "run-live", Source: kernel.SourceKernel}
	e.Ingest(b.RunStarted(ago(time.Hour)), b.Started("op-1", "run_command", ago(30*time.Minute)))
	state := func() (string, bool) {
		p, err := e.Ops.List(ctx, operations.ListParams{Project: "acme"})
		if err != nil {
			t.Fatalf("listing: %v", err)
		}
		if len(p.Operations) != 1 {
			t.Fatalf("listing: %+v", p)
		}
		return p.Operations[0].State, p.Degraded
	}
	if st, deg := state(); st != operations.StateStaleInFlight || deg {
		t.Fatalf("running workflow: %s degraded=%v", st, deg)
	}
	if err := conn.Client.SignalWorkflow(ctx, wr.GetID(), "", "finish", nil); err != nil {
		t.Fatal(err)
	}
	if err := wr.Get(ctx, nil); err != nil {
		t.Fatal(err)
	}
	if st, deg := state(); st != operations.StateCrashWindow || deg {
		t.Fatalf("ended workflow: %s degraded=%v", st, deg)
	}

	// Temporal goes away: the listing degrades, it does not fail.
	w.Stop()
	stopped = true
	conn.Close()
	closed = true
	p, err := e.Ops.List(ctx, operations.ListParams{Project: "acme"})
	if err != nil {
		t.Fatalf("listing during a Temporal outage: %v", err)
	}
	if !p.Degraded || len(p.Operations) != 1 || !p.Operations[0].LivenessUnknown || p.Operations[0].State != operations.StateStaleInFlight {
		t.Fatalf("outage listing: %+v", p)
	}
}
