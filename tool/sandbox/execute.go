package sandbox

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"sync"
	"syscall"
	"time"

	"github.com/seed-7bc021c3/reckon/kernel"
)

// Execute implements kernel.Tool: it builds the command's launcher, starts
// it, waits for the command and answers with its output, classified.
func (r *runCommand) Execute(ctx context.Context, call kernel.ToolCall) (kernel.ToolResult, error) {
	p, err := r.prepare(call)
	if err != nil {
		return kernel.ToolResult{}, err
	}
	runCtx, cancel := context.WithTimeout(ctx, p.timeout)
	defer cancel()
	x := &execution{r: r, p: p, env: commandEnv(p, call), confined: p.bwrap != "",
		stdout: &cappedBuffer{max: r.o.MaxOutputBytes}, stderr: &cappedBuffer{max: r.o.MaxOutputBytes},
		removeCgroup: func() {}}
	defer x.release()
	if err := x.build(runCtx); err != nil {
		return kernel.ToolResult{}, err
	}
	if err := x.start(); err != nil {
		return kernel.ToolResult{}, err
	}
	waitErr := x.wait()
	return x.answer(ctx, runCtx, x.finish(), waitErr)
}

// execution is one call on its way through Execute's steps: what they
// share, and what is released when the call returns (release, the last
// taken first, as defers would).
type execution struct {
	r        *runCommand
	p        prepared
	env      []string
	confined bool
	cmd      *exec.Cmd
	stdout   *cappedBuffer
	stderr   *cappedBuffer
	// extra are the files the launcher inherits after the start marker.
	extra  []*os.File
	output *outputPipes
	sbInit *sandboxInit
	infoR  *os.File
	// cg is the command's cgroup (nil without one), gateW the write end of
	// the gate that holds the launcher until it is in cg.
	cg           *cgroup
	gateW        *os.File
	removeCgroup func()
	// markR is the read end of the start marker (startScript's fd 3).
	markR   *os.File
	started time.Time
	undo    []func()
}

// later registers f to run when the call returns.
func (x *execution) later(f func()) { x.undo = append(x.undo, f) }

// release runs what later registered, the last first.
func (x *execution) release() {
	for i := len(x.undo) - 1; i >= 0; i-- {
		x.undo[i]()
	}
}

// startFailed is the error of a command that never started: effect=none.
func startFailed(format string, args ...any) error {
	return &kernel.ToolError{ErrorType: ErrorTypeSandboxStartFailed, Effect: kernel.EffectNone,
		Err: fmt.Errorf(format, args...)}
}

// commandEnv is the command's whole environment: nothing of the worker's.
func commandEnv(p prepared, call kernel.ToolCall) []string {
	return []string{
		"PATH=" + sandboxPath,
		"HOME=" + p.workspace,
		"LANG=C.UTF-8",
		"RECKON_OPERATION_ID=" + call.OperationID,
		"RECKON_RUN_ID=" + call.RunID,
		"RECKON_PROJECT=" + call.Project,
	}
}

// build makes the command: bubblewrap (behind the cgroup gate where there
// is a cgroup) or, unconfined, the shell in the workspace.
func (x *execution) build(runCtx context.Context) error {
	if x.confined {
		if err := x.buildConfined(runCtx); err != nil {
			return err
		}
	} else {
		x.cmd = exec.CommandContext(runCtx, "/bin/sh", "-c", unconfinedScript, "reckon-run-command", x.p.command)
		x.cmd.Dir = x.p.workspace
		x.cmd.Stdout, x.cmd.Stderr = x.stdout, x.stderr
	}
	x.configure()
	return nil
}

