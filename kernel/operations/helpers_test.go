package operations_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/seed-7bc021c3/reckon/internal/reckontest"
	"github.com/seed-7bc021c3/reckon/kernel"
	"github.com/seed-7bc021c3/reckon/kernel/operations"
)

// t0 is "now" in most tests (the bundle clock's start); events are placed
// relative to it.
var t0 = reckontest.T0

// env is one test's bundle: schema, journal, publisher, the operations
// service on the bundle's clock.
type env = reckontest.Bundle

func newEnv(t *testing.T, live operations.Liveness) *env {
	t.Helper()
	return reckontest.Setup(t, reckontest.Config{Operations: operations.Config{
		Window: 168 * time.Hour, StaleAfter: 10 * time.Minute, Liveness: live,
	}})
}

// ruling is an operator's ruling under the kernel's source, as the
// reconcile path writes it (used to build journals by hand).
func ruling(project, run, op, effect string, parent kernel.EventKey, ts time.Time) kernel.Event {
	return reckontest.Run{Project: project, RunID: run, Source: kernel.SourceKernel}.Ruling(op, effect, parent, ts)
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
