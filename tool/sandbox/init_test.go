package sandbox

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/seed-7bc021c3/reckon/kernel"
)

// bwrapWithoutParentDeath returns a bubblewrap that never arms the
// sandbox init's parent-death signal: a wrapper that drops
// --die-with-parent and execs the real one (same PID). It stands, every
// time, for the window in which bubblewrap has not armed it yet (between
// its init's setsid and do_init), which a real launcher's kill hits only
// now and then; the sandbox must take its init down by itself.
func bwrapWithoutParentDeath(t *testing.T) string {
	t.Helper()
	real, err := exec.LookPath("bwrap")
	if err != nil {
		t.Fatalf("bubblewrap: %v", err)
	}
	dir := wsDir(t)
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "bwrap-no-parent-death")
	script := fmt.Sprintf(`#!/bin/sh
n=$#
while [ "$n" -gt 0 ]; do
  a=$1; shift; n=$((n-1))
  [ "$a" = --die-with-parent ] || set -- "$@" "$a"
done
exec %s "$@"
`, real)
	if err := os.WriteFile(path, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestSandboxInitKilled ends a command three ways under a bubblewrap
// whose init never gets --die-with-parent's signal, with a background
// process left in the sandbox each time: every process of the sandbox
// must be gone, and the background one must never write its file.
func TestSandboxInitKilled(t *testing.T) {
	t.Parallel()
	bwrap := bwrapWithoutParentDeath(t)
	cases := []struct {
		name    string
		command string // %s: the marker
		timeout int
		cancel  bool // the caller cancels once the command runs
		errType string
	}{
		{"caller cancels", "(sleep 2.%s; touch late) >/dev/null 2>&1 & touch running; sleep 30", 30, true, ErrorTypeCommandCanceled},
		{"timeout", "(sleep 2.%s; touch late) >/dev/null 2>&1 & sleep 30", 1, false, ErrorTypeCommandTimeout},
		{"command exits, a background process stays", "(sleep 2.%s; touch late) >/dev/null 2>&1 & echo started", 30, false, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			ws := wsDir(t)
			marker := fmt.Sprintf("%09d", rand.IntN(1e9))
			tool := NewRunCommand(Config{BwrapPath: bwrap})
			ctx := context.Background()
			if c.cancel {
				var cancel context.CancelFunc
				ctx, cancel = cancelOnceWritten(ctx, filepath.Join(ws, "running"))
				defer cancel()
			}
			t0 := time.Now()
			_, err := tool.Execute(ctx, call(t, ws, map[string]any{"command": fmt.Sprintf(c.command, marker), "timeout_s": c.timeout}))
			if c.errType == "" {
				if err != nil {
					t.Fatalf("Execute: %v", err)
				}
			} else {
				wantToolError(t, err, c.errType, kernel.EffectUncertain)
			}
			// What the command left holds its output pipes until killed; the
			// call must not wait out the 2 s WaitDelay for it.
			if el := time.Since(t0); c.errType == "" && el > 1500*time.Millisecond {
				t.Errorf("run_command returned after %s: it waited for a process the command left", el)
			}
			waitGone(t, marker)
			// The background sleep would have written its file 2 s in.
			time.Sleep(2500 * time.Millisecond)
			if _, err := os.Stat(filepath.Join(ws, "late")); err == nil {
				t.Fatal("a process of the sandbox ran on and wrote its file after run_command returned")
			}
		})
	}
}

// TestSandboxInitNoReport: a bubblewrap that fails before it
// clones writes no report; the call is still an honest start failure, and
// nothing waits for a report that never comes.
func TestSandboxInitNoReport(t *testing.T) {
	t.Parallel()
	ws := wsDir(t)
	dir := wsDir(t)
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	failing := filepath.Join(dir, "bwrap-fails")
	if err := os.WriteFile(failing, []byte("#!/bin/sh\necho 'bwrap: setting up uid map: Permission denied' >&2\nexit 1\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	tool := NewRunCommand(Config{BwrapPath: failing})
	start := time.Now()
	_, err := tool.Execute(context.Background(), call(t, ws, map[string]any{"command": "echo hi", "timeout_s": 5}))
	wantToolError(t, err, ErrorTypeSandboxStartFailed, kernel.EffectNone)
	if el := time.Since(start); el > initReportWait/2 {
		t.Fatalf("a launcher that wrote no report took %s", el)
	}
}

// TestCancelDuringSetup cancels commands at random points of
// bubblewrap's first milliseconds (before it clones, while it sets the
// sandbox up, as the command starts): whatever the moment, nothing of the
// sandbox may run on, and a call that says the command never started must
// be right.
func TestCancelDuringSetup(t *testing.T) {
	t.Parallel()
	ws := wsDir(t)
	marker := fmt.Sprintf("%09d", rand.IntN(1e9))
	tool := NewRunCommand(Config{})
	const n = 30
	for i := range n {
		ctx, cancel := context.WithTimeout(context.Background(), time.Duration(rand.IntN(20000))*time.Microsecond)
		_, err := tool.Execute(ctx, call(t, ws, map[string]any{"command": fmt.Sprintf("touch started-%d; sleep 1.%s; touch late-%d", i, marker, i), "timeout_s": 30}))
		cancel()
		typ, effect := kernel.Classify(err)
		switch {
		case typ == ErrorTypeSandboxStartFailed && effect == kernel.EffectNone:
			if _, serr := os.Stat(filepath.Join(ws, fmt.Sprintf("started-%d", i))); serr == nil {
				t.Errorf("call %d: effect=none, but its command started", i)
			}
		case typ == ErrorTypeCommandCanceled && effect == kernel.EffectUncertain:
		default:
			t.Errorf("call %d: %s/%s (%v), want a start failure or a cancel", i, typ, effect, err)
		}
	}
	waitGone(t, marker)
	time.Sleep(1200 * time.Millisecond)
	if late, _ := filepath.Glob(filepath.Join(ws, "late-*")); len(late) > 0 {
		t.Fatalf("cancelled commands ran on: %v", late)
	}
}
