package sandbox

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// infoFD is the descriptor number bubblewrap writes its --info-fd report
// to: fd 3 is the start marker, 4 and 5 the identity files.
const infoFD = 6

// initReportWait bounds the wait for bubblewrap's report. bubblewrap
// writes it right after it clones the sandbox's init, a few milliseconds
// after it starts, or closes it unwritten when it fails before that.
const initReportWait = 5 * time.Second

// sandboxInit is the sandbox's own init: bubblewrap's child, PID 1 of the
// command's PID namespace, in a session of its own. Killing it kills every
// process of the namespace. The kill cannot be left to the process group
// (the init leaves it when it calls setsid) nor to --die-with-parent
// alone: bubblewrap arms the init's parent-death signal only after
// setsid, in do_init, so a launcher killed in between leaves the init
// orphaned and the command running. And after a normal exit, a command's
// background processes keep the init alive until that signal fires. The
// init is held by a pidfd, so no kill can reach a process that later
// takes its number. TestSandboxInitKilled.
type sandboxInit struct {
	done chan struct{}
	// pidfd is -1 when there is no init to kill: bubblewrap failed before
	// it cloned, or the init was already gone when the report was read.
	pidfd int
	err   error
}

func newSandboxInit() *sandboxInit { return &sandboxInit{done: make(chan struct{}), pidfd: -1} }

// watch reads bubblewrap's report from info in the background; launcher
// is bubblewrap's PID. The caller closes info after close returns.
func (s *sandboxInit) watch(info *os.File, launcher int) {
	go func() {
		defer close(s.done)
		s.pidfd, s.err = openInit(info, launcher)
	}()
}

// wait waits for the report, for at most initReportWait, and says
// whether it was read.
func (s *sandboxInit) wait() bool {
	t := time.NewTimer(initReportWait)
	defer t.Stop()
	select {
	case <-s.done:
		return true
	case <-t.C:
		return false
	}
}

// kill SIGKILLs the init, and with it the whole sandbox; an init already
// gone is not an error.
func (s *sandboxInit) kill() error {
	if !s.wait() {
		return errors.New("sandbox init: no report from bubblewrap")
	}
	if s.err != nil {
		return s.err
	}
	if s.pidfd < 0 {
		return nil
	}
	if err := unix.PidfdSendSignal(s.pidfd, unix.SIGKILL, nil, 0); err != nil && !errors.Is(err, unix.ESRCH) {
		return fmt.Errorf("sandbox init: kill: %w", err)
	}
	return nil
}

// close releases the pidfd once the report has been read.
func (s *sandboxInit) close() {
	if s.wait() && s.pidfd >= 0 {
		_ = unix.Close(s.pidfd)
		s.pidfd = -1
	}
}

// openInit parses bubblewrap's report ({"child-pid": N, …}) and opens a
// pidfd on N. The number was the launcher's child when bubblewrap wrote
// it; the pidfd pins whichever process holds it now, and only if that
// process's parent is still the launcher is it the same one (a reused
// number belongs to a process another parent started).
func openInit(info *os.File, launcher int) (int, error) {
	_ = info.SetReadDeadline(time.Now().Add(initReportWait))
	b, err := io.ReadAll(io.LimitReader(info, 64<<10))
	if err != nil {
		return -1, fmt.Errorf("sandbox init: read bubblewrap's report: %w", err)
	}
	if len(bytes.TrimSpace(b)) == 0 {
		// bubblewrap stopped before it cloned: there is no init.
		return -1, nil
	}
	var report struct {
		ChildPID int `json:"child-pid"`
	}
	if err := json.Unmarshal(b, &report); err != nil || report.ChildPID <= 0 {
		return -1, fmt.Errorf("sandbox init: bubblewrap's report %q has no child-pid", b)
	}
	fd, err := unix.PidfdOpen(report.ChildPID, 0)
	if errors.Is(err, unix.ESRCH) {
		return -1, nil
	}
	if err != nil {
		return -1, fmt.Errorf("sandbox init: pidfd_open %d: %w", report.ChildPID, err)
	}
	if st, err := readStatus(report.ChildPID); err != nil || st.ppid != launcher {
		// Gone and reaped since (its number maybe taken): nothing of
		// this sandbox to kill.
		_ = unix.Close(fd)
		return -1, nil
	}
	return fd, nil
}

// procStatus is what the sandbox reads of a process's /proc status.
type procStatus struct {
	ppid int
	// nsInit: the process is PID 1 of a PID namespace nested in ours (its
	// NSpid line has more than one entry, the last being 1).
	nsInit bool
}

// readStatus reads a process's parent PID and whether it is a nested PID
// namespace's init from /proc/<pid>/status.
func readStatus(pid int) (procStatus, error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return procStatus{}, err
	}
	var st procStatus
	havePPid := false
	for line := range strings.Lines(string(b)) {
		if v, ok := strings.CutPrefix(line, "PPid:"); ok {
			if st.ppid, err = strconv.Atoi(strings.TrimSpace(v)); err != nil {
				return procStatus{}, fmt.Errorf("/proc/%d/status: PPid: %w", pid, err)
			}
			havePPid = true
		}
		if v, ok := strings.CutPrefix(line, "NSpid:"); ok {
			f := strings.Fields(v)
			st.nsInit = len(f) >= 2 && f[len(f)-1] == "1"
		}
	}
	if !havePPid {
		return procStatus{}, fmt.Errorf("/proc/%d/status: no PPid", pid)
	}
	return st, nil
}
