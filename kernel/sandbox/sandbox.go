// Package sandbox implements the run_command tool: a shell command run inside
// a bubblewrap sandbox confined to the run's workspace (read-only root,
// writable workspace, no network, scrubbed environment, wall-clock timeout,
// captured and capped output).
package sandbox

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"
	"unicode/utf8"

	"github.com/seed-7bc021c3/reckon/kernel"
)

// ToolName is the name plans use for this tool.
const ToolName = "run_command"

// Error types of tool.failed produced by run_command.
const (
	// ErrorTypeCommandFailed: the command ran and exited nonzero.
	ErrorTypeCommandFailed = "command_failed"
	// ErrorTypeCommandTimeout: the command ran past its wall-clock limit and was killed.
	ErrorTypeCommandTimeout = "command_timeout"
	// ErrorTypeCommandCanceled: the caller's context ended while the command ran.
	ErrorTypeCommandCanceled = "command_canceled"
	// ErrorTypeSandboxStartFailed: the command never began (bwrap could not
	// be executed or could not set up the sandbox).
	ErrorTypeSandboxStartFailed = "sandbox_start_failed"
)

// Defaults applied by NewRunCommand to zero Options fields.
const (
	DefaultMaxOutputBytes = 64 << 10
	DefaultTimeout        = 60 * time.Second
	DefaultMaxTimeout     = 10 * time.Minute
)

// summaryMax bounds ToolResult.Summary (it goes into tool.completed).
const summaryMax = 500

// sandboxPath is the only PATH the command sees.
const sandboxPath = "/usr/local/bin:/usr/bin:/bin"

// errBwrapMissing is the refusal when bubblewrap is absent and unconfined
// mode was not asked for.
const errBwrapMissing = "bubblewrap (bwrap) is not installed; install it or set RECKON_SANDBOX_UNCONFINED=1 to run unconfined"

// Options configures run_command.
type Options struct {
	// Unconfined runs commands without bubblewrap (only the environment is
	// scrubbed and the working directory set). Every result says so.
	Unconfined bool
	// BwrapPath is the bubblewrap binary; empty means look up "bwrap" in PATH.
	BwrapPath string
	// MaxOutputBytes caps each of stdout and stderr (default 64 KiB).
	MaxOutputBytes int
	// DefaultTimeout applies when the call gives no timeout_s (default 60s).
	DefaultTimeout time.Duration
	// MaxTimeout is the largest timeout_s accepted (default 10 minutes).
	MaxTimeout time.Duration
}

// Output is the structured result of one run_command call (ToolResult.Output).
type Output struct {
	ExitCode   int    `json:"exit_code"`
	Stdout     string `json:"stdout"`
	Stderr     string `json:"stderr"`
	Truncated  bool   `json:"truncated"`
	TimedOut   bool   `json:"timed_out,omitempty"`
	DurationMS int64  `json:"duration_ms"`
	Confined   bool   `json:"confined"`
}

// args are the known arguments of run_command; unknown fields are kept in
// the call and ignored here.
type args struct {
	Command  *string          `json:"command"`
	TimeoutS *json.RawMessage `json:"timeout_s"`
}

type runCommand struct {
	o Options
}

// NewRunCommand returns the run_command tool.
func NewRunCommand(o Options) kernel.Tool {
	if o.MaxOutputBytes <= 0 {
		o.MaxOutputBytes = DefaultMaxOutputBytes
	}
	if o.MaxTimeout <= 0 {
		o.MaxTimeout = DefaultMaxTimeout
	}
	if o.DefaultTimeout <= 0 {
		o.DefaultTimeout = DefaultTimeout
	}
	if o.DefaultTimeout > o.MaxTimeout {
		o.DefaultTimeout = o.MaxTimeout
	}
	return &runCommand{o: o}
}

// Name implements kernel.Tool.
func (r *runCommand) Name() string { return ToolName }

