package drill

import (
	"context"
	"fmt"
	"time"

	"github.com/seed-7bc021c3/reckon/kernel/fault"
	"github.com/seed-7bc021c3/reckon/kernel/runner"
	"github.com/seed-7bc021c3/reckon/tool/sandbox"
)

// outlivedWait bounds how long a drill waits for a command's left-behind
// process to end after its call timed out.
const outlivedWait = 30 * time.Second

// outliving gives a cmd_timeout_running run its worker's setup: commands
// unconfined (RECKON_SANDBOX_UNCONFINED, recorded on the kernel's events),
// whose processes may leave their process group and outlive the call, and
// a tool call bounded to OutlivedCall. The plan runs only run_command.
func (st *Stack) outliving(acts *runner.Activities, starter *runner.Starter) {
	cfg := st.Core.SandboxConfig()
	cfg.Unconfined = true
	tools := runner.NewTools(sandbox.NewRunCommand(cfg))
	acts.Tools, acts.Unconfined = tools, true
	starter.Tools = tools
	starter.Timeouts.ToolStartToClose = OutlivedCall
}

// outlived waits until sc.Outlives's left-behind process got under way and
// then ended — its call timed out meanwhile and its command was killed
// with its process group — and records what the workspace shows then as
// the operation's truth.
func (st *Stack) outlived(ctx context.Context, project string, sc Scenario, ws string) error {
	l := sc.Outlives
	if err := poll(ctx, func() (bool, error) { return processWith(l.Marker) }); err != nil {
		return fmt.Errorf("run %s: the process %s leaves behind never got under way: %w", sc.RunID, l.OperationID, err)
	}
	wctx, cancel := context.WithTimeout(ctx, outlivedWait)
	err := poll(wctx, func() (bool, error) { r, err := processWith(l.Marker); return !r, err })
	cancel()
	if err != nil {
		return fmt.Errorf("run %s: the process %s left behind did not end within %s: %w", sc.RunID, l.OperationID, outlivedWait, err)
	}
	return st.observeEffect(ctx, project, sc.RunID, ws, l, fault.Observed,
		"once the process the command left behind, running on after its call timed out, had ended",
		map[bool]string{true: "that process was to write it", false: "that process was to exit without writing"}[l.AfterEffect])
}
