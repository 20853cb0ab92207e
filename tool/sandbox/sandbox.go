// Package sandbox implements the run_command tool: a shell command run inside
// a bubblewrap sandbox confined to the run's workspace, as an unprivileged
// user (a minimal read-only root of system directories, the workspace
// writable, a private /tmp, no network, no host socket, limits on
// processes, memory and file size, a scrubbed environment, a wall-clock
// timeout, captured and capped output).
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
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
	"unicode/utf8"

	"golang.org/x/sys/unix"

	"github.com/seed-7bc021c3/reckon/kernel"
	"github.com/seed-7bc021c3/reckon/platform/defaults"
	"github.com/seed-7bc021c3/reckon/platform/fdguard"
)

// ToolName is the name plans use for this tool.
const ToolName = kernel.ToolRunCommand

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

// Defaults applied by NewRunCommand to zero Config fields.
const (
	DefaultMaxOutputBytes = 64 << 10
	DefaultTimeout        = 60 * time.Second
	DefaultMaxTimeout     = kernel.MaxCommandTimeout
	// DefaultMaxProcs bounds the processes (threads included) of one
	// command (RECKON_SANDBOX_MAX_PROCS).
	DefaultMaxProcs = 256
	// DefaultMaxMemory bounds the address space of each process of a
	// command, and the size of its private /tmp (RECKON_SANDBOX_MAX_MEMORY).
	DefaultMaxMemory = 1 << 30
	// DefaultMaxFileSize bounds any one file a command writes
	// (RECKON_SANDBOX_MAX_FILE_SIZE).
	DefaultMaxFileSize = 1 << 30
	// DefaultUID and DefaultGID are the identity a root worker drops to
	// for the sandbox (nobody/nogroup on Debian; RECKON_SANDBOX_UID).
	DefaultUID = 65534
	DefaultGID = 65534
)

// summaryMax bounds ToolResult.Summary (it goes into tool.completed).
const summaryMax = 500

// sandboxPath is the only PATH the command sees.
const sandboxPath = "/usr/local/bin:/usr/bin:/bin"

// errBwrapMissing is the refusal when bubblewrap is absent and unconfined
// mode was not asked for.
const errBwrapMissing = "bubblewrap (bwrap) is not installed; install it or set RECKON_SANDBOX_UNCONFINED=1 to run unconfined"

// Config configures run_command.
type Config struct {
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
	// MaxProcs bounds the processes and threads of one command (default
	// 256): RLIMIT_NPROC inside the sandbox, which has a user namespace of
	// its own in which the kernel (Linux 5.14 and later) counts them, so
	// concurrent commands do not share the budget; and, where the command
	// has a cgroup (see CgroupRoot), its pids.max, which counts bubblewrap
	// too.
	MaxProcs int
	// MaxMemory is one number that bounds three things, in bytes (default
	// 1 GiB): RLIMIT_AS of every process of the command; the size of its
	// private /tmp (a tmpfs); and, where the command has a cgroup (see
	// CgroupRoot), the memory of the whole command, all its processes and
	// its /tmp's pages together (and swap, where the kernel accounts it).
	// Past that sum the kernel's OOM killer SIGKILLs a process of the
	// command (Output.OOMKilled). Without a cgroup only the per-process
	// bound and /tmp's size hold: N processes may use N × MaxMemory.
	MaxMemory int64
	// MaxFileSize is RLIMIT_FSIZE, in bytes (default 1 GiB): writing past
	// it kills the writer with SIGXFSZ.
	MaxFileSize int64
	// UID and GID are the unprivileged identity a worker running as root
	// drops to before it starts bubblewrap (default 65534/65534); the
	// workspace is handed to it before each command. A worker that is not
	// root runs the sandbox as itself.
	UID, GID uint32
	// WorkspacesRoot, when set, is the directory every workspace lies
	// beneath (<RECKON_DATA_DIR>/workspaces). A worker running as root
	// makes it passable only by root and the sandbox's group (GID) before
	// each command beneath it (guardRoot says why).
	WorkspacesRoot string
	// CgroupRoot is where the cgroup hierarchy is mounted (default
	// /sys/fs/cgroup; v2 or v1, found at NewRunCommand). A worker running
	// as root gives each confined command a cgroup of its own beneath
	// reckon-sandbox, before the command's first process starts, with
	// MaxMemory, MaxProcs and one CPU as its limits, and removes it when
	// the command ends. Without a usable hierarchy (not root, read-only,
	// no memory controller) commands run with the per-process limits only,
	// and Warn hears why.
	CgroupRoot string
	// Warn, when set, hears of what leaves commands less bounded than
	// configured without stopping them: no usable cgroup hierarchy (once,
	// from NewRunCommand), a command's cgroup that could not be removed.
	// The worker logs it.
	Warn func(err error)
	// Reaped, when set, hears of sandboxes a dead worker left running in a
	// command's workspace, killed before the command started (killed > 0),
	// and of a failure to look for them (err); the worker logs both.
	Reaped func(workspace string, killed int, err error)
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
	// OOMKilled: the command reached its memory limit (Config.MaxMemory,
	// the sum over its processes) and the kernel killed a process of it.
	// That process need not be the one whose status is ExitCode: a shell
	// whose background job was killed may still exit 0.
	OOMKilled bool `json:"oom_killed,omitempty"`
}

