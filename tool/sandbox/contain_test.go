package sandbox

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/seed-7bc021c3/reckon/kernel"
)

// The containment suite runs under the real bubblewrap sandbox (make deps
// installs it; nothing here is skipped): each test is an attack a
// sandboxed command could try, and what it must get.

// sandboxed runs command confined with o in ws and returns its output and
// error (a failed command is not a test failure here).
func sandboxed(t *testing.T, o Config, ws, command string) (Output, error) {
	t.Helper()
	out, _, err := run(t, NewRunCommand(o), call(t, ws, map[string]any{"command": command, "timeout_s": 60}))
	if !out.Confined {
		t.Fatalf("%q ran unconfined", command)
	}
	return out, err
}

// mustFail asserts the command failed after it started (the sandbox
// denied it something), not that the sandbox never ran.
func mustFail(t *testing.T, what string, out Output, err error) {
	t.Helper()
	var te *kernel.ToolError
	if !errors.As(err, &te) || te.ErrorType != ErrorTypeCommandFailed {
		t.Fatalf("%s: got %v (output %+v), want the command to run and fail", what, err, out)
	}
}

// An unprivileged identity, no capabilities, and no host secrets.
func TestSandboxSeesNoHostSecrets(t *testing.T) {
	t.Parallel()
	for _, p := range []string{"/etc/shadow", "/root"} {
		if _, err := os.Stat(p); err != nil {
			t.Fatalf("control: %s missing on the host: %v", p, err)
		}
	}
	ws := wsDir(t)
	out, err := sandboxed(t, Config{}, ws, "cat /etc/shadow")
	mustFail(t, "read /etc/shadow", out, err)
	out, err = sandboxed(t, Config{}, ws, "ls -a /root")
	mustFail(t, "list /root", out, err)
	out, err = sandboxed(t, Config{}, ws, "ls /etc; echo ---; cat /etc/passwd; echo ---; id -u; grep CapEff /proc/self/status")
	if err != nil {
		t.Fatal(err)
	}
	parts := strings.Split(out.Stdout, "---\n")
	for _, secret := range []string{"shadow", "gshadow", "sudoers", "ssh"} {
		if strings.Contains(parts[0], secret) {
			t.Errorf("/etc in the sandbox lists %s:\n%s", secret, parts[0])
		}
	}
	if strings.Contains(parts[1], "postgres") {
		t.Errorf("/etc/passwd lists host accounts:\n%s", parts[1])
	}
	uid := os.Getuid()
	if uid == 0 {
		uid = DefaultUID
	}
	if fields := strings.Fields(parts[2]); len(fields) < 3 || fields[0] != strconv.Itoa(uid) || fields[2] != "0000000000000000" {
		t.Errorf("identity and capabilities in the sandbox: %q, want uid %d and no capability", parts[2], uid)
	}
}

// No host socket is reachable: not PostgreSQL's, not one in the data
// directory, not an abstract one, and no socket file is visible at all.
func TestSandboxReachesNoHostSocket(t *testing.T) {
	t.Parallel()
	ws := wsDir(t)
	pathSock := filepath.Join(filepath.Dir(ws), "host.sock")
	abstract := fmt.Sprintf("@reckon-sandbox-test-%d", os.Getpid())
	for _, addr := range []string{pathSock, abstract} {
		ln, err := net.Listen("unix", addr)
		if err != nil {
			t.Fatal(err)
		}
		defer ln.Close()
		go func() {
			for {
				c, err := ln.Accept()
				if err != nil {
					return
				}
				c.Close()
			}
		}()
	}
	connect := func(addr string) string {
		py := "import socket,sys; s=socket.socket(socket.AF_UNIX); a=sys.argv[1]; a=('\\0'+a[1:]) if a[0]=='@' else a; s.connect(a); print('connected')"
		return fmt.Sprintf("python3 -c %q %q", py, addr)
	}
	pg := "/var/run/postgresql/.s.PGSQL.5432"
	// Control: unconfined, the same commands connect.
	free := NewRunCommand(Config{Unconfined: true})
	for _, addr := range []string{pathSock, abstract} {
		out, _, err := run(t, free, call(t, ws, map[string]any{"command": connect(addr)}))
		if err != nil || !strings.Contains(out.Stdout, "connected") {
			t.Fatalf("control: unconfined connect to %s: %v %+v", addr, err, out)
		}
	}
	for _, addr := range []string{pathSock, abstract, pg} {
		out, err := sandboxed(t, Config{}, ws, connect(addr))
		mustFail(t, "connect to "+addr, out, err)
		if strings.Contains(out.Stdout, "connected") {
			t.Fatalf("the sandbox connected to %s", addr)
		}
	}
	out, err := sandboxed(t, Config{}, ws, "test -e "+pg+" || test -e /run/postgresql || echo absent")
	if err != nil || strings.TrimSpace(out.Stdout) != "absent" {
		t.Fatalf("PostgreSQL's socket directory is visible: %v %+v", err, out)
	}
	out, err = sandboxed(t, Config{}, ws, "find / -type s 2>/dev/null | grep -v '^/proc/' || true; ls -d /run /var /home 2>&1 || true")
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(out.Stdout), "\n")
	for _, l := range lines {
		if !strings.Contains(l, "No such file or directory") {
			t.Errorf("visible in the sandbox: %q", l)
		}
	}
}

