package sandbox

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync/atomic"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/seed-7bc021c3/reckon/internal/reckontest"
	"github.com/seed-7bc021c3/reckon/internal/sandboxtest"
	"github.com/seed-7bc021c3/reckon/kernel"
	"github.com/seed-7bc021c3/reckon/platform/proctab"
)

func call(t testing.TB, ws string, args map[string]any) kernel.ToolCall {
	t.Helper()
	b, err := json.Marshal(args)
	if err != nil {
		t.Fatal(err)
	}
	return kernel.ToolCall{Project: "acme", RunID: "run-1", OperationID: "op-1", Tool: ToolName, Args: b, Workspace: ws}
}

func run(t *testing.T, tool kernel.Tool, c kernel.ToolCall) (Output, kernel.ToolResult, error) {
	t.Helper()
	if err := tool.Validate(c); err != nil {
		t.Fatalf("validate: %v", err)
	}
	res, err := tool.Execute(context.Background(), c)
	var out Output
	if len(res.Output) > 0 {
		if jerr := json.Unmarshal(res.Output, &out); jerr != nil {
			t.Fatalf("output %s: %v", res.Output, jerr)
		}
	}
	return out, res, err
}

func wantToolError(t *testing.T, err error, errType, effect string) *kernel.ToolError {
	t.Helper()
	var te *kernel.ToolError
	if !errors.As(err, &te) {
		t.Fatalf("error %v (%T) is not a *kernel.ToolError", err, err)
	}
	if te.ErrorType != errType || te.Effect != effect {
		t.Fatalf("error = %s/%s (%v), want %s/%s", te.ErrorType, te.Effect, te, errType, effect)
	}
	gotType, gotEffect := kernel.Classify(err)
	if gotType != errType || gotEffect != effect {
		t.Fatalf("Classify = %s/%s", gotType, gotEffect)
	}
	return te
}

func TestAvailable(t *testing.T) {
	t.Parallel()
	if err := Available(""); err != nil {
		t.Fatalf("Available: %v", err)
	}
	err := Available("/nonexistent/bwrap")
	if err == nil || !strings.Contains(err.Error(), "bubblewrap (bwrap) is not installed") {
		t.Fatalf("Available(missing) = %v", err)
	}
}

func TestName(t *testing.T) {
	t.Parallel()
	if n := NewRunCommand(Config{}).Name(); n != "run_command" {
		t.Fatalf("Name = %q", n)
	}
}

func TestWriteInsideWorkspace(t *testing.T) {
	t.Parallel()
	ws := wsDir(t)
	tool := NewRunCommand(Config{})
	out, res, err := run(t, tool, call(t, ws, map[string]any{"command": "echo ok > proof.txt && pwd && echo $HOME", "timeout_s": 30}))
	if err != nil {
		t.Fatalf("execute: %v (%+v)", err, out)
	}
	b, err := os.ReadFile(filepath.Join(ws, "proof.txt"))
	if err != nil || string(b) != "ok\n" {
		t.Fatalf("proof.txt = %q, %v", b, err)
	}
	if out.ExitCode != 0 || !out.Confined || out.Truncated {
		t.Fatalf("output = %+v", out)
	}
	if want := ws + "\n" + ws + "\n"; out.Stdout != want {
		t.Fatalf("stdout = %q, want %q (cwd and HOME are the workspace)", out.Stdout, want)
	}
	if !strings.HasPrefix(res.Summary, "exit 0; "+ws) {
		t.Fatalf("summary = %q", res.Summary)
	}
}

