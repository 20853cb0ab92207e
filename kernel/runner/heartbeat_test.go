package runner

import (
	"context"
	"encoding/json"
	"sync/atomic"
	"testing"
	"time"

	"github.com/seed-7bc021c3/reckon/kernel"
)

// slowPriorTool reads its prior state for longer than a heartbeat timeout
// (an MCP server slow to start), then executes.
type slowPriorTool struct {
	read     time.Duration
	executed atomic.Int32
}

func (s *slowPriorTool) Name() string                   { return "slow_prior" }
func (s *slowPriorTool) Validate(kernel.ToolCall) error { return nil }
func (s *slowPriorTool) ReadPrior(ctx context.Context, _ kernel.ToolCall) (json.RawMessage, bool, error) {
	select {
	case <-time.After(s.read):
	case <-ctx.Done():
	}
	return json.RawMessage(`{}`), true, nil
}

func (s *slowPriorTool) Execute(context.Context, kernel.ToolCall) (kernel.ToolResult, error) {
	s.executed.Add(1)
	return kernel.ToolResult{Summary: "done"}, nil
}

// The worker heartbeats for the whole tool call, the prior-state read
// before the effect included: a live worker whose read takes longer than
// the heartbeat timeout was judged dead, its operation recorded
// tool.failed(uncertain) and the run ended, while the worker went on and
// executed the call anyway.
func TestHeartbeatCoversThePriorRead(t *testing.T) {
	t.Parallel()
	tool := &slowPriorTool{read: 3 * time.Second}
	e := newEnv(t, envOpts{timeouts: Timeouts{ToolHeartbeat: time.Second}, extra: []kernel.Tool{tool}})
	evs, err := e.run("hb1", Plan{Steps: []Step{{Tool: tool.Name()}}})
	if err != nil {
		t.Fatalf("run failed: %v (events %v)", err, shape(evs))
	}
	wantShape(t, evs, "run.started", "tool.started op-1", "tool.completed op-1", "run.completed")
	if n := tool.executed.Load(); n != 1 {
		t.Fatalf("executed %d times", n)
	}
}
