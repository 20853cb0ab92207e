package sandbox

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/seed-7bc021c3/reckon/platform/proctab"
)

// ReapOrphans SIGKILLs the sandboxes a dead worker left behind whose
// workspace lies beneath root, and says how many it killed.
//
// A worker that dies takes bubblewrap's launcher with it (Pdeathsig), but
// the sandbox's init depends on bubblewrap's --die-with-parent, which is
// not armed for the whole of bubblewrap's setup: a launcher killed before
// it released its child leaves the init blocked for good on an eventfd,
// and one killed between the init's setsid and do_init leaves the init
// running the command. Either is an init (PID 1 of its own PID namespace)
// whose parent is not a bubblewrap launcher, which a live sandbox's init
// always has. A worker calls this as it starts, before it takes work, so
// a command of its dead predecessor cannot still be writing into a
// workspace that a probe is about to read. TestReapOrphans.
//
// It also removes the empty cgroups dead workers left in the hierarchy at
// DefaultCgroupRoot (reapCgroups), when this worker can use it.
func ReapOrphans(root string) (int, error) {
	root, err := filepath.EvalSymlinks(root)
	if err != nil {
		return 0, fmt.Errorf("reap orphaned sandboxes: %w", err)
	}
	n, err := reap(func(bind string) bool { return beneath(bind, root) })
	// Without a usable hierarchy there is nothing to remove; the worker's
	// tool says so once (Config.Warn).
	if c, _ := newCgroups(DefaultCgroupRoot); c != nil {
		if _, cerr := c.reapCgroups(); cerr != nil {
			err = errors.Join(err, cerr)
		}
	}
	return n, err
}

// reapWorkspace SIGKILLs the sandboxes a dead worker left behind in the
// workspace ws itself (a path without symlinks, as prepare makes it), and
// says how many it killed. Execute calls it before each confined command:
// a worker that starts first reaps them all (ReapOrphans), but a worker
// already running when another on the same host died does not, and a
// re-issue of the dead worker's uncertain operation would then run
// alongside what is left of the original, in the same workspace, until
// the original's own deadline.
func reapWorkspace(ws string) (int, error) {
	return reap(func(bind string) bool { return bind == ws })
}

// reap kills every orphaned sandbox init (orphanedInit) one of whose
// --bind directories match accepts.
func reap(match func(bind string) bool) (int, error) {
	pids, err := proctab.PIDs()
	if err != nil {
		return 0, fmt.Errorf("reap orphaned sandboxes: %w", err)
	}
	killed := 0
	var errs []error
	for _, pid := range pids {
		ok, err := reapIfOrphan(pid, match)
		if err != nil {
			errs = append(errs, err)
		}
		if ok {
			killed++
		}
	}
	return killed, errors.Join(errs...)
}

// reapIfOrphan kills pid if it is an orphaned sandbox init binding a
// directory match accepts. The command name, which most processes fail
// on, is read first; then a pidfd is opened and every check made again
// through /proc, so the kill reaches the process that was checked,
// whatever takes its number later.
func reapIfOrphan(pid int, match func(bind string) bool) (bool, error) {
	if comm(pid) != "bwrap" {
		return false, nil
	}
	ok, err := proctab.KillIf(pid, func() bool { return orphanedInit(pid, match) })
	if err != nil {
		return false, fmt.Errorf("reap orphaned sandbox: %w", err)
	}
	return ok, nil
}

// orphanedInit says whether pid is bubblewrap's sandbox init (comm
// "bwrap", PID 1 of a nested PID namespace) binding a directory match
// accepts (a --bind, as of a workspace), whose parent is not a bubblewrap
// launcher. Anything unreadable is not an orphan.
func orphanedInit(pid int, match func(bind string) bool) bool {
	if comm(pid) != "bwrap" {
		return false
	}
	st, err := readStatus(pid)
	if err != nil || !st.nsInit || st.ppid <= 0 || comm(st.ppid) == "bwrap" {
		return false
	}
	cmdline, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cmdline")
	if err != nil {
		return false
	}
	args := strings.Split(string(cmdline), "\x00")
	for i := 0; i+1 < len(args); i++ {
		if args[i] == "--bind" && match(args[i+1]) {
			return true
		}
	}
	return false
}

// comm is a process's command name, "" when it cannot be read.
func comm(pid int) string {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/comm")
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(b))
}

// beneath says whether path is a directory strictly below root.
func beneath(path, root string) bool {
	rel, err := filepath.Rel(root, path)
	return err == nil && rel != "." && !filepath.IsAbs(rel) && rel != ".." && !strings.HasPrefix(rel, "../")
}