func TestWriteOutsideWorkspaceFails(t *testing.T) {
	t.Parallel()
	ws := wsDir(t)
	// Writable on the host, absent from the sandbox (not under /tmp, which
	// the sandbox replaces with a private tmpfs).
	outside, err := os.MkdirTemp("/var/tmp", "reckon-sandbox-outside-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(outside) })
	tool := NewRunCommand(Config{})
	targets := []string{
		"/etc/reckon-test-" + filepath.Base(ws),
		"/root/reckon-test-" + filepath.Base(ws),
		filepath.Join(outside, "x"),
	}
	for _, cmd := range []string{
		"echo x > " + targets[0],
		"touch " + targets[1],
		"echo x > " + targets[2],
		// A root command must not be able to remount the root read-write.
		"mount -o remount,rw / && echo x > " + targets[0],
	} {
		out, _, err := run(t, tool, call(t, ws, map[string]any{"command": cmd}))
		wantToolError(t, err, ErrorTypeCommandFailed, kernel.EffectUncertain)
		if out.ExitCode == 0 {
			t.Fatalf("%q: exit 0", cmd)
		}
		if strings.HasPrefix(cmd, "mount") {
			if out.Stderr == "" {
				t.Fatalf("%q: no stderr", cmd)
			}
		} else if !strings.Contains(out.Stderr, "Read-only file system") && !strings.Contains(out.Stderr, "No such file or directory") &&
			!strings.Contains(out.Stderr, "Directory nonexistent") {
			// /etc is read-only; /root and /var are not there at all.
			t.Fatalf("%q: stderr = %q, want Read-only file system or a missing directory", cmd, out.Stderr)
		}
	}
	for _, p := range targets {
		// (A worker that is not root may not even stat /root's entries.)
		if _, err := os.Stat(p); !errors.Is(err, os.ErrNotExist) && !errors.Is(err, os.ErrPermission) {
			os.Remove(p)
			t.Fatalf("%s exists after the sandboxed write (stat err %v)", p, err)
		}
	}
}

func TestNetworkUnreachable(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	var accepted atomic.Int32
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			accepted.Add(1)
			c.Close()
		}
	}()
	port := ln.Addr().(*net.TCPAddr).Port
	cmd := fmt.Sprintf("bash -c 'echo > /dev/tcp/127.0.0.1/%d'", port)

	// Control: the same command unconfined reaches the listener, so the
	// sandboxed failure below is the sandbox's doing.
	free := NewRunCommand(Config{Unconfined: true})
	if _, _, err := run(t, free, call(t, wsDir(t), map[string]any{"command": cmd})); err != nil {
		t.Fatalf("unconfined control could not connect: %v", err)
	}
	// The accept loop counts asynchronously: wait for the control's
	// connection to be counted, or it would be blamed on the sandbox.
	for deadline := time.Now().Add(5 * time.Second); accepted.Load() == 0; {
		if time.Now().After(deadline) {
			t.Fatal("the listener never counted the control connection")
		}
		time.Sleep(time.Millisecond)
	}
	before := accepted.Load()

	tool := NewRunCommand(Config{})
	out, _, err := run(t, tool, call(t, wsDir(t), map[string]any{"command": cmd}))
	wantToolError(t, err, ErrorTypeCommandFailed, kernel.EffectUncertain)
	if !strings.Contains(out.Stderr, "Connection refused") && !strings.Contains(out.Stderr, "unreachable") {
		t.Fatalf("stderr = %q", out.Stderr)
	}
	// A marker connection from outside, after the command: the listener
	// accepts in arrival order, so once the marker is counted, anything the
	// sandbox got through would have been counted before it. A condition
	// wait, not a guess at how long an accept takes.
	marker, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	marker.Close()
	reckontest.Eventually(t, 5*time.Second, "the marker connection", func() bool { return accepted.Load() > before })
	if got := accepted.Load(); got != before+1 {
		t.Fatalf("listener accepted %d connections from the sandbox", got-before-1)
	}
	// No interface but loopback exists in the sandbox's network namespace.
	out, _, err = run(t, tool, call(t, wsDir(t), map[string]any{"command": "tail -n +3 /proc/net/dev | cut -d: -f1 | tr -d ' '"}))
	if err != nil {
		t.Fatalf("list interfaces: %v", err)
	}
	if strings.TrimSpace(out.Stdout) != "lo" {
		t.Fatalf("interfaces in the sandbox: %q", out.Stdout)
	}
}

