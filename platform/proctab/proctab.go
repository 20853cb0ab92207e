// Package proctab lists this machine's processes and finds them by what
// their command line contains (/proc/<pid>/cmdline): how tests, drills and
// the soak see, and kill, what a command left running, and how the
// sandbox finds what a dead worker left.
package proctab

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// PIDs returns the PIDs of this machine's processes, this one left out,
// as /proc lists them.
func PIDs() ([]int, error) {
	dirs, err := os.ReadDir("/proc")
	if err != nil {
		return nil, fmt.Errorf("list processes: %w", err)
	}
	self := os.Getpid()
	pids := make([]int, 0, len(dirs))
	for _, d := range dirs {
		if pid, err := strconv.Atoi(d.Name()); err == nil && pid != self {
			pids = append(pids, pid)
		}
	}
	return pids, nil
}

// Matching returns the PIDs of this machine's processes, this one left
// out, whose command line contains s. A process that ends while it is read
// is left out.
func Matching(s string) ([]int, error) {
	all, err := PIDs()
	if err != nil {
		return nil, err
	}
	var pids []int
	for _, pid := range all {
		b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "cmdline"))
		if err == nil && strings.Contains(string(b), s) {
			pids = append(pids, pid)
		}
	}
	return pids, nil
}

// KillMatching sends SIGKILL to every process Matching(s) finds that
// spare does not keep (nil spares none), and returns how many it
// signalled. Each is held by a pidfd and its command line read again
// before the signal, so a process that ended and left its number to
// another is not hit; one gone meanwhile is not an error.
func KillMatching(s string, spare func(pid int) bool) (int, error) {
	pids, err := Matching(s)
	if err != nil {
		return 0, err
	}
	n := 0
	for _, pid := range pids {
		if spare != nil && spare(pid) {
			continue
		}
		ok, err := killIfMatching(pid, s)
		if err != nil {
			return n, err
		}
		if ok {
			n++
		}
	}
	return n, nil
}

func killIfMatching(pid int, s string) (bool, error) {
	return KillIf(pid, func() bool {
		b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "cmdline"))
		return err == nil && strings.Contains(string(b), s)
	})
}

// KillIf sends SIGKILL to pid if check, made once a pidfd holds the
// process, says so, and reports whether it did. check reads /proc/<pid>:
// if the process ended and its number was taken meanwhile, check sees the
// newcomer but the signal, sent through the pidfd, reaches no one. A
// process gone meanwhile is not an error.
func KillIf(pid int, check func() bool) (bool, error) {
	fd, err := unix.PidfdOpen(pid, 0)
	if err != nil {
		return false, nil // gone
	}
	defer unix.Close(fd)
	if !check() {
		return false, nil
	}
	if err := unix.PidfdSendSignal(fd, unix.SIGKILL, nil, 0); err != nil {
		if errors.Is(err, unix.ESRCH) {
			return false, nil
		}
		return false, fmt.Errorf("kill %d: %w", pid, err)
	}
	return true, nil
}