// buildConfined makes the sandbox's launcher and the files it inherits.
func (x *execution) buildConfined(runCtx context.Context) error {
	if err := x.readyWorkspace(); err != nil {
		return err
	}
	if err := x.sandboxFiles(); err != nil {
		return err
	}
	argv := append(append([]string{x.p.bwrap}, bwrapArgs(x.p.workspace, x.env, x.r.o)...), x.r.confinedArgs(x.p)...)
	if x.r.cg != nil {
		gated, err := x.gate(argv)
		if err != nil {
			return err
		}
		argv = gated
	}
	x.cmd = exec.CommandContext(runCtx, argv[0], argv[1:]...)
	// The command's stdout and stderr are pipes the sandbox user owns,
	// so that reopening them (/dev/stdout, /dev/stderr) works as it
	// does anywhere else.
	output, err := newOutputPipes(x.p.drop, x.stdout, x.stderr)
	if err != nil {
		return startFailed("output pipes: %w", err)
	}
	x.output = output
	x.later(output.closeAll)
	x.cmd.Stdout, x.cmd.Stderr = output.outW, output.errW
	return nil
}

// readyWorkspace clears what a dead worker left running in the workspace
// and, when the sandbox runs as another user, hands the workspace to it.
func (x *execution) readyWorkspace() error {
	// What a dead worker left running in this workspace goes first
	// (reapWorkspace says why); a failure to look does not stop the
	// command, which is no worse off than before.
	if n, err := reapWorkspace(x.p.workspace); (n > 0 || err != nil) && x.r.o.Reaped != nil {
		x.r.o.Reaped(x.p.workspace, n, err)
	}
	if x.p.drop == nil {
		return nil
	}
	// The workspace belongs to the sandbox's user, whoever wrote
	// into it since (an MCP server running as root, the test).
	if err := tidyWorkspace(x.p.workspace, x.p.drop); err != nil {
		return startFailed("hand the workspace to the sandbox user %d: %w", x.p.drop.Uid, err)
	}
	if err := guardRoot(x.r.o.WorkspacesRoot, x.p.workspace, x.p.drop.Gid); err != nil {
		return startFailed("close the workspaces to other users: %w", err)
	}
	return nil
}

// sandboxFiles opens what bubblewrap reads besides its arguments: the
// sandbox user's identity files and the pipe of its report on its init.
func (x *execution) sandboxFiles() error {
	uid, gid := uint32(os.Getuid()), uint32(os.Getgid())
	if x.p.drop != nil {
		uid, gid = x.p.drop.Uid, x.p.drop.Gid
	}
	ids, err := identityFiles(uid, gid, x.p.workspace)
	if err != nil {
		return startFailed("sandbox identity files: %w", err)
	}
	x.later(func() { closeAll(ids) })
	x.extra = ids
	infoR, infoW, err := os.Pipe()
	if err != nil {
		return startFailed("sandbox info pipe: %w", err)
	}
	x.infoR = infoR
	// Closed after sbInit.close (registered later, so run earlier) has
	// waited for the report's reader.
	x.later(func() { closeAll([]*os.File{infoR, infoW}) })
	x.extra = append(x.extra, infoW)
	x.sbInit = newSandboxInit()
	return nil
}

// gate creates the command's cgroup and returns argv behind gateScript,
// which holds the launcher until the worker has placed it in the cgroup.
func (x *execution) gate(argv []string) ([]string, error) {
	cg, err := x.r.cg.create(cgroupLimits{memory: x.r.o.MaxMemory, procs: x.r.o.MaxProcs})
	if err != nil {
		return nil, startFailed("%w", err)
	}
	x.cg = cg
	if x.r.cgroupMade != nil {
		x.r.cgroupMade(cg)
	}
	var once sync.Once
	x.removeCgroup = func() {
		once.Do(func() {
			if err := cg.remove(); err != nil && x.r.o.Warn != nil {
				x.r.o.Warn(err)
			}
		})
	}
	x.later(x.removeCgroup)
	gateR, gateW, err := os.Pipe()
	if err != nil {
		return nil, startFailed("sandbox gate pipe: %w", err)
	}
	x.gateW = gateW
	x.later(func() { gateW.Close() })
	x.extra = append(x.extra, gateR)
	return append([]string{"/bin/sh", "-c", gateScript}, argv...), nil
}