// Available reports whether bubblewrap at path (empty: looked up as "bwrap")
// can actually build the sandbox run_command uses on this machine; a binary
// that exists but cannot create namespaces is an error too.
func Available(path string) error {
	bin, err := lookBwrap(path)
	if err != nil {
		return err
	}
	dir, err := os.MkdirTemp("", "reckon-bwrap-check-")
	if err != nil {
		return fmt.Errorf("sandbox check: %w", err)
	}
	defer os.RemoveAll(dir)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	argv := append(bwrapArgs(dir, []string{"PATH=" + sandboxPath}), "/bin/sh", "-c", "echo ok > .reckon-check")
	cmd := exec.CommandContext(ctx, bin, argv...)
	cmd.Env = []string{"PATH=" + sandboxPath}
	out, err := cmd.CombinedOutput()
	if err != nil {
		return fmt.Errorf("bubblewrap at %s cannot build the sandbox: %w: %s", bin, err, strings.TrimSpace(string(out)))
	}
	if _, err := os.Stat(filepath.Join(dir, ".reckon-check")); err != nil {
		return fmt.Errorf("bubblewrap at %s ran but the workspace was not writable: %w", bin, err)
	}
	return nil
}

func lookBwrap(path string) (string, error) {
	if path == "" {
		path = "bwrap"
	}
	bin, err := exec.LookPath(path)
	if err != nil {
		return "", errors.New(errBwrapMissing)
	}
	return bin, nil
}

// Validate implements kernel.Tool: it checks arguments, workspace and
// sandbox availability without running anything, so every failure is
// effect=none.
func (r *runCommand) Validate(call kernel.ToolCall) error {
	_, err := r.prepare(call)
	return err
}

// prepared is a validated call.
type prepared struct {
	command   string
	timeout   time.Duration
	workspace string // absolute, symlinks resolved
	bwrap     string // empty when unconfined
}

func (r *runCommand) prepare(call kernel.ToolCall) (prepared, error) {
	var p prepared
	if len(bytes.TrimSpace(call.Args)) == 0 {
		return p, kernel.Rejected("args: required object with \"command\"")
	}
	var a args
	if err := json.Unmarshal(call.Args, &a); err != nil {
		return p, kernel.Rejected("args: must be a JSON object: %v", err)
	}
	if a.Command == nil {
		return p, kernel.Rejected("args.command: required")
	}
	if strings.TrimSpace(*a.Command) == "" {
		return p, kernel.Rejected("args.command: must not be empty")
	}
	if strings.IndexByte(*a.Command, 0) >= 0 {
		return p, kernel.Rejected("args.command: must not contain a NUL byte")
	}
	p.command = *a.Command
	p.timeout = r.o.DefaultTimeout
	if a.TimeoutS != nil && string(*a.TimeoutS) != "null" {
		var secs int64
		if err := json.Unmarshal(*a.TimeoutS, &secs); err != nil {
			return p, kernel.Rejected("args.timeout_s: must be an integer number of seconds, got %s", *a.TimeoutS)
		}
		maxS := int64(r.o.MaxTimeout / time.Second)
		if secs < 1 || secs > maxS {
			return p, kernel.Rejected("args.timeout_s: must be between 1 and %d, got %d", maxS, secs)
		}
		p.timeout = time.Duration(secs) * time.Second
	}

	if call.Workspace == "" {
		return p, kernel.Rejected("workspace: required")
	}
	if !filepath.IsAbs(call.Workspace) {
		return p, kernel.Rejected("workspace: must be an absolute path, got %q", call.Workspace)
	}
	ws, err := filepath.EvalSymlinks(call.Workspace)
	if err != nil {
		return p, kernel.Rejected("workspace: %v", err)
	}
	fi, err := os.Stat(ws)
	if err != nil {
		return p, kernel.Rejected("workspace: %v", err)
	}
	if !fi.IsDir() {
		return p, kernel.Rejected("workspace: %s is not a directory", call.Workspace)
	}
	// Binding "/" writable would undo the read-only root.
	if ws == "/" {
		return p, kernel.Rejected("workspace: must not be the root directory")
	}
	p.workspace = ws

	if !r.o.Unconfined {
		bin, err := lookBwrap(r.o.BwrapPath)
		if err != nil {
			return p, kernel.Rejected("%s", errBwrapMissing)
		}
		p.bwrap = bin
	}
	return p, nil
}

