package operations

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/client"

	"github.com/seed-7bc021c3/reckon/kernel"
)

// Liveness answers whether a run is still running. An error means the
// answer is unknown (the listing then degrades visibly, it never fails).
type Liveness interface {
	Running(ctx context.Context, project, runID string) (bool, error)
}

// TemporalLiveness asks Temporal about the kernel's own runs with
// DescribeWorkflowExecution. Answers are cached briefly so that UI polls do
// not turn into one Temporal call per operation; errors are never cached.
type TemporalLiveness struct {
	c       client.Client
	ttl     time.Duration
	timeout time.Duration
	now     func() time.Time

	mu    sync.Mutex
	cache map[string]livenessEntry
}

type livenessEntry struct {
	running bool
	at      time.Time
}

// TemporalOption tunes a TemporalLiveness.
type TemporalOption func(*TemporalLiveness)

// WithCacheTTL sets how long an answer is reused (default 2s).
func WithCacheTTL(d time.Duration) TemporalOption { return func(l *TemporalLiveness) { l.ttl = d } }

// WithCallTimeout bounds one DescribeWorkflowExecution call (default 2s), so
// an unreachable Temporal slows a listing by at most this much per run.
func WithCallTimeout(d time.Duration) TemporalOption {
	return func(l *TemporalLiveness) { l.timeout = d }
}

// WithClock injects the clock used for cache expiry.
func WithClock(now func() time.Time) TemporalOption { return func(l *TemporalLiveness) { l.now = now } }

// NewTemporalLiveness returns a Liveness over the Temporal client c.
func NewTemporalLiveness(c client.Client, opts ...TemporalOption) *TemporalLiveness {
	l := &TemporalLiveness{c: c, ttl: 2 * time.Second, timeout: 2 * time.Second, now: time.Now, cache: map[string]livenessEntry{}}
	for _, o := range opts {
		o(l)
	}
	return l
}

// Running reports whether the run's workflow is running. A workflow Temporal
// does not know (NotFound) is not running.
func (l *TemporalLiveness) Running(ctx context.Context, project, runID string) (bool, error) {
	id := kernel.WorkflowID(project, runID)
	now := l.now()
	l.mu.Lock()
	if e, ok := l.cache[id]; ok && now.Sub(e.at) < l.ttl {
		l.mu.Unlock()
		return e.running, nil
	}
	l.mu.Unlock()

	cctx, cancel := context.WithTimeout(ctx, l.timeout)
	defer cancel()
	resp, err := l.c.DescribeWorkflowExecution(cctx, id, "")
	var running bool
	switch {
	case err == nil:
		running = resp.GetWorkflowExecutionInfo().GetStatus() == enums.WORKFLOW_EXECUTION_STATUS_RUNNING
	case isNotFound(err):
		running = false
	default:
		return false, fmt.Errorf("describe workflow %s: %w", id, err)
	}
	l.mu.Lock()
	if len(l.cache) > 10000 {
		// Bounded memory: dropping the cache only costs extra calls.
		l.cache = map[string]livenessEntry{}
	}
	l.cache[id] = livenessEntry{running: running, at: now}
	l.mu.Unlock()
	return running, nil
}

func isNotFound(err error) bool {
	var nf *serviceerror.NotFound
	return errors.As(err, &nf)
}