// The data directory and other runs' workspaces are invisible: only the
// run's own workspace is there, on its own path.
func TestSandboxSeesOnlyItsWorkspace(t *testing.T) {
	t.Parallel()
	data := wsDir(t)
	if err := os.Chmod(data, 0o711); err != nil {
		t.Fatal(err)
	}
	ws := filepath.Join(data, "workspaces", "acme", "run-1")
	other := filepath.Join(data, "workspaces", "acme", "run-2")
	for _, d := range []string{ws, other} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for _, f := range []string{filepath.Join(other, "secret.txt"), filepath.Join(data, "temporal.db")} {
		if err := os.WriteFile(f, []byte("not yours\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	out, err := sandboxed(t, Config{}, ws, fmt.Sprintf("ls -A %s; echo ---; ls -A %s; echo ---; echo mine > mine.txt && cat mine.txt",
		data, filepath.Dir(ws)))
	if err != nil {
		t.Fatal(err)
	}
	if want := "workspaces\n---\nrun-1\n---\nmine\n"; out.Stdout != want {
		t.Fatalf("the sandbox sees:\n%s\nwant:\n%s", out.Stdout, want)
	}
	for _, f := range []string{filepath.Join(other, "secret.txt"), filepath.Join(data, "temporal.db")} {
		out, err := sandboxed(t, Config{}, ws, "cat "+f)
		mustFail(t, "read "+f, out, err)
		if strings.Contains(out.Stdout, "not yours") {
			t.Fatalf("read %s", f)
		}
	}
}

// 600 background processes cannot be spawned; the limit is per command,
// so two commands at once each get their own.
func TestSandboxProcessLimit(t *testing.T) {
	t.Parallel()
	ws := wsDir(t)
	spawn := func(n int, marker string) string {
		return fmt.Sprintf("n=0; while [ $n -lt %d ]; do sleep %s & n=$((n+1)); echo $n > count-%s; done; echo spawned $n", n, marker, marker)
	}
	out, err := sandboxed(t, Config{}, ws, spawn(600, "31.6006"))
	mustFail(t, "spawn 600 processes", out, err)
	b, _ := os.ReadFile(filepath.Join(ws, "count-31.6006"))
	if n, _ := strconv.Atoi(strings.TrimSpace(string(b))); n >= DefaultMaxProcs || n < DefaultMaxProcs-10 {
		t.Fatalf("spawned %d background processes, want just under %d (stderr %q)", n, DefaultMaxProcs, out.Stderr)
	}
	waitGone(t, "31.6006")
	// Configurable.
	out, err = sandboxed(t, Config{MaxProcs: 40}, ws, spawn(100, "31.4004"))
	mustFail(t, "spawn 100 processes under 40", out, err)
	b, _ = os.ReadFile(filepath.Join(ws, "count-31.4004"))
	if n, _ := strconv.Atoi(strings.TrimSpace(string(b))); n >= 40 || n < 30 {
		t.Fatalf("spawned %d with MaxProcs 40", n)
	}
	waitGone(t, "31.4004")
	// Two commands at once: 2 × 150 processes fit, since each sandbox
	// counts its own.
	var wg sync.WaitGroup
	errs := make([]error, 2)
	for i := range errs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, errs[i] = sandboxed(t, Config{}, wsDir(t), fmt.Sprintf("n=0; while [ $n -lt 150 ]; do sleep 0.%d%d & n=$((n+1)); done; wait", i+3, i+5))
		}()
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("concurrent command %d of 150 processes: %v", i, err)
		}
	}
}

