// Package proctab finds this machine's processes by what their command
// line contains (/proc/<pid>/cmdline): how tests, drills and the soak see,
// and kill, what a command left running.
package proctab

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

// Matching returns the PIDs of this machine's processes, this one left
// out, whose command line contains s. A process that ends while it is read
// is left out.
func Matching(s string) ([]int, error) {
	dirs, err := os.ReadDir("/proc")
	if err != nil {
		return nil, fmt.Errorf("list processes: %w", err)
	}
	self := os.Getpid()
	var pids []int
	for _, d := range dirs {
		pid, err := strconv.Atoi(d.Name())
		if err != nil || pid == self {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", d.Name(), "cmdline"))
		if err == nil && strings.Contains(string(b), s) {
			pids = append(pids, pid)
		}
	}
	return pids, nil
}

// Kill sends SIGKILL to pids and returns how many it signalled; a process
// gone meanwhile is not an error.
func Kill(pids []int) (int, error) {
	for i, pid := range pids {
		if err := syscall.Kill(pid, syscall.SIGKILL); err != nil && !errors.Is(err, syscall.ESRCH) {
			return i, fmt.Errorf("kill %d: %w", pid, err)
		}
	}
	return len(pids), nil
}