// args are the known arguments of run_command; unknown fields are kept in
// the call and ignored here.
type args struct {
	Command  *string          `json:"command"`
	TimeoutS *json.RawMessage `json:"timeout_s"`
}

type runCommand struct {
	o Config
	// cg is the hierarchy commands get cgroups in; nil without one.
	cg *cgroups
	// cgroupMade, when set (by tests), hears of each command's cgroup.
	cgroupMade func(*cgroup)
}

// NewRunCommand returns the run_command tool.
func NewRunCommand(o Config) kernel.Tool {
	o.MaxOutputBytes = defaults.Positive(o.MaxOutputBytes, DefaultMaxOutputBytes)
	o.MaxTimeout = defaults.Positive(o.MaxTimeout, DefaultMaxTimeout)
	o.DefaultTimeout = defaults.Positive(o.DefaultTimeout, DefaultTimeout)
	if o.DefaultTimeout > o.MaxTimeout {
		o.DefaultTimeout = o.MaxTimeout
	}
	o.MaxProcs = defaults.Positive(o.MaxProcs, DefaultMaxProcs)
	o.MaxMemory = defaults.Positive(o.MaxMemory, DefaultMaxMemory)
	o.MaxFileSize = defaults.Positive(o.MaxFileSize, DefaultMaxFileSize)
	if o.UID == 0 {
		o.UID = DefaultUID
	}
	if o.GID == 0 {
		o.GID = DefaultGID
	}
	if o.CgroupRoot == "" {
		o.CgroupRoot = DefaultCgroupRoot
	}
	r := &runCommand{o: o}
	if !o.Unconfined {
		var err error
		r.cg, err = newCgroups(o.CgroupRoot)
		if err != nil && o.Warn != nil {
			o.Warn(err)
		}
	}
	return r
}

// newCgroups is the hierarchy commands get cgroups in, nil when there is
// none this worker can use; the error says what is missing, and what
// that leaves unbounded.
func newCgroups(root string) (*cgroups, error) {
	if os.Geteuid() != 0 {
		return nil, fmt.Errorf("sandbox: the worker is not root, so commands get no cgroup: " +
			"each process of a command is bounded (RLIMIT_AS, RLIMIT_NPROC), not the command's sum, nor its CPU")
	}
	c, missing, err := detectCgroups(root)
	if err != nil {
		return nil, fmt.Errorf("%w; commands get no cgroup: each process of a command is bounded (RLIMIT_AS, RLIMIT_NPROC), not the command's sum, nor its CPU", err)
	}
	if len(missing) > 0 {
		return c, fmt.Errorf("sandbox: the cgroup hierarchy at %s has no %s controller: commands get a cgroup bounding their memory, without that bound",
			root, strings.Join(missing, " or "))
	}
	return c, nil
}

// Name implements kernel.Tool.
func (r *runCommand) Name() string { return ToolName }

// WritesWorkspace implements kernel.WorkspaceTool: a command's durable
// effects land in its workspace (confined, the only writable path; see
// pipeline/probe.Diff for what an unconfined sandbox changes).
func (r *runCommand) WritesWorkspace() bool { return true }

// ErrCheckTimedOut is Check's error when its trivial command did not end in
// time: the machine is slow, which says nothing about the sandbox.
var ErrCheckTimedOut = errors.New("sandbox check timed out")

// Available reports whether bubblewrap at path (empty: looked up as "bwrap")
// can actually build the sandbox run_command uses on this machine, with
// the default options; see Check.
func Available(path string) error { return Check(Config{BwrapPath: path}, "") }