// bwrapArgs builds the sandbox: the whole filesystem read-only, a private
// /tmp, the workspace writable, every namespace unshared (network included:
// the sandbox gets its own empty loopback), no capabilities (a root command
// could otherwise remount / read-write), and only env as environment.
// Order matters: /tmp is mounted before the workspace so a workspace under
// /tmp is bound on top of the tmpfs, not hidden by it.
func bwrapArgs(ws string, env []string) []string {
	a := []string{
		"--ro-bind", "/", "/",
		"--dev", "/dev",
		"--proc", "/proc",
		"--tmpfs", "/tmp",
		"--bind", ws, ws,
		"--unshare-all",
		"--cap-drop", "ALL",
		"--die-with-parent",
		"--new-session",
		"--chdir", ws,
		"--clearenv",
	}
	for _, kv := range env {
		k, v, _ := strings.Cut(kv, "=")
		a = append(a, "--setenv", k, v)
	}
	return a
}

// startScript runs inside the sandbox before the command: it writes one
// byte to fd 3 (proof that the sandbox is set up and the command is about to
// run), closes fd 3 so the command does not inherit it, then runs the
// command exactly as /bin/sh -c would.
const startScript = `printf . >&3 && exec 3>&- && exec /bin/sh -c "$1"`

// Execute implements kernel.Tool.
func (r *runCommand) Execute(ctx context.Context, call kernel.ToolCall) (kernel.ToolResult, error) {
	p, err := r.prepare(call)
	if err != nil {
		return kernel.ToolResult{}, err
	}
	env := []string{
		"PATH=" + sandboxPath,
		"HOME=" + p.workspace,
		"LANG=C.UTF-8",
		"RECKON_OPERATION_ID=" + call.OperationID,
		"RECKON_RUN_ID=" + call.RunID,
		"RECKON_PROJECT=" + call.Project,
	}
	confined := p.bwrap != ""

	runCtx, cancel := context.WithTimeout(ctx, p.timeout)
	defer cancel()

	var cmd *exec.Cmd
	shArgs := []string{"/bin/sh", "-c", startScript, "reckon-run-command", p.command}
	if confined {
		cmd = exec.CommandContext(runCtx, p.bwrap, append(bwrapArgs(p.workspace, env), shArgs...)...)
	} else {
		cmd = exec.CommandContext(runCtx, shArgs[0], shArgs[1:]...)
		cmd.Dir = p.workspace
	}
	// bwrap itself gets the scrubbed environment too, so no secret of the
	// worker reaches even the sandbox launcher.
	cmd.Env = env
	cmd.Stdin = nil
	stdout := &cappedBuffer{max: r.o.MaxOutputBytes}
	stderr := &cappedBuffer{max: r.o.MaxOutputBytes}
	cmd.Stdout, cmd.Stderr = stdout, stderr
	// Own process group, killed as a whole on timeout; if the worker dies,
	// the kernel kills bwrap, and --die-with-parent takes the sandbox down.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	cmd.Cancel = func() error {
		if cmd.Process == nil {
			return nil
		}
		return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	}
	// A leaked descendant holding the output pipes must not block us past
	// the kill.
	cmd.WaitDelay = 2 * time.Second

	markR, markW, err := os.Pipe()
	if err != nil {
		// Nothing was started: the pipe failed before any exec.
		return kernel.ToolResult{}, &kernel.ToolError{ErrorType: ErrorTypeSandboxStartFailed, Effect: kernel.EffectNone,
			Err: fmt.Errorf("start marker pipe: %w", err)}
	}
	defer markR.Close()
	cmd.ExtraFiles = []*os.File{markW}

	start := time.Now()
	if err := cmd.Start(); err != nil {
		markW.Close()
		// effect=none: the exec of the launcher failed, so no process of the
		// command ever existed.
		return kernel.ToolResult{}, &kernel.ToolError{ErrorType: ErrorTypeSandboxStartFailed, Effect: kernel.EffectNone,
			Err: fmt.Errorf("start %s: %w", cmd.Path, err)}
	}
	markW.Close()

	// The kernel's RunTool activity heartbeats for every tool while it runs.
	waitErr := cmd.Wait()
	dur := time.Since(start)

	out := Output{
		ExitCode:   -1,
		Stdout:     stdout.String(),
		Stderr:     stderr.String(),
		Truncated:  stdout.truncated || stderr.truncated,
		DurationMS: dur.Milliseconds(),
		Confined:   confined,
	}
	if cmd.ProcessState != nil {
		out.ExitCode = cmd.ProcessState.ExitCode()
	}
	timedOut := errors.Is(runCtx.Err(), context.DeadlineExceeded) && ctx.Err() == nil
	out.TimedOut = timedOut
	res := kernel.ToolResult{Summary: summary(out), Output: mustJSON(out)}

	if !commandStarted(markR) {
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
			Err: fmt.Errorf("command killed after the %s timeout; its partial effects are not rolled back", p.timeout)}
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
			Err: fmt.Errorf("command exited with code %d: %s", out.ExitCode, tail(out.Stderr, 300))}
	}
	return res, nil
}

