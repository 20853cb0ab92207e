package drill

import (
	"fmt"
	"os/exec"
	"syscall"
	"testing"
	"time"
)

// TestKillWith: the drill's last resort for a command that outlived its
// stopped worker kills exactly the processes that carry the marker in
// their command line.
func TestKillWith(t *testing.T) {
	t.Parallel()
	marker := fmt.Sprintf("underway-killwith-%d.mark", time.Now().UnixNano())
	cmd := exec.Command("sh", "-c", ": "+marker+" && sleep 100")
	other := exec.Command("sleep", "100")
	for _, c := range []*exec.Cmd{cmd, other} {
		if err := c.Start(); err != nil {
			t.Fatal(err)
		}
	}
	defer func() { _ = other.Process.Kill(); _ = other.Wait() }()
	if running, err := processWith(marker); err != nil || !running {
		t.Fatalf("the marked command is not seen running: %v %v", running, err)
	}
	n, err := killWith(marker)
	if err != nil || n != 1 {
		t.Fatalf("killWith: %d killed, %v; want the one marked process", n, err)
	}
	err = cmd.Wait()
	if ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); !ok || !ws.Signaled() || ws.Signal() != syscall.SIGKILL {
		t.Fatalf("the marked command ended with %v, want SIGKILL", err)
	}
	if running, _ := processWith(marker); running {
		t.Fatal("the marked command is still seen after the kill")
	}
	if err := other.Process.Signal(syscall.Signal(0)); err != nil {
		t.Fatalf("a process without the marker was killed too: %v", err)
	}
}