// A 3 GiB allocation fails under the default 1 GiB; the private /tmp is
// bounded the same way; a file past the size limit is cut off.
func TestSandboxMemoryAndFileLimits(t *testing.T) {
	t.Parallel()
	ws := wsDir(t)
	// A line-buffering tail of a stream with no newline grows until the
	// limit stops it. Under a 256 MiB limit rather than the default 1 GiB:
	// streaming gigabytes through a pipe outlasted the command timeout on
	// a machine busy with the rest of the suite (the default limit is
	// checked by the python3 case below).
	out, err := sandboxed(t, Config{MaxMemory: 256 << 20}, ws, "head -c 600M /dev/zero | tail")
	mustFail(t, "tail of 600 MiB under 256 MiB", out, err)
	if !strings.Contains(out.Stderr, "memory exhausted") && !strings.Contains(out.Stderr, "Cannot allocate memory") {
		t.Fatalf("tail of 600 MiB: stderr %q", out.Stderr)
	}
	out, err = sandboxed(t, Config{}, ws, "python3 -c 'b = bytearray(3 << 30)'")
	mustFail(t, "python3 allocating 3 GiB", out, err)
	if !strings.Contains(out.Stderr, "MemoryError") {
		t.Fatalf("python3 3 GiB: stderr %q", out.Stderr)
	}
	if _, err := sandboxed(t, Config{}, ws, "python3 -c 'b = bytearray(200 << 20); print(len(b))'"); err != nil {
		t.Fatalf("200 MiB under the default limit: %v", err)
	}
	out, err = sandboxed(t, Config{MaxMemory: 64 << 20}, ws, "head -c 100M /dev/zero > /tmp/big")
	mustFail(t, "100 MiB into a 64 MiB /tmp", out, err)
	// In a cgroup, /tmp's pages count in the command's memory of the
	// same 64 MiB, with the command's processes: the limit is reached
	// before /tmp is full, and the OOM killer ends the writer.
	if !strings.Contains(out.Stderr, "No space left on device") && !out.OOMKilled {
		t.Fatalf("/tmp bound: stderr %q, %+v", out.Stderr, out)
	}
	out, err = sandboxed(t, Config{MaxFileSize: 1 << 20}, ws, "head -c 2M /dev/zero > big.bin")
	mustFail(t, "2 MiB file under a 1 MiB limit", out, err)
	if fi, err := os.Stat(filepath.Join(ws, "big.bin")); err != nil || fi.Size() != 1<<20 {
		t.Fatalf("big.bin: %v %v, want exactly 1 MiB", fi, err)
	}
}

// Ordinary commands behave as they do anywhere: sh, echo, cat, sha256sum,
// python3, awk (through /etc/alternatives), a user name, /dev/stderr.
func TestSandboxOrdinaryCommands(t *testing.T) {
	t.Parallel()
	ws := wsDir(t)
	cmd := `echo hello > a.txt && cat a.txt && sha256sum a.txt | cut -c1-16 && sh -c 'exit 0' && awk 'BEGIN { print 6*7 }' && whoami && echo to-stderr > /dev/stderr && echo to-stdout > /dev/stdout`
	want := "hello\n5891b5b522d5df08\n42\nsandbox\nto-stdout\n"
	if _, err := os.Stat("/usr/bin/python3"); err == nil {
		cmd += ` && python3 -c 'import hashlib, json, ssl; print(json.dumps({"ok": True}))'`
		want += "{\"ok\": true}\n"
	}
	out, err := sandboxed(t, Config{}, ws, cmd)
	if err != nil || out.Stdout != want || out.Stderr != "to-stderr\n" || out.ExitCode != 0 {
		t.Fatalf("got %v\nstdout %q\nstderr %q\nwant stdout %q", err, out.Stdout, out.Stderr, want)
	}
}