// commandStarted reads the start marker. The byte, if written, is already in
// the pipe buffer (it precedes the command, which has exited), so a short
// deadline only bounds the case where it never came and some sandbox process
// still holds the write end.
func commandStarted(r *os.File) bool {
	_ = r.SetReadDeadline(time.Now().Add(100 * time.Millisecond))
	var b [1]byte
	n, _ := r.Read(b[:])
	return n == 1
}

// summary is "exit N; <start of stdout>", prefixed with UNCONFINED when the
// sandbox was off so every event shows it, bounded to summaryMax bytes.
func summary(o Output) string {
	var b strings.Builder
	if !o.Confined {
		b.WriteString("UNCONFINED; ")
	}
	if o.TimedOut {
		b.WriteString("timeout; ")
	}
	fmt.Fprintf(&b, "exit %d", o.ExitCode)
	if o.Truncated {
		b.WriteString(" (output truncated)")
	}
	if s := strings.TrimSpace(o.Stdout); s != "" {
		b.WriteString("; ")
		b.WriteString(s)
	}
	return kernel.TruncateUTF8(strings.ToValidUTF8(b.String(), "\uFFFD"), summaryMax)
}

// tail returns the last n bytes of s (on a rune boundary), trimmed.
func tail(s string, n int) string {
	s = strings.TrimSpace(s)
	if len(s) <= n {
		return s
	}
	i := len(s) - n
	for i < len(s) && !utf8.RuneStart(s[i]) {
		i++
	}
	return "…" + s[i:]
}

func mustJSON(v any) json.RawMessage {
	b, err := json.Marshal(v)
	if err != nil {
		// Output has only strings, ints and bools: Marshal cannot fail.
		panic(fmt.Sprintf("sandbox: marshal output: %v", err))
	}
	return b
}

// cappedBuffer keeps the first max bytes written and remembers whether more
// came. It never returns an error, so the command is not disturbed by a
// full buffer (it keeps running; its extra output is dropped).
type cappedBuffer struct {
	buf       bytes.Buffer
	max       int
	truncated bool
}

func (c *cappedBuffer) Write(p []byte) (int, error) {
	room := c.max - c.buf.Len()
	if room >= len(p) {
		c.buf.Write(p)
		return len(p), nil
	}
	if room > 0 {
		c.buf.Write(p[:room])
	}
	c.truncated = true
	return len(p), nil
}

// String returns the kept bytes, dropping a rune split by the cap.
func (c *cappedBuffer) String() string {
	b := c.buf.Bytes()
	if c.truncated {
		for i := 0; i < utf8.UTFMax && len(b) > 0; i++ {
			r, size := utf8.DecodeLastRune(b)
			if r != utf8.RuneError || size != 1 {
				break
			}
			b = b[:len(b)-1]
		}
	}
	return string(b)
}
