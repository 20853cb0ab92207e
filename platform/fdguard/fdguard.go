// Package fdguard keeps the descriptors a process inherited from whatever
// started it out of the programs it starts.
package fdguard

import (
	"errors"
	"fmt"
	"math"
	"os"
	"strconv"

	"golang.org/x/sys/unix"
)

// InheritNothing marks every descriptor of the process above stderr
// close-on-exec, so that a program it starts gets only what it is handed.
// Go opens its own descriptors close-on-exec, but not those the process
// inherited from whatever started it (a supervisor's pipe, a
// socket-activated listener, a wrapper's database connection): os/exec
// passes them on, and the program could read or write them. The
// descriptors a child is given (ExtraFiles) are set up in the child after
// the fork, so marking the parent's is safe at any time; it is done before
// every start because anything may open one without the flag meanwhile.
func InheritNothing() error {
	err := unix.CloseRange(3, math.MaxUint32, unix.CLOSE_RANGE_CLOEXEC)
	if err == nil {
		return nil
	}
	// Before Linux 5.11 there is no CLOSE_RANGE_CLOEXEC: one by one.
	ents, rerr := os.ReadDir("/proc/self/fd")
	if rerr != nil {
		return fmt.Errorf("mark inherited descriptors close-on-exec: %w", errors.Join(err, rerr))
	}
	for _, e := range ents {
		fd, aerr := strconv.Atoi(e.Name())
		if aerr != nil || fd < 3 {
			continue
		}
		if _, ferr := unix.FcntlInt(uintptr(fd), unix.F_SETFD, unix.FD_CLOEXEC); ferr != nil && !errors.Is(ferr, unix.EBADF) {
			return fmt.Errorf("mark descriptor %d close-on-exec: %w", fd, ferr)
		}
	}
	return nil
}