// configure sets what the launcher runs with whether confined or not: the
// scrubbed environment, its own process group and how a cancel kills it.
func (x *execution) configure() {
	cmd := x.cmd
	// bwrap itself gets the scrubbed environment too, so no secret of the
	// worker reaches even the sandbox launcher.
	cmd.Env = x.env
	cmd.Stdin = nil
	// Own process group, killed as a whole on timeout. The sandbox's init
	// leaves the group (it starts a session of its own), so a cancel kills
	// it first, through its pidfd (sandboxInit). If the worker dies, the
	// kernel kills bwrap, and --die-with-parent takes the sandbox down, or,
	// where bubblewrap had not armed it yet, the next worker's ReapOrphans.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL, Credential: x.p.drop}
	cmd.Cancel = func() error {
		if cmd.Process == nil {
			return nil
		}
		var initErr error
		if x.sbInit != nil {
			initErr = x.sbInit.kill()
		}
		return errors.Join(syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL), initErr)
	}
	// A leaked descendant holding the output pipes must not block us past
	// the kill.
	cmd.WaitDelay = 2 * time.Second
}

// start starts the launcher with the start marker on fd 3, releases the
// gate once the launcher is in its cgroup, and watches the sandbox's init.
func (x *execution) start() error {
	markR, markW, err := os.Pipe()
	if err != nil {
		// Nothing was started: the pipe failed before any exec.
		return startFailed("start marker pipe: %w", err)
	}
	x.markR = markR
	x.later(func() { markR.Close() })
	// fd 3 is the marker; the identity files follow (fds 4 and 5, which
	// bubblewrap reads and closes before the command starts), then
	// bubblewrap's report of its init (fd 6), then the gate (fd 7, closed
	// before bubblewrap starts).
	x.cmd.ExtraFiles = append([]*os.File{markW}, x.extra...)

	if err := inheritNothing(); err != nil {
		markW.Close()
		return startFailed("%w", err)
	}
	x.started = time.Now()
	startCmd := x.cmd.Start
	if x.confined {
		startCmd = func() error { return startWithOwnKeyring(x.cmd) }
	}
	if err := startCmd(); err != nil {
		markW.Close()
		// effect=none: the exec of the launcher failed, so no process of the
		// command ever existed.
		return startFailed("start %s: %w", x.cmd.Path, err)
	}
	markW.Close()
	closeAll(x.extra)
	if x.cg != nil {
		if err := x.openGate(); err != nil {
			return err
		}
	}
	if x.sbInit != nil {
		x.sbInit.watch(x.infoR, x.cmd.Process.Pid)
		x.later(x.sbInit.close)
	}
	if x.output != nil {
		x.output.started()
	}
	return nil
}

// openGate places the started launcher in the command's cgroup, then lets
// it go on to exec bubblewrap.
func (x *execution) openGate() error {
	if err := x.cg.place(x.cmd.Process.Pid); err != nil {
		// The gate execs nothing when closed unreleased; the kill is
		// only so as not to wait for it.
		x.gateW.Close()
		_ = x.cmd.Process.Kill()
		_ = x.cmd.Wait()
		return startFailed("%w", err)
	}
	if _, err := x.gateW.Write([]byte("\n")); err != nil {
		// The gate is gone (a cancel killed it): what follows reports
		// a sandbox that never started.
		_ = x.cmd.Process.Kill()
	}
	x.gateW.Close()
	return nil
}

