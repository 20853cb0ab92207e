package runner

import (
	"context"
	"sync"
	"testing"
	"time"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"
)

// bareActivities is the reference for the tool-call overhead: a no-op
// activity that notes when it ran, nothing else.
type bareActivities struct {
	mu  sync.Mutex
	ran []time.Time
}

func (a *bareActivities) Noop(context.Context) error {
	a.mu.Lock()
	a.ran = append(a.ran, time.Now())
	a.mu.Unlock()
	return nil
}

// bareWorkflow runs n no-op activities one after another with the options
// RunTool gets (one attempt), and nothing else: what any Temporal workflow
// pays per activity on this server.
func bareWorkflow(ctx workflow.Context, n int) error {
	actx := workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		StartToCloseTimeout: time.Minute,
		RetryPolicy:         &temporal.RetryPolicy{MaximumAttempts: 1},
	})
	for range n {
		if err := workflow.ExecuteActivity(actx, "bench.noop").Get(ctx, nil); err != nil {
			return err
		}
	}
	return nil
}

// bareActivityIntervals runs bareWorkflow with steps activities on the
// package's embedded Temporal server, on a worker of its own configured as
// the kernel's, and returns the intervals between consecutive executions.
func bareActivityIntervals(b *testing.B, steps int) []time.Duration {
	b.Helper()
	acts := &bareActivities{}
	queue := randID("bare-")
	w := worker.New(temporalConn.Client, queue, worker.Options{
		MaxHeartbeatThrottleInterval: maxHeartbeatThrottle,
		StickyScheduleToStartTimeout: stickyScheduleToStart,
	})
	w.RegisterWorkflowWithOptions(bareWorkflow, workflow.RegisterOptions{Name: "bench.bare"})
	w.RegisterActivityWithOptions(acts.Noop, activity.RegisterOptions{Name: "bench.noop"})
	if err := w.Start(); err != nil {
		b.Fatal(err)
	}
	defer w.Stop()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	run, err := temporalConn.Client.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: randID("bare-"), TaskQueue: queue}, "bench.bare", steps)
	if err != nil {
		b.Fatal(err)
	}
	if err := run.Get(ctx, nil); err != nil {
		b.Fatal(err)
	}
	var out []time.Duration
	for i := 1; i < len(acts.ran); i++ {
		out = append(out, acts.ran[i].Sub(acts.ran[i-1]))
	}
	return out
}