// Check runs a trivial command in the sandbox o describes, in a fresh
// workspace beneath dir (empty: the system's temporary directory), and
// reports why it could not: bubblewrap missing, namespaces refused, the
// unprivileged user unable to reach dir, the limits unusable.
func Check(o Config, dir string) error {
	if _, err := lookBwrap(o.BwrapPath); err != nil {
		return err
	}
	ws, err := os.MkdirTemp(dir, ".reckon-sandbox-check-")
	if err != nil {
		return fmt.Errorf("sandbox check: %w", err)
	}
	defer os.RemoveAll(ws)
	o.Unconfined = false
	// The worker's own tool said it already, once.
	o.Warn = nil
	r := NewRunCommand(o)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	res, err := r.Execute(ctx, kernel.ToolCall{
		OperationID: "sandbox-check", Tool: ToolName, Workspace: ws,
		Args: json.RawMessage(`{"command": "echo ok > .reckon-check", "timeout_s": 10}`),
	})
	if ctx.Err() != nil {
		// A loaded machine, not a verdict on the sandbox.
		return fmt.Errorf("%w: the sandbox check did not finish in 10s (%v)", ErrCheckTimedOut, err)
	}
	if err != nil {
		return fmt.Errorf("bubblewrap cannot build the sandbox: %w", err)
	}
	if _, err := os.Stat(filepath.Join(ws, ".reckon-check")); err != nil {
		return fmt.Errorf("bubblewrap ran (%s) but the workspace was not writable: %w", res.Summary, err)
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
	// drop is the identity bubblewrap runs as: nil when the worker is not
	// root (it already is unprivileged) or when unconfined.
	drop *syscall.Credential
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
	// encoding/json matches a name in any casing and keeps the last, and
	// the journal keeps the args with their keys sorted, where another
	// one is last: the probes would bound the command by another
	// timeout_s than it ran with, and a reader would see another command.
	// Only the exact names are taken.
	var keys map[string]json.RawMessage
	if err := json.Unmarshal(call.Args, &keys); err != nil {
		return p, kernel.Rejected("args: must be a JSON object: %v", err)
	}
	for k := range keys {
		for _, name := range []string{"command", "timeout_s"} {
			if k != name && strings.EqualFold(k, name) {
				return p, kernel.Rejected("args.%s: write it %q; another casing of a name is ambiguous", k, name)
			}
		}
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
		if os.Geteuid() == 0 {
			p.drop = &syscall.Credential{Uid: r.o.UID, Gid: r.o.GID, Groups: []uint32{}}
			if err := reachable(ws, r.o.UID, r.o.GID); err != nil {
				return p, kernel.Rejected("workspace: %v", err)
			}
		}
	}
	return p, nil
}

// startScript runs inside the sandbox before the command: it sets the
// resource limits on itself (inherited by the command), makes itself the
// OOM killer's first choice (oom_score_adj $6, best effort), writes one
// byte to fd 3 (proof that the sandbox is set up and the command is about
// to run), closes fd 3, then runs the command as /bin/sh -c would under
// the sandbox's own deadline of $5 seconds (coreutils timeout, SIGKILL). A
// limit that cannot be set or a missing timeout binary stops the chain
// before the marker: nothing ran. TestStartScriptNeedsTimeout.
const startScript = `prlimit --pid $$ --nproc="$2" --as="$3" --fsize="$4" --core=0 && { printf %s "$6" 2>/dev/null >/proc/self/oom_score_adj || :; } && command -v timeout >/dev/null && printf . >&3 && exec 3>&- && exec timeout -s KILL "$5" /bin/sh -c "$1"`

// oomFirst makes the command's processes the OOM killer's first choice,
// at the command's memory limit or the host's. Otherwise bubblewrap's
// launcher can be the largest process left after a first kill, and a
// second kill takes it with the command's exit status. Raising one's own
// value needs no capability (sparing the launcher would need
// CAP_SYS_RESOURCE); why a command that lowers it again gains nothing:
// docs/internals.md#sandbox. TestCgroupPlacement checks the values.
const oomFirst = 1000

// deadlineSlack is how long past its timeout a command may run before the
// sandbox's own deadline kills it. The worker's kill comes first and is
// what reports command_timeout; the sandbox's deadline is for a sandbox
// the worker can no longer kill (the worker died while bubblewrap had not
// yet armed --die-with-parent, see ReapOrphans), so that no command runs
// past the bound the workspace probes take for granted: its timeout plus
// a minute (probe.commandBound).
const deadlineSlack = 5 * time.Second

// confinedArgs is the command line that runs p's command in the sandbox,
// after bubblewrap's own arguments.
func (r *runCommand) confinedArgs(p prepared) []string {
	return []string{"/bin/sh", "-c", startScript, "reckon-run-command", p.command,
		strconv.Itoa(r.o.MaxProcs), strconv.FormatInt(r.o.MaxMemory, 10), strconv.FormatInt(r.o.MaxFileSize, 10),
		strconv.FormatInt(int64((p.timeout+deadlineSlack+time.Second-1)/time.Second), 10),
		strconv.Itoa(oomFirst)}
}

// gateScript holds the sandbox's launcher until the worker has put it in
// the command's cgroup, then execs bubblewrap ($0, its arguments after)
// in the same process: every process of the sandbox descends from one
// that was in the cgroup before it could fork. Moving bubblewrap after it
// started would leave out whatever it forked meanwhile. The worker
// releases the gate with a newline on fd 7; a gate closed without one
// (the placement failed, the worker died) execs nothing.
const gateScript = `read -r go <&7 && exec "$0" "$@" 7<&-`

// unconfinedScript is startScript without the limits: unconfined, the
// command runs as the worker, whose own processes a process limit would
// count.
const unconfinedScript = `printf . >&3 && exec 3>&- && exec /bin/sh -c "$1"`

// oomNote says, for an error's text, that the command ran out of memory.
func oomNote(o Output, limit int64) string {
	if !o.OOMKilled {
		return ""
	}
	return fmt.Sprintf(" (out of memory: its processes reached the command's limit of %d bytes together, and the kernel killed one)", limit)
}

// waitExitNoReap waits until the process pid has exited (or was killed:
// the caller's context cancel still applies, os/exec watches it from
// Start), leaving it for cmd.Wait to reap.
func waitExitNoReap(pid int) {
	var info unix.Siginfo
	for {
		err := unix.Waitid(unix.P_PID, pid, &info, unix.WEXITED|unix.WNOWAIT, nil)
		if !errors.Is(err, unix.EINTR) {
			return
		}
	}
}

// inheritNothing keeps the worker's inherited descriptors out of the
// sandbox: bubblewrap would pass them on, and inside the sandbox a command
// could read or write them whatever the mounts and namespaces say.
func inheritNothing() error { return fdguard.InheritNothing() }

// startWithOwnKeyring starts cmd with a new, empty session keyring, which
// bubblewrap and the sandbox inherit instead of the worker's. A process
// possesses the session keyring it inherits whatever its uid, so with the
// worker's a command could read every key in it (a login's Kerberos
// tickets, credentials an init stored) and add keys that outlive it.
//
// Credentials are per thread, so the start runs on one OS thread kept for
// it (launch), which joins a new keyring before each start. That thread
// never ends: the launcher's parent-death signal (Pdeathsig) fires when
// the thread that forked it ends, so ending a thread kills the children
// any goroutine forked on it, and a locked thread that had served other
// goroutines before would take their commands down with it.
func startWithOwnKeyring(cmd *exec.Cmd) error {
	launcherOnce.Do(func() {
		launches = make(chan launchRequest)
		go launch(launches)
	})
	req := launchRequest{cmd: cmd, done: make(chan error, 1)}
	launches <- req
	return <-req.done
}

var (
	launcherOnce sync.Once
	launches     chan launchRequest
)

type launchRequest struct {
	cmd  *exec.Cmd
	done chan error
}

// launch starts each requested command from this goroutine's own OS
// thread, after it joined a new session keyring (startWithOwnKeyring). It
// runs for the life of the process.
func launch(reqs <-chan launchRequest) {
	runtime.LockOSThread()
	for req := range reqs {
		// ENOSYS: a kernel without keyrings; EPERM: a seccomp filter (as
		// container runtimes install) refuses keyctl, to the sandbox too.
		// Either way there is no keyring to pass on.
		_, _, errno := unix.Syscall(unix.SYS_KEYCTL, unix.KEYCTL_JOIN_SESSION_KEYRING, 0, 0)
		if errno != 0 && errno != unix.ENOSYS && errno != unix.EPERM {
			req.done <- fmt.Errorf("join a new session keyring: %w", errno)
			continue
		}
		req.done <- req.cmd.Start()
	}
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
	if o.OOMKilled {
		b.WriteString("out of memory; ")
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

// runCommandSpec is run_command as a kernel agent's model is offered it.
var runCommandSpec = kernel.ToolSpec{
	Description: "Run a shell command (sh -c) in the run's workspace, inside a sandbox. The workspace is the current directory and persists between calls; the answer is the command's exit status and output, abbreviated.",
	Parameters: json.RawMessage(`{"type":"object","properties":{` +
		`"command":{"type":"string","description":"the shell command"},` +
		`"timeout_s":{"type":"integer","minimum":1,"description":"seconds before the command is killed"}},` +
		`"required":["command"],"additionalProperties":false}`),
}

// Describe implements kernel.Described.
func (r *runCommand) Describe() kernel.ToolSpec { return runCommandSpec }