func TestEnvironmentScrubbed(t *testing.T) {
	// Not parallel: t.Setenv.
	t.Setenv("RECKON_TEST_SECRET", "hunter2")
	for _, unconfined := range []bool{false, true} {
		tool := NewRunCommand(Config{Unconfined: unconfined})
		ws := wsDir(t)
		c := call(t, ws, map[string]any{"command": "env"})
		c.OperationID = "op-7-r2"
		out, _, err := run(t, tool, c)
		if err != nil {
			t.Fatalf("env: %v", err)
		}
		if strings.Contains(out.Stdout, "hunter2") {
			t.Fatalf("secret visible (unconfined=%v):\n%s", unconfined, out.Stdout)
		}
		var names []string
		vars := map[string]string{}
		for _, line := range strings.Split(strings.TrimSpace(out.Stdout), "\n") {
			k, v, _ := strings.Cut(line, "=")
			names = append(names, k)
			vars[k] = v
		}
		sort.Strings(names)
		if vars["RECKON_OPERATION_ID"] != "op-7-r2" || vars["RECKON_RUN_ID"] != "run-1" || vars["RECKON_PROJECT"] != "acme" ||
			vars["HOME"] != ws || vars["PATH"] != sandboxPath || vars["LANG"] != "C.UTF-8" {
			t.Fatalf("env (unconfined=%v):\n%s", unconfined, out.Stdout)
		}
		// sh adds PWD (and sometimes SHLVL/_); nothing else may appear.
		allowed := map[string]bool{"RECKON_OPERATION_ID": true, "RECKON_RUN_ID": true, "RECKON_PROJECT": true,
			"HOME": true, "PATH": true, "LANG": true, "PWD": true, "SHLVL": true, "_": true, "OLDPWD": true}
		for _, n := range names {
			if !allowed[n] {
				t.Fatalf("unexpected variable %s in (unconfined=%v):\n%s", n, unconfined, out.Stdout)
			}
		}
	}
}

func TestTimeoutKills(t *testing.T) {
	t.Parallel()
	ws := wsDir(t)
	tool := NewRunCommand(Config{})
	start := time.Now()
	// The background sleep checks that the whole sandbox dies, not just sh.
	out, res, err := run(t, tool, call(t, ws, map[string]any{"command": "(sleep 30.4242; touch late) & echo started; sleep 30", "timeout_s": 1}))
	el := time.Since(start)
	wantToolError(t, err, ErrorTypeCommandTimeout, kernel.EffectUncertain)
	if el > 2500*time.Millisecond {
		t.Fatalf("timeout took %s", el)
	}
	if !out.TimedOut || out.Stdout != "started\n" || !strings.Contains(res.Summary, "timeout") {
		t.Fatalf("output %+v summary %q", out, res.Summary)
	}
	waitGone(t, "30.4242")
}