// Whatever wrote into the workspace as root (an MCP server, a person) is
// handed to the sandbox's user before the command, and a set-user-ID file
// the command leaves behind loses the bit.
func TestSandboxWorkspaceOwnership(t *testing.T) {
	t.Parallel()
	ws := wsDir(t)
	if err := os.Mkdir(filepath.Join(ws, "by-root"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(ws, "by-root", "notes.txt"), []byte("one\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("/etc/hostname", filepath.Join(ws, "link")); err != nil {
		t.Fatal(err)
	}
	hostname, _ := os.Lstat("/etc/hostname")
	out, err := sandboxed(t, Config{}, ws, "echo two >> by-root/notes.txt && touch by-root/new && cp /bin/true suid && chmod 4755 suid && ls -l suid | cut -c1-10")
	if err != nil || !strings.HasPrefix(out.Stdout, "-rwsr-xr-x") {
		t.Fatalf("write into root's files: %v %+v", err, out)
	}
	if b, _ := os.ReadFile(filepath.Join(ws, "by-root", "notes.txt")); string(b) != "one\ntwo\n" {
		t.Fatalf("notes.txt = %q", b)
	}
	fi, err := os.Stat(filepath.Join(ws, "suid"))
	if err != nil || fi.Mode()&os.ModeSetuid != 0 {
		t.Fatalf("suid left on the host: %v %v", fi.Mode(), err)
	}
	// The link itself may change owner; its target never does.
	if after, _ := os.Lstat("/etc/hostname"); after.Sys().(*syscall.Stat_t).Uid != hostname.Sys().(*syscall.Stat_t).Uid {
		t.Fatal("the ownership walk followed a symlink out of the workspace")
	}
}

// While a command runs, a set-user-ID file it makes is its user's on the
// host, and the host mounts the workspace without nosuid: a local user
// who reached it would run as the sandbox's user, the owner of every
// kernel workspace, and could rewrite the evidence of any run. Only root
// and the sandbox's group may pass the directory above a workspace.
func TestSandboxSetIDUnreachableWhileRunning(t *testing.T) {
	t.Parallel()
	if os.Geteuid() != 0 {
		t.Skip("needs a root worker (the CI runs as root)")
	}
	ws := wsDir(t)
	done := make(chan error, 1)
	go func() {
		_, _, err := run(t, NewRunCommand(Config{WorkspacesRoot: filepath.Dir(ws)}), call(t, ws, map[string]any{
			"command": "cp /usr/bin/id x && chmod 4755 x && touch ready && sleep 3", "timeout_s": 30}))
		done <- err
	}()
	deadline := time.Now().Add(20 * time.Second)
	for {
		if _, err := os.Stat(filepath.Join(ws, "ready")); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the command did not plant its file")
		}
		time.Sleep(20 * time.Millisecond)
	}
	local := exec.Command(filepath.Join(ws, "x"))
	local.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 12345, Gid: 12345, Groups: []uint32{}}}
	out, err := local.CombinedOutput()
	if err == nil || strings.Contains(string(out), "euid") {
		t.Errorf("a local user ran the command's set-user-ID file: %s (%v)", out, err)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

// A worker running as root cannot hand the sandbox a workspace its user
// cannot reach: the command is refused before anything runs, naming the
// directory in the way.
func TestSandboxUnreachableWorkspace(t *testing.T) {
	t.Parallel()
	if os.Geteuid() != 0 {
		// Only a root worker changes identity; as anyone else the
		// workspace is the worker's own.
		t.Skip("needs a root worker (the CI runs as root)")
	}
	private := t.TempDir() // its parent is private to root (0700)
	_, err := NewRunCommand(Config{}).Execute(context.Background(), call(t, private, map[string]any{"command": "touch x"}))
	te := wantToolError(t, err, kernel.ErrorTypeValidation, kernel.EffectNone)
	if !strings.Contains(te.Error(), filepath.Dir(private)) || !strings.Contains(te.Error(), "not searchable") {
		t.Fatalf("error = %v", te)
	}
}

// A descriptor the worker inherited from whatever started it (a
// supervisor's pipe, a socket-activated listener, a wrapper's database
// connection) does not pass through bubblewrap into the sandbox: there a
// command could read or write it whatever the mounts and namespaces say.
// Go opens its own descriptors close-on-exec, not the inherited ones; the
// test plants one the same way, opened without O_CLOEXEC.
func TestSandboxInheritsNoDescriptor(t *testing.T) {
	secret := filepath.Join(t.TempDir(), "secret.txt")
	if err := os.WriteFile(secret, []byte("inherited secret\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	low, err := syscall.Open(secret, syscall.O_RDONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer syscall.Close(low)
	// Above the descriptors the launcher is handed (3-6), which would
	// otherwise take its number in the child.
	fd := 100
	for ; ; fd++ {
		if _, err := unix.FcntlInt(uintptr(fd), unix.F_GETFD, 0); errors.Is(err, unix.EBADF) {
			break
		}
	}
	if err := unix.Dup3(low, fd, 0); err != nil {
		t.Fatal(err)
	}
	defer syscall.Close(fd)
	ws := wsDir(t)
	out, err := sandboxed(t, Config{}, ws, fmt.Sprintf(
		"cat /proc/self/fd/%d 2>/dev/null; python3 -c 'import os; print(sorted(int(f) for f in os.listdir(\"/proc/self/fd\")))'", fd))
	if err != nil {
		t.Fatalf("%v %+v", err, out)
	}
	if strings.Contains(out.Stdout, "inherited secret") {
		t.Fatalf("the sandbox read the worker's inherited descriptor %d:\n%s", fd, out.Stdout)
	}
	// 0-2 and the descriptor listdir itself opens.
	if got := strings.TrimSpace(out.Stdout); got != "[0, 1, 2, 3]" {
		t.Fatalf("the command's descriptors are %s, want only stdin, stdout, stderr (and listdir's own)", got)
	}
}

// A command can nest directories thousands deep in moments. The walks the
// worker makes around every command (the workspace handed to the sandbox's
// user before it, set-user-ID bits stripped after it) must not cost the
// square of that depth, which held the worker for minutes, nor leave a
// set-user-ID file reachable by other users where they stop descending.
func TestSandboxDeepWorkspace(t *testing.T) {
	t.Parallel()
	ws := wsDir(t)
	const depth = 3000
	// A set-user-ID file within the walks' reach, and one below it.
	mk := fmt.Sprintf(`perl -e 'use File::Copy; for my $i (1..%d) { mkdir "a" or die; chdir "a" or die; if ($i == 100 || $i == %d) { copy("/bin/true", "suid") or die; chmod 04755, "suid" or die } }'`,
		depth, depth)
	start := time.Now()
	out, err := sandboxed(t, Config{}, ws, mk)
	if err != nil {
		t.Fatalf("%v %+v", err, out)
	}
	out, err = sandboxed(t, Config{}, ws, "cd "+strings.Repeat("a/", 100)+" && ls -l suid | cut -c1-10")
	if err != nil {
		t.Fatalf("%v %+v", err, out)
	}
	if took := time.Since(start); took > 20*time.Second {
		t.Fatalf("two commands in a workspace %d directories deep took %s", depth, took)
	}
	// The walk stripped what it reached (the sandbox sees the file as the
	// previous command's strip left it).
	if !strings.HasPrefix(out.Stdout, "-rwxr-xr-x") {
		t.Fatalf("the set-user-ID file at depth 100 kept its bit: %q", out.Stdout)
	}
	// What it did not reach, no other user can: some directory above it
	// is closed to group and others.
	// Paths this deep pass PATH_MAX: each level is opened from the last.
	fd, err := unix.Open(ws, unix.O_PATH|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { unix.Close(fd) }()
	closed := false
	var st unix.Stat_t
	for i := 0; i < depth && !closed; i++ {
		next, err := unix.Openat(fd, "a", unix.O_PATH|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		unix.Close(fd)
		if err != nil {
			t.Fatalf("open %d levels down: %v", i+1, err)
		}
		fd = next
		if err := unix.Fstat(fd, &st); err != nil {
			t.Fatal(err)
		}
		closed = st.Mode&0o077 == 0
	}
	if !closed {
		t.Fatalf("every directory down to the set-user-ID file at depth %d is open to other users", depth)
	}
	// Closed once, it is left alone: every change of mode is one more
	// change in the workspace manifests around each later command.
	if _, err := sandboxed(t, Config{}, ws, "true"); err != nil {
		t.Fatal(err)
	}
	var again unix.Stat_t
	if err := unix.Fstat(fd, &again); err != nil {
		t.Fatal(err)
	}
	if again.Ctim != st.Ctim {
		t.Fatalf("the closed directory was changed again by a later command's walks (ctime %v, then %v)", st.Ctim, again.Ctim)
	}
}

// The worker's session keyring does not reach the sandbox. A process
// possesses the session keyring it inherits whatever its uid, so a command
// started with the worker's could read every key in it (a login's Kerberos
// tickets, an init's stored credentials) and add keys that outlive it. The
// test gives the thread that calls Execute a session keyring holding a
// secret, as a worker started from a login session has one.
func TestSandboxSeesNoWorkerKeyring(t *testing.T) {
	t.Parallel()
	// The thread's credentials change below. It goes back to the runtime
	// afterwards, keyring and all, rather than ending: a thread that ends
	// kills the children forked on it with a parent-death signal, other
	// tests' commands among them.
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	if _, _, errno := unix.Syscall(unix.SYS_KEYCTL, unix.KEYCTL_JOIN_SESSION_KEYRING, 0, 0); errno != 0 {
		t.Fatalf("join a session keyring: %v", errno)
	}
	id, err := unix.AddKey("user", "reckon-test-secret", []byte("keyring secret"), unix.KEY_SPEC_SESSION_KEYRING)
	if err != nil {
		t.Fatalf("add a key: %v", err)
	}
	// keyctl(KEYCTL_READ) of the session keyring's keys, through perl's
	// syscall (no keyctl binary is assumed).
	read := fmt.Sprintf(`perl -e 'my $b = "\0" x 4096; my $n = syscall(%d, %d, %d, $b, 4096); exit 0 if $n <= 0; for my $id (unpack("l*", substr($b, 0, $n))) { my $c = "\0" x 256; my $m = syscall(%d, %d, $id, $c, 256); print substr($c, 0, $m), "\n" if $m > 0 }'`,
		unix.SYS_KEYCTL, unix.KEYCTL_READ, unix.KEY_SPEC_SESSION_KEYRING, unix.SYS_KEYCTL, unix.KEYCTL_READ)
	// Control: a child of this thread reads the key.
	if b, err := exec.Command("/bin/sh", "-c", read).Output(); err != nil || !strings.Contains(string(b), "keyring secret") {
		t.Fatalf("control: a child of the thread did not read key %d: %v %q", id, err, b)
	}
	ws := wsDir(t)
	out, err := sandboxed(t, Config{}, ws, read)
	if err != nil {
		t.Fatalf("%v %+v", err, out)
	}
	if strings.Contains(out.Stdout, "keyring secret") {
		t.Fatalf("the sandbox read the worker's session keyring:\n%s", out.Stdout)
	}
}

// A worker that is not root strips set-user-ID bits as itself, and a
// command can leave directories it cannot read (mode 000). The strip goes
// on past them: a set-user-ID file elsewhere in the workspace would
// otherwise keep its bit and, on the host, run as the worker's user (its
// configuration, its database access) for any local user who runs it.
func TestStripSetIDPastUnreadableDirectories(t *testing.T) {
	t.Parallel()
	if os.Geteuid() != 0 {
		// Starting a worker of another uid needs root.
		t.Skip("needs a root test process (the CI runs as root)")
	}
	ws := wsDir(t)
	var suid []string
	// Enough names that, in whatever order the directory lists them, files
	// come after unreadable directories.
	const n = 100
	for i := 0; i < n; i++ {
		if err := os.Mkdir(filepath.Join(ws, fmt.Sprintf("a%d", i)), 0o755); err != nil {
			t.Fatal(err)
		}
		f := filepath.Join(ws, fmt.Sprintf("z%d", i))
		if err := os.WriteFile(f, []byte("#!/bin/sh\n"), 0o755); err != nil {
			t.Fatal(err)
		}
		suid = append(suid, f)
	}
	if err := tidyWorkspace(ws, &syscall.Credential{Uid: DefaultUID, Gid: DefaultGID}); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < n; i++ {
		if err := os.Chmod(suid[i], os.ModeSetuid|0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(filepath.Join(ws, fmt.Sprintf("a%d", i)), 0); err != nil {
			t.Fatal(err)
		}
	}
	// The test binary, where that uid can run it.
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	bin, err := os.ReadFile(self)
	if err != nil {
		t.Fatal(err)
	}
	worker := filepath.Join(wsDir(t), "sandbox.test")
	if err := os.WriteFile(worker, bin, 0o755); err != nil {
		t.Fatal(err)
	}
	// The copy's write descriptor lives on, until their exec, in children
	// other tests of this process fork meanwhile, and exec of a file open
	// for writing fails with ETXTBSY (golang.org/issue/22315). Such a
	// start is tried again.
	var out []byte
	for attempt := 1; ; attempt++ {
		cmd := exec.Command(worker)
		cmd.Env = []string{stripAsEnv + "=" + ws}
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: DefaultUID, Gid: DefaultGID, Groups: []uint32{}}}
		out, err = cmd.CombinedOutput()
		if !errors.Is(err, syscall.ETXTBSY) || attempt == 50 {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err != nil {
		t.Fatalf("strip as uid %d: %v: %s", DefaultUID, err, out)
	}
	for _, f := range suid {
		fi, err := os.Stat(f)
		if err != nil {
			t.Fatal(err)
		}
		if fi.Mode()&os.ModeSetuid != 0 {
			t.Fatalf("%s kept its set-user-ID bit (the strip said %q)", filepath.Base(f), out)
		}
	}
}
