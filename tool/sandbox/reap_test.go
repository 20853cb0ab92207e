package sandbox

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/seed-7bc021c3/reckon/internal/reckontest"
	"github.com/seed-7bc021c3/reckon/platform/proctab"
)

// orphanSandbox starts a sandbox for a workspace beneath root the way
// Execute does, under a bubblewrap that never arms --die-with-parent,
// running args (bubblewrap's command line after its own options) until
// the sandbox's command, a sleep marked by marker, runs (commandRuns);
// then it SIGKILLs the launcher, as a dying
// worker's Pdeathsig would, and returns the sandbox init's PID, still
// alive.
func orphanSandbox(t *testing.T, root string, args []string, marker string) int {
	t.Helper()
	ws := filepath.Join(root, "ws-"+fmt.Sprint(rand.IntN(1e6)))
	if err := os.Mkdir(ws, 0o777); err != nil {
		t.Fatal(err)
	}
	devNull, err := os.OpenFile(os.DevNull, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer devNull.Close()
	cmd, initPID := launchSandbox(t, bwrapWithoutParentDeath(t), ws, []string{"PATH=" + sandboxPath}, args, devNull)
	reckontest.Eventually(t, 10*time.Second, "the sandbox's command to run", func() bool { return commandRuns(marker) })
	_ = cmd.Process.Kill()
	_ = cmd.Wait()
	reckontest.Eventually(t, 5*time.Second, "the sandbox init to be reparented", func() bool { return comm(initPID) == "bwrap" && !orphanOf(initPID, cmd.Process.Pid) })
	return initPID
}

// launchSandbox starts bwrap with the sandbox's options for ws, env and
// args after them, as Execute's user, fd 3 being marker; it returns the
// launcher and the PID of the sandbox's init from bubblewrap's report.
func launchSandbox(t *testing.T, bwrap, ws string, env, args []string, marker *os.File) (*exec.Cmd, int) {
	t.Helper()
	o := NewRunCommand(Config{}).(*runCommand).o
	ids, err := identityFiles(o.UID, o.GID, ws)
	if err != nil {
		t.Fatal(err)
	}
	defer closeAll(ids)
	infoR, infoW, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer infoR.Close()
	cmd := exec.Command(bwrap, append(bwrapArgs(ws, env, o), args...)...)
	cmd.ExtraFiles = []*os.File{marker, ids[0], ids[1], infoW}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if os.Geteuid() == 0 {
		cmd.SysProcAttr.Credential = &syscall.Credential{Uid: o.UID, Gid: o.GID, Groups: []uint32{}}
		if err := os.Chown(ws, int(o.UID), int(o.GID)); err != nil {
			t.Fatal(err)
		}
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	infoW.Close()
	var report struct {
		ChildPID int `json:"child-pid"`
	}
	if err := json.NewDecoder(infoR).Decode(&report); err != nil || report.ChildPID <= 0 {
		t.Fatalf("bubblewrap's report: %v (%+v)", err, report)
	}
	return cmd, report.ChildPID
}

// TestStartScriptNeedsTimeout runs the real start script in the sandbox
// with a PATH that has prlimit but no timeout: the chain must stop before
// the start marker (the command never started), not after it, where the
// failed exec would read as a command that ran. With the sandbox's PATH
// the marker comes.
func TestStartScriptNeedsTimeout(t *testing.T) {
	t.Parallel()
	real, err := exec.LookPath("bwrap")
	if err != nil {
		t.Fatal(err)
	}
	ws := wsDir(t)
	bin := filepath.Join(ws, "bin")
	if err := os.Mkdir(bin, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("/usr/bin/prlimit", filepath.Join(bin, "prlimit")); err != nil {
		t.Fatal(err)
	}
	r := NewRunCommand(Config{}).(*runCommand)
	for _, c := range []struct {
		path   string
		marked bool
	}{{sandboxPath, true}, {bin, false}} {
		markR, markW, err := os.Pipe()
		if err != nil {
			t.Fatal(err)
		}
		cmd, _ := launchSandbox(t, real, ws, []string{"PATH=" + c.path}, r.confinedArgs(prepared{command: "true", timeout: 5 * time.Second}), markW)
		markW.Close()
		_ = cmd.Wait()
		if got := commandStarted(markR); got != c.marked {
			t.Errorf("PATH=%s: start marker %v, want %v", c.path, got, c.marked)
		}
		markR.Close()
	}
}

// orphanOf says whether pid's parent is still launcher.
func orphanOf(pid, launcher int) bool {
	st, err := readStatus(pid)
	return err == nil && st.ppid == launcher
}

// running says whether a process whose command line contains s exists.
func running(s string) bool {
	pids, _ := proctab.Matching(s)
	return len(pids) > 0
}

// commandRuns reports whether a sandbox's command, "sleep <arg>" with
// marker "<arg>" or "sleep <arg>", itself runs: the process whose own
// arguments those are (NUL-separated in /proc's cmdline). The marker
// alone also matches the launcher's and the shells' arguments, which
// exist before bubblewrap has set the sandbox up, and a launcher killed
// then leaves its sandbox's setup stuck for good.
func commandRuns(marker string) bool {
	pids, _ := proctab.Matching("sleep\x00" + strings.TrimPrefix(marker, "sleep "))
	return len(pids) > 0
}

// TestReapOrphans leaves a sandbox running after its launcher's death and
// reaps it: not from another data directory's root, not a live sandbox
// of the same root, but the orphan and its command.
func TestReapOrphans(t *testing.T) {
	t.Parallel()
	root := wsDir(t)
	orphanCmd := fmt.Sprintf("sleep 30.%09d", rand.IntN(1e9))
	initPID := orphanSandbox(t, root, []string{"/bin/sh", "-c", orphanCmd}, orphanCmd)
	t.Cleanup(func() { _ = unix.Kill(initPID, unix.SIGKILL) })

	// A live sandbox of the same root, through run_command.
	liveWS := filepath.Join(root, "live")
	if err := os.Mkdir(liveWS, 0o777); err != nil {
		t.Fatal(err)
	}
	liveCmd := fmt.Sprintf("sleep 30.%09d", rand.IntN(1e9))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		_, err := NewRunCommand(Config{}).Execute(ctx, call(t, liveWS, map[string]any{"command": liveCmd, "timeout_s": 60}))
		done <- err
	}()
	defer func() { cancel(); <-done }()
	reckontest.Eventually(t, 5*time.Second, "the live sandbox's command", func() bool { return running(liveCmd) })

	if n, err := ReapOrphans(wsDir(t)); n != 0 || err != nil {
		t.Fatalf("ReapOrphans of another root: %d killed, %v", n, err)
	}
	if !running(orphanCmd) {
		t.Fatal("the orphan went without being reaped: the test proves nothing")
	}
	n, err := ReapOrphans(root)
	if err != nil || n != 1 {
		t.Fatalf("ReapOrphans: %d killed, %v; want the one orphan", n, err)
	}
	waitGone(t, strings.TrimPrefix(orphanCmd, "sleep "))
	if !running(liveCmd) {
		t.Fatal("ReapOrphans killed a live sandbox")
	}
}

// TestExecuteReapsItsWorkspacesOrphans: a command does not start alongside
// what a dead worker left running in its own workspace (a re-issue of an
// uncertain operation would race the original); it kills that, says so,
// and leaves another workspace's orphan to its own worker.
func TestExecuteReapsItsWorkspacesOrphans(t *testing.T) {
	t.Parallel()
	type reaped struct {
		ws     string
		killed int
		err    error
	}
	var got []reaped
	var mu sync.Mutex
	orphan := func(root string) (string, string) {
		cmd := fmt.Sprintf("sleep 30.%09d", rand.IntN(1e9))
		initPID := orphanSandbox(t, root, []string{"/bin/sh", "-c", cmd}, cmd)
		t.Cleanup(func() { _ = unix.Kill(initPID, unix.SIGKILL) })
		entries, err := os.ReadDir(root)
		if err != nil || len(entries) != 1 {
			t.Fatalf("the orphan's workspace: %v %v", entries, err)
		}
		return filepath.Join(root, entries[0].Name()), cmd
	}
	ws, mine := orphan(wsDir(t))
	_, other := orphan(wsDir(t))

	r := NewRunCommand(Config{Reaped: func(ws string, n int, err error) {
		mu.Lock()
		defer mu.Unlock()
		got = append(got, reaped{ws, n, err})
	}})
	if _, err := r.Execute(context.Background(), call(t, ws, map[string]any{"command": "true"})); err != nil {
		t.Fatal(err)
	}
	waitGone(t, strings.TrimPrefix(mine, "sleep "))
	if !running(other) {
		t.Fatal("a command killed another workspace's orphan")
	}
	mu.Lock()
	defer mu.Unlock()
	if len(got) != 1 || got[0].ws != ws || got[0].killed != 1 || got[0].err != nil {
		t.Fatalf("reported %+v, want one orphan killed in %s", got, ws)
	}
}

// TestSandboxDeadlineWithoutItsWorker orphans a sandbox running the real
// start script for a command with a 1 s timeout that sleeps 30 s: with no
// worker left to kill it and nobody reaping, the sandbox's own deadline
// (timeout plus deadlineSlack) ends it.
func TestSandboxDeadlineWithoutItsWorker(t *testing.T) {
	t.Parallel()
	r := NewRunCommand(Config{}).(*runCommand)
	marker := fmt.Sprintf("30.%09d", rand.IntN(1e9))
	start := time.Now()
	initPID := orphanSandbox(t, wsDir(t), r.confinedArgs(prepared{command: "sleep " + marker, timeout: time.Second}), marker)
	t.Cleanup(func() { _ = unix.Kill(initPID, unix.SIGKILL) })
	// The command itself ran (under the sandbox's timeout, started first)
	// when orphanSandbox returned, so its deadline (timeout plus
	// deadlineSlack) is at most that far from now.
	bound := time.Second + deadlineSlack + 3*time.Second
	reckontest.Eventually(t, bound, "the orphaned command to end at its sandbox deadline (timeout 1 s, then deadlineSlack)",
		func() bool { return !running(marker) })
	if el := time.Since(start); el < time.Second {
		t.Fatalf("the command ended after %s, before its timeout: the test proves nothing", el)
	}
}