// wait waits for the command and takes down whatever it left behind.
func (x *execution) wait() error {
	// The kernel's RunTool activity heartbeats for every tool while it runs.
	if !x.confined {
		// Unconfined there is no sandbox to take the background down: the
		// command's process group goes as soon as its shell exits, so that
		// nothing it started in the group acts after the call is answered
		// (and past the bound the probes rely on). The shell is left
		// unreaped meanwhile, so the group's number cannot be another's.
		// A process that left the group (setsid) is beyond this; events
		// of an unconfined worker say "unconfined" for that reason.
		waitExitNoReap(x.cmd.Process.Pid)
		_ = syscall.Kill(-x.cmd.Process.Pid, syscall.SIGKILL)
	}
	waitErr := x.cmd.Wait()
	if x.sbInit != nil {
		// The command has exited or was killed; whatever it left in the
		// background goes now, not when --die-with-parent gets to it (or
		// never, if bubblewrap lost that signal).
		_ = x.sbInit.kill()
	}
	if x.output != nil {
		x.output.wait(x.cmd.WaitDelay)
	}
	return waitErr
}

// finish tidies the workspace and the cgroup after the command and returns
// its output.
func (x *execution) finish() Output {
	dur := time.Since(x.started)
	if x.confined {
		// A sandboxed command may leave set-user-ID files behind; on the
		// host they would run as the sandbox's user. Strip those bits.
		_ = stripSetID(x.p.workspace)
	}
	oomKilled := x.cg != nil && x.cg.oomKilled()
	x.removeCgroup()
	out := Output{
		ExitCode:   -1,
		Stdout:     x.stdout.String(),
		Stderr:     x.stderr.String(),
		Truncated:  x.stdout.truncated || x.stderr.truncated,
		DurationMS: dur.Milliseconds(),
		Confined:   x.confined,
		OOMKilled:  oomKilled,
	}
	if x.cmd.ProcessState != nil {
		out.ExitCode = x.cmd.ProcessState.ExitCode()
	}
	return out
}

// answer classifies the finished command: a sandbox that never started
// the command is effect=none; a timeout, a cancel, a failed wait or a
// non-zero exit after it started is uncertain.
func (x *execution) answer(ctx, runCtx context.Context, out Output, waitErr error) (kernel.ToolResult, error) {
	timedOut := errors.Is(runCtx.Err(), context.DeadlineExceeded) && ctx.Err() == nil
	out.TimedOut = timedOut
	res := kernel.ToolResult{Summary: summary(out), Output: mustJSON(out)}

	if !commandStarted(x.markR) {
		// effect=none: the marker is written inside the sandbox immediately
		// before the command is exec'd, and the && chain stops otherwise; no
		// marker means the command never began (bwrap failed to set up the
		// sandbox, or was killed during setup).
		return res, &kernel.ToolError{ErrorType: ErrorTypeSandboxStartFailed, Effect: kernel.EffectNone,
			Err: fmt.Errorf("sandbox did not start the command (launcher exit %d): %s", out.ExitCode, tail(out.Stderr, 300))}
	}
	switch {
	case timedOut:
		return res, &kernel.ToolError{ErrorType: ErrorTypeCommandTimeout, Effect: kernel.EffectUncertain,
			Err: fmt.Errorf("command killed after the %s timeout; its partial effects are not rolled back", x.p.timeout)}
	case ctx.Err() != nil:
		return res, &kernel.ToolError{ErrorType: ErrorTypeCommandCanceled, Effect: kernel.EffectUncertain,
			Err: fmt.Errorf("command killed because its caller ended: %w", ctx.Err())}
	case waitErr != nil && out.ExitCode == 0:
		// Exit 0 but Wait failed (e.g. output pipes held past WaitDelay):
		// the command ran; report honestly.
		return res, &kernel.ToolError{ErrorType: ErrorTypeCommandFailed, Effect: kernel.EffectUncertain,
			Err: fmt.Errorf("command wait: %w", waitErr)}
	case out.ExitCode != 0:
		// The command ran: whatever it did before failing stays done.
		return res, &kernel.ToolError{ErrorType: ErrorTypeCommandFailed, Effect: kernel.EffectUncertain,
			Err: fmt.Errorf("command exited with code %d%s: %s", out.ExitCode, oomNote(out, x.r.o.MaxMemory), tail(out.Stderr, 300))}
	}
	return res, nil
}
