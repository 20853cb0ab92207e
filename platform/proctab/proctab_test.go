package proctab

import (
	"fmt"
	"os/exec"
	"syscall"
	"testing"
	"time"
)

// TestKillMatching: KillMatching kills exactly the processes that carry the marker in
// their command line (the drill's last resort for a command that outlived
// its stopped worker, the soak's for a killed worker's leftovers).
func TestKillMatching(t *testing.T) {
	t.Parallel()
	marker := fmt.Sprintf("underway-killwith-%d.mark", time.Now().UnixNano())
	// The marked process must not fork: "sh -c ': marker && sleep 100'"
	// forks for the sleep, and the child carries the shell's command line
	// until it execs, so Matching could see two marked processes. read is
	// a builtin, waiting on a pipe nobody writes.
	cmd := exec.Command("sh", "-c", "read x", marker)
	if _, err := cmd.StdinPipe(); err != nil {
		t.Fatal(err)
	}
	other := exec.Command("sleep", "100")
	for _, c := range []*exec.Cmd{cmd, other} {
		if err := c.Start(); err != nil {
			t.Fatal(err)
		}
	}
	defer func() { _ = other.Process.Kill(); _ = other.Wait() }()
	pids, err := Matching(marker)
	if err != nil || len(pids) != 1 || pids[0] != cmd.Process.Pid {
		t.Fatalf("Matching: %v %v; want the marked command %d alone", pids, err, cmd.Process.Pid)
	}
	if n, err := KillMatching(marker, func(int) bool { return true }); err != nil || n != 0 {
		t.Fatalf("KillMatching sparing every process: %d killed, %v", n, err)
	}
	n, err := KillMatching(marker, nil)
	if err != nil || n != 1 {
		t.Fatalf("KillMatching: %d killed, %v; want the one marked process", n, err)
	}
	err = cmd.Wait()
	if ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); !ok || !ws.Signaled() || ws.Signal() != syscall.SIGKILL {
		t.Fatalf("the marked command ended with %v, want SIGKILL", err)
	}
	if pids, _ := Matching(marker); len(pids) != 0 {
		t.Fatal("the marked command is still seen after the kill")
	}
	if err := other.Process.Signal(syscall.Signal(0)); err != nil {
		t.Fatalf("a process without the marker was killed too: %v", err)
	}
}