// waitGone fails unless no process whose command line contains marker is
// left within a second: the kill must take down the command's children.
func waitGone(t *testing.T, marker string) {
	t.Helper()
	deadline := time.Now().Add(time.Second)
	for {
		left, err := proctab.Matching(marker)
		if err != nil {
			t.Fatal(err)
		}
		if len(left) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("processes survived the timeout: %v", left)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func TestTimeoutKillsUnconfined(t *testing.T) {
	t.Parallel()
	tool := NewRunCommand(Config{Unconfined: true})
	start := time.Now()
	_, _, err := run(t, tool, call(t, wsDir(t), map[string]any{"command": "sleep 30.4343 & sleep 30", "timeout_s": 1}))
	wantToolError(t, err, ErrorTypeCommandTimeout, kernel.EffectUncertain)
	if el := time.Since(start); el > 2500*time.Millisecond {
		t.Fatalf("timeout took %s", el)
	}
	waitGone(t, "30.4343")
}

// Unconfined, a command's background processes go when it exits, as a
// confined command's do with its sandbox: left running, they would act on
// the workspace after the call was answered and past the bound the probes
// take for granted (its timeout plus a minute).
func TestExitKillsBackgroundUnconfined(t *testing.T) {
	t.Parallel()
	tool := NewRunCommand(Config{Unconfined: true})
	// A marker of this test's own, so that no other test running at the
	// same time sees (or kills) its sleep.
	marker := fmt.Sprintf("33.%09d", rand.IntN(1e9))
	_, _, err := run(t, tool, call(t, wsDir(t), map[string]any{"command": "sleep " + marker + " >/dev/null 2>&1 & exit 3", "timeout_s": 10}))
	wantToolError(t, err, ErrorTypeCommandFailed, kernel.EffectUncertain)
	waitGone(t, marker)
}

func TestCommandFails(t *testing.T) {
	t.Parallel()
	ws := wsDir(t)
	tool := NewRunCommand(Config{})
	out, _, err := run(t, tool, call(t, ws, map[string]any{"command": "echo partial > p.txt; echo boom >&2; exit 3"}))
	te := wantToolError(t, err, ErrorTypeCommandFailed, kernel.EffectUncertain)
	if out.ExitCode != 3 || !strings.Contains(te.Error(), "boom") {
		t.Fatalf("exit %d, err %v", out.ExitCode, te)
	}
	if _, err := os.Stat(filepath.Join(ws, "p.txt")); err != nil {
		t.Fatalf("partial effect missing: %v", err)
	}
}

func TestOutputCap(t *testing.T) {
	t.Parallel()
	tool := NewRunCommand(Config{MaxOutputBytes: 1000})
	out, res, err := run(t, tool, call(t, wsDir(t), map[string]any{"command": "head -c 100000 /dev/zero | tr '\\0' a; head -c 10 /dev/zero | tr '\\0' b >&2"}))
	if err != nil {
		t.Fatal(err)
	}
	if len(out.Stdout) != 1000 || !out.Truncated || out.Stderr != "bbbbbbbbbb" {
		t.Fatalf("stdout %d bytes, truncated %v, stderr %q", len(out.Stdout), out.Truncated, out.Stderr)
	}
	if len(res.Summary) > summaryMax || !strings.Contains(res.Summary, "truncated") {
		t.Fatalf("summary (%d bytes) %q", len(res.Summary), res.Summary)
	}

	// Multibyte output cut on a rune: the leading "a" puts the cap in the
	// middle of an "é", whose first byte is dropped.
	out, _, err = run(t, tool, call(t, wsDir(t), map[string]any{"command": "printf 'a'; printf 'é%.0s' $(seq 1 600)"}))
	if err != nil {
		t.Fatal(err)
	}
	if !out.Truncated || len(out.Stdout) != 999 || !strings.HasSuffix(out.Stdout, "é") || !utf8.ValidString(out.Stdout) {
		t.Fatalf("stdout %d bytes truncated %v", len(out.Stdout), out.Truncated)
	}
	// Not truncated when within the cap.
	out, _, _ = run(t, tool, call(t, wsDir(t), map[string]any{"command": "echo small"}))
	if out.Truncated {
		t.Fatalf("small output flagged truncated")
	}
}

func TestValidationRejections(t *testing.T) {
	t.Parallel()
	ws := wsDir(t)
	file := filepath.Join(ws, "f")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	tool := NewRunCommand(Config{MaxTimeout: time.Minute})
	raw := func(s string) kernel.ToolCall {
		return kernel.ToolCall{OperationID: "op-1", Tool: ToolName, Args: json.RawMessage(s), Workspace: ws}
	}
	cases := []struct {
		name string
		c    kernel.ToolCall
		want string
	}{
		{"no args", raw(""), "args"},
		{"not object", raw(`"echo"`), "args"},
		{"no command", raw(`{"timeout_s": 3}`), "args.command"},
		{"empty command", raw(`{"command": "  "}`), "args.command"},
		{"command not string", raw(`{"command": 3}`), "args"},
		{"timeout zero", raw(`{"command": "true", "timeout_s": 0}`), "args.timeout_s"},
		{"timeout too big", raw(`{"command": "true", "timeout_s": 61}`), "args.timeout_s"},
		{"timeout fraction", raw(`{"command": "true", "timeout_s": 1.5}`), "args.timeout_s"},
		{"timeout string", raw(`{"command": "true", "timeout_s": "5"}`), "args.timeout_s"},
		// Go's JSON decoding takes any casing of a name, the last one
		// winning, and the journal keeps a copy with its keys sorted, in
		// which another is last: the probes would read a timeout of 5 s
		// for a command that runs 60 s, or another command than ran.
		{"timeout in another case", raw(`{"command": "true", "timeout_s": 5, "TIMEOUT_S": 60}`), "TIMEOUT_S"},
		{"timeout folded", raw(`{"command": "true", "timeout_\u017f": 60}`), "timeout_"},
		{"command in another case", raw(`{"command": "true", "Command": "rm -rf ."}`), "Command"},
		{"no workspace", kernel.ToolCall{Args: json.RawMessage(`{"command":"true"}`)}, "workspace"},
		{"relative workspace", kernel.ToolCall{Args: json.RawMessage(`{"command":"true"}`), Workspace: "ws"}, "workspace"},
		{"missing workspace", kernel.ToolCall{Args: json.RawMessage(`{"command":"true"}`), Workspace: filepath.Join(ws, "nope")}, "workspace"},
		{"file workspace", kernel.ToolCall{Args: json.RawMessage(`{"command":"true"}`), Workspace: file}, "not a directory"},
		{"root workspace", kernel.ToolCall{Args: json.RawMessage(`{"command":"true"}`), Workspace: "/"}, "root"},
	}
	for _, tc := range cases {
		err := tool.Validate(tc.c)
		te := wantToolError(t, err, kernel.ErrorTypeValidation, kernel.EffectNone)
		if !strings.Contains(te.Error(), tc.want) {
			t.Errorf("%s: error %q does not name %q", tc.name, te, tc.want)
		}
		// Execute refuses the same way, before running anything.
		_, err = tool.Execute(context.Background(), tc.c)
		wantToolError(t, err, kernel.ErrorTypeValidation, kernel.EffectNone)
	}
	// Unknown fields are kept and ignored; null timeout means the default.
	if err := tool.Validate(raw(`{"command": "true", "extra": 1, "timeout_s": null}`)); err != nil {
		t.Fatalf("unknown field rejected: %v", err)
	}
}

func TestBwrapMissing(t *testing.T) {
	t.Parallel()
	ws := wsDir(t)
	tool := NewRunCommand(Config{BwrapPath: "/nonexistent/bwrap"})
	c := call(t, ws, map[string]any{"command": "touch x"})
	te := wantToolError(t, tool.Validate(c), kernel.ErrorTypeValidation, kernel.EffectNone)
	if !strings.Contains(te.Error(), "bubblewrap (bwrap) is not installed; install it or set RECKON_SANDBOX_UNCONFINED=1 to run unconfined") {
		t.Fatalf("error = %v", te)
	}
	_, err := tool.Execute(context.Background(), c)
	wantToolError(t, err, kernel.ErrorTypeValidation, kernel.EffectNone)
	if _, err := os.Stat(filepath.Join(ws, "x")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("command ran without bwrap")
	}
}

func TestSandboxStartFailed(t *testing.T) {
	t.Parallel()
	ws := wsDir(t)
	dir := wsDir(t)
	// A "bwrap" that exists but cannot exec (no interpreter) fails at Start.
	bad := filepath.Join(dir, "bwrap")
	if err := os.WriteFile(bad, []byte("#!/nonexistent/interp\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	_, _, err := run(t, NewRunCommand(Config{BwrapPath: bad}), call(t, ws, map[string]any{"command": "touch x"}))
	wantToolError(t, err, ErrorTypeSandboxStartFailed, kernel.EffectNone)

	// A launcher that starts but fails before the command runs (as bwrap
	// does when it cannot build the sandbox) is also effect=none.
	failing := filepath.Join(dir, "bwrap-fails")
	if err := os.WriteFile(failing, []byte("#!/bin/sh\necho 'bwrap: setting up uid map: Permission denied' >&2\nexit 1\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	_, _, err = run(t, NewRunCommand(Config{BwrapPath: failing}), call(t, ws, map[string]any{"command": "touch x"}))
	te := wantToolError(t, err, ErrorTypeSandboxStartFailed, kernel.EffectNone)
	if !strings.Contains(te.Error(), "uid map") {
		t.Fatalf("error = %v", te)
	}
	if _, err := os.Stat(filepath.Join(ws, "x")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("command ran")
	}
}

func TestUnconfinedMarksResult(t *testing.T) {
	t.Parallel()
	ws := wsDir(t)
	tool := NewRunCommand(Config{Unconfined: true, BwrapPath: "/nonexistent/bwrap"})
	out, res, err := run(t, tool, call(t, ws, map[string]any{"command": "echo hi > f && pwd"}))
	if err != nil {
		t.Fatal(err)
	}
	if out.Confined || !strings.HasPrefix(res.Summary, "UNCONFINED; exit 0; "+ws) {
		t.Fatalf("confined=%v summary=%q", out.Confined, res.Summary)
	}
	if !strings.Contains(string(res.Output), `"confined":false`) {
		t.Fatalf("output %s", res.Output)
	}
	if _, err := os.Stat(filepath.Join(ws, "f")); err != nil {
		t.Fatal(err)
	}
	// Failures are marked too.
	_, res, err = run(t, tool, call(t, ws, map[string]any{"command": "exit 2"}))
	wantToolError(t, err, ErrorTypeCommandFailed, kernel.EffectUncertain)
	if !strings.HasPrefix(res.Summary, "UNCONFINED; exit 2") {
		t.Fatalf("summary %q", res.Summary)
	}
}

func TestCallerCancel(t *testing.T) {
	t.Parallel()
	tool := NewRunCommand(Config{})
	ws := wsDir(t)
	ctx, cancel := cancelOnceWritten(context.Background(), filepath.Join(ws, "running"))
	defer cancel()
	start := time.Now()
	_, err := tool.Execute(ctx, call(t, ws, map[string]any{"command": "touch running; sleep 30", "timeout_s": 30}))
	wantToolError(t, err, ErrorTypeCommandCanceled, kernel.EffectUncertain)
	// The sleep would hold the call for 30 s; the start and the kill take
	// well under a second each.
	if el := time.Since(start); el > 5*time.Second {
		t.Fatalf("cancel took %s", el)
	}
}

// cancelOnceWritten is a context cancelled as soon as the file at path
// exists (or after 20 s): a caller that cancels a command which has
// started. A fixed delay could come before the sandbox had started the
// command on a loaded machine, and the call would then (rightly) be a
// start failure with effect none.
func cancelOnceWritten(parent context.Context, path string) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancel(parent)
	go func() {
		reckontest.Poll(20*time.Second, func() bool {
			_, err := os.Stat(path)
			return err == nil || ctx.Err() != nil
		})
		cancel()
	}()
	return ctx, cancel
}

func TestSummaryBounded(t *testing.T) {
	t.Parallel()
	// The "x" puts the summaryMax cut in the middle of an "é".
	s := summary(Output{Confined: true, Stdout: "x" + strings.Repeat("é", 1000)})
	if len(s) > summaryMax || !strings.HasPrefix(s, "exit 0; xé") || !strings.HasSuffix(s, "é") {
		t.Fatalf("summary %d bytes: %q", len(s), s[:20])
	}
}

// BenchmarkRunCommandTrue times a command that does nothing: in the
// sandbox (with a cgroup where the host allows), in the sandbox without
// a cgroup, and unconfined.
func BenchmarkRunCommandTrue(b *testing.B) {
	for _, v := range []struct {
		name string
		o    Config
	}{
		{"bwrap", Config{}},
		{"bwrap-nocgroup", Config{CgroupRoot: "/nonexistent"}},
		{"unconfined", Config{Unconfined: true}},
	} {
		b.Run(v.name, func(b *testing.B) {
			tool := NewRunCommand(v.o)
			c := call(b, wsDir(b), map[string]any{"command": "true"})
			var durs []time.Duration
			for b.Loop() {
				start := time.Now()
				if _, err := tool.Execute(context.Background(), c); err != nil {
					b.Fatal(err)
				}
				durs = append(durs, time.Since(start))
			}
			sort.Slice(durs, func(i, j int) bool { return durs[i] < durs[j] })
			b.ReportMetric(float64(durs[len(durs)/2].Microseconds())/1000, "ms-median")
			b.ReportMetric(float64(durs[len(durs)*99/100].Microseconds())/1000, "ms-p99")
		})
	}
}

// wsDir is a workspace the sandbox's unprivileged user can reach.
func wsDir(t testing.TB) string { return sandboxtest.Dir(t) }
