package sandbox

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/seed-7bc021c3/reckon/platform/proctab"
)

// DefaultCgroupRoot is where the cgroup hierarchy is mounted.
const DefaultCgroupRoot = "/sys/fs/cgroup"

// cgroupParent is the cgroup every command's own cgroup is made in, at the
// top of the hierarchy (of each controller's, on cgroup v1). It is left in
// place: other workers of the host may be using it.
const cgroupParent = "reckon-sandbox"

// cpuPeriod and cpuQuota give each command one CPU's worth of time: a
// command that spins on every core (a fork of busy loops, make -j64)
// leaves the rest of the host to the worker (its heartbeats, the other
// commands, a database on the same machine). One core is what most build
// and test steps use; a parallel build on a large host gets slower, not
// stopped.
const (
	cpuPeriod = 100_000 // µs, the kernel's default
	cpuQuota  = cpuPeriod
)

// cgroupRemoveWait bounds how long a command's cgroup may take to empty
// once its processes were SIGKILLed: they exit in milliseconds, unless
// the host is thrashing.
const cgroupRemoveWait = 5 * time.Second

// cgroups is the hierarchy commands are confined in: cgroup v2 (one
// unified tree) or v1 (one tree per controller). Memory is required;
// pids and cpu are used where the host has them.
type cgroups struct {
	v2 bool
	// parents are the reckon-sandbox directories: one on v2 (controller
	// ""); on v1 one per controller, memory first.
	parents []parent
	// pids and cpu say whether those controllers are available.
	pids, cpu bool
}

// cgroupSeq numbers this process's commands, whichever tool runs them
// (cgroup names, see newName).
var cgroupSeq atomic.Uint64

// parent is a reckon-sandbox directory and the v1 controller it is of.
type parent struct{ controller, dir string }

// cgroupLimits are what one command's cgroup bounds.
type cgroupLimits struct {
	memory int64
	procs  int
}

// detectCgroups finds a usable hierarchy under root (v2 when
// root/cgroup.controllers exists, else v1 controllers in root/memory,
// root/pids, root/cpu) and makes the parent cgroup. The error says what
// is missing; missing says which optional controllers were not found
// (commands are confined all the same, without those bounds).
func detectCgroups(root string) (c *cgroups, missing []string, err error) {
	c = &cgroups{}
	if b, err := os.ReadFile(filepath.Join(root, "cgroup.controllers")); err == nil {
		c.v2 = true
		have := strings.Fields(string(b))
		want := []string{"memory"}
		for _, ctl := range []string{"pids", "cpu"} {
			if slices.Contains(have, ctl) {
				want = append(want, ctl)
			} else {
				missing = append(missing, ctl)
			}
		}
		if !slices.Contains(have, "memory") {
			return nil, nil, fmt.Errorf("sandbox: cgroup v2 at %s has no memory controller (cgroup.controllers: %q)", root, strings.TrimSpace(string(b)))
		}
		c.pids, c.cpu = slices.Contains(want, "pids"), slices.Contains(want, "cpu")
		c.parents = []parent{{"", filepath.Join(root, cgroupParent)}}
		if err := c.makeParents(); err != nil {
			return nil, nil, err
		}
		return c, missing, nil
	}
	mem := filepath.Join(root, "memory")
	if _, err := os.Stat(filepath.Join(mem, "memory.usage_in_bytes")); err != nil {
		return nil, nil, fmt.Errorf("sandbox: no cgroup hierarchy with a memory controller at %s (neither %s nor %s): %w",
			root, filepath.Join(root, "cgroup.controllers"), filepath.Join(mem, "memory.usage_in_bytes"), err)
	}
	c.parents = []parent{{"memory", filepath.Join(mem, cgroupParent)}}
	for _, ctl := range []struct {
		name, probe string
		have        *bool
	}{{"pids", "cgroup.procs", &c.pids}, {"cpu", "cpu.cfs_quota_us", &c.cpu}} {
		dir := filepath.Join(root, ctl.name)
		if _, err := os.Stat(filepath.Join(dir, ctl.probe)); err != nil {
			missing = append(missing, ctl.name)
			continue
		}
		*ctl.have = true
		c.parents = append(c.parents, parent{ctl.name, filepath.Join(dir, cgroupParent)})
	}
	if err := c.makeParents(); err != nil {
		return nil, nil, err
	}
	return c, missing, nil
}

// controllers are the v2 controllers commands get, "+memory +pids +cpu"
// as cgroup.subtree_control takes them.
func (c *cgroups) controllers() string {
	s := "+memory"
	if c.pids {
		s += " +pids"
	}
	if c.cpu {
		s += " +cpu"
	}
	return s
}

// makeParents makes the reckon-sandbox cgroups (again, when someone
// removed them) and, on v2, hands the controllers down to its children:
// the top of the tree first, then reckon-sandbox itself, which holds no
// process (v2 allows controllers only below cgroups without processes).
func (c *cgroups) makeParents() error {
	for _, p := range c.parents {
		if err := os.Mkdir(p.dir, 0o755); err != nil && !errors.Is(err, os.ErrExist) {
			return fmt.Errorf("sandbox: create cgroup %s: %w", p.dir, err)
		}
	}
	if !c.v2 {
		return nil
	}
	for _, dir := range []string{filepath.Dir(c.parents[0].dir), c.parents[0].dir} {
		if err := writeControl(filepath.Join(dir, "cgroup.subtree_control"), c.controllers()); err != nil {
			return err
		}
	}
	return nil
}

// newName is a fresh name for a command's cgroup: the worker's PID, which
// tells the reaper whether its owner still lives (reapCgroups), and a
// sequence number.
func newName() string {
	return strconv.Itoa(os.Getpid()) + "-" + strconv.FormatUint(cgroupSeq.Add(1), 10)
}

// cgroup is one command's cgroup: a directory per controller on v1, one
// on v2.
type cgroup struct {
	v2   bool
	dirs []string
}

// cgroupNameAttempts bounds how many names create tries before it gives
// up: a name is taken only when a directory of that name already exists
// (a crashed worker whose PID this one now has, or one planted there),
// so a few in a row mean something is filling the parent on purpose.
const cgroupNameAttempts = 16

// errCgroupNameTaken says a command cgroup's name exists already in one
// of the hierarchies.
var errCgroupNameTaken = errors.New("name taken")

// create makes a command's cgroup with its limits. Every directory of it
// is made by this call: a name that exists already in any hierarchy (left
// by a crashed worker with this PID, or planted by someone else) is never
// adopted, as its limits, its processes and its owner are not this
// command's; the next name is tried instead, up to cgroupNameAttempts.
func (c *cgroups) create(l cgroupLimits) (*cgroup, error) {
	var taken []string
	for range cgroupNameAttempts {
		name := newName()
		g, err := c.createNamed(name, l)
		if !errors.Is(err, errCgroupNameTaken) {
			return g, err
		}
		taken = append(taken, name)
	}
	return nil, fmt.Errorf("sandbox: create cgroup under %s: %d names in a row exist already (%s to %s), none adopted",
		c.parents[0].dir, len(taken), taken[0], taken[len(taken)-1])
}

// createNamed makes the command's cgroup name in every hierarchy, each
// directory by a mkdir that fails if it exists. When one exists, the
// directories this call made are removed, the existing one is left as it
// is, and the error is errCgroupNameTaken.
func (c *cgroups) createNamed(name string, l cgroupLimits) (*cgroup, error) {
	g := &cgroup{v2: c.v2}
	for _, p := range c.parents {
		dir := filepath.Join(p.dir, name)
		err := os.Mkdir(dir, 0o755)
		if errors.Is(err, os.ErrNotExist) {
			// The parent was removed since (by hand, by a test's end).
			if err = c.makeParents(); err == nil {
				err = os.Mkdir(dir, 0o755)
			}
		}
		if errors.Is(err, os.ErrExist) {
			_ = g.remove()
			return nil, fmt.Errorf("sandbox: create cgroup %s: %w", dir, errCgroupNameTaken)
		}
		if err != nil {
			_ = g.remove()
			return nil, fmt.Errorf("sandbox: create cgroup %s: %w", dir, err)
		}
		g.dirs = append(g.dirs, dir)
		if err := c.limit(dir, p.controller, l); err != nil {
			_ = g.remove()
			return nil, err
		}
	}
	return g, nil
}

// limit writes the limits of dir, a command's cgroup in the hierarchy of
// controller (v1) or the unified one (v2, "").
func (c *cgroups) limit(dir, controller string, l cgroupLimits) error {
	mem := strconv.FormatInt(l.memory, 10)
	procs := strconv.Itoa(l.procs)
	var w []control
	switch {
	case c.v2:
		w = []control{{"memory.max", mem, false}, {"memory.swap.max", "0", true}}
		if c.pids {
			w = append(w, control{"pids.max", procs, false})
		}
		if c.cpu {
			w = append(w, control{"cpu.max", fmt.Sprintf("%d %d", cpuQuota, cpuPeriod), false})
		}
	case controller == "memory":
		// Swap counts too where the kernel accounts it (memsw), so that
		// the limit is not a mere push into swap; it must follow the
		// memory limit, never be below it.
		w = []control{{"memory.limit_in_bytes", mem, false}, {"memory.memsw.limit_in_bytes", mem, true}}
	case controller == "pids":
		w = []control{{"pids.max", procs, false}}
	default:
		w = []control{{"cpu.cfs_period_us", strconv.Itoa(cpuPeriod), false}, {"cpu.cfs_quota_us", strconv.Itoa(cpuQuota), false}}
	}
	for _, ctl := range w {
		f := filepath.Join(dir, ctl.file)
		if ctl.optional {
			if _, err := os.Stat(f); err != nil {
				continue
			}
		}
		if err := writeControl(f, ctl.value); err != nil {
			return err
		}
	}
	return nil
}

// control is a value written to a cgroup's file; an optional file the
// kernel does not offer (swap accounting off) is skipped.
type control struct {
	file, value string
	optional    bool
}

// writeControl writes value to a cgroup control file. The file is
// created if absent only so that tests can lay a hierarchy out in a
// plain directory: cgroupfs refuses to create files.
func writeControl(path, value string) error {
	if err := os.WriteFile(path, []byte(value), 0o644); err != nil {
		return fmt.Errorf("sandbox: write %q to %s: %w", value, path, err)
	}
	return nil
}

// place moves pid into the cgroup, in every controller.
func (g *cgroup) place(pid int) error {
	for _, dir := range g.dirs {
		if err := writeControl(filepath.Join(dir, "cgroup.procs"), strconv.Itoa(pid)); err != nil {
			return err
		}
	}
	return nil
}

// path is the cgroup's path in the memory hierarchy.
func (g *cgroup) path() string { return g.dirs[0] }

// oomKilled says whether the kernel's OOM killer killed a process of the
// cgroup because the cgroup reached its own memory limit. The kernel's
// count of kills in a cgroup (oom_kill) counts victims of any OOM killer:
// a host-wide OOM, or one of an ancestor cgroup's limit (a container's),
// that picked a process of the command counts there too, though the
// command stayed within its limit. So the kill needs the cgroup's own
// evidence of reaching its limit beside it: on v2, memory.events' "oom"
// (raised only when a charge of this cgroup, which has no children,
// failed at its memory.max and the OOM path was entered); on v1, which
// has no such count, limitReached. On v1 a command that reached its limit
// (its page cache reclaimed, say) and later lost a process to a host-wide
// OOM is still reported. False when unknown.
func (g *cgroup) oomKilled() bool {
	dir := g.path()
	if g.v2 {
		ev := counters(filepath.Join(dir, "memory.events"))
		return ev["oom_kill"] > 0 && ev["oom"] > 0
	}
	return counters(filepath.Join(dir, "memory.oom_control"))["oom_kill"] > 0 &&
		(limitReached(dir, "memory.") || limitReached(dir, "memory.memsw."))
}

// limitSlack is how far below a v1 limit the cgroup's peak usage may stay
// and still count as having reached it: the charge that fails at the
// limit and leads to the cgroup's own OOM is of at most 8 pages (larger
// ones fail without an OOM), so the usage then was within 32 KiB of it.
const limitSlack = 1 << 20

// limitReached says whether a v1 memory cgroup's counter (prefix
// "memory." or "memory.memsw.") ever stood at its limit: a charge failed
// there (failcnt, which recent kernels no longer count on every failure),
// or its peak usage (max_usage_in_bytes) came within limitSlack of it.
func limitReached(dir, prefix string) bool {
	read := func(f string) (int64, bool) {
		b, err := os.ReadFile(filepath.Join(dir, prefix+f))
		if err != nil {
			return 0, false
		}
		n, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
		return n, err == nil
	}
	if n, ok := read("failcnt"); ok && n > 0 {
		return true
	}
	peak, ok1 := read("max_usage_in_bytes")
	limit, ok2 := read("limit_in_bytes")
	return ok1 && ok2 && peak > 0 && peak >= limit-limitSlack
}

// counters reads a cgroup file of "name value" lines (memory.events,
// memory.oom_control); empty when it cannot be read.
func counters(path string) map[string]int64 {
	m := map[string]int64{}
	b, err := os.ReadFile(path)
	if err != nil {
		return m
	}
	for line := range strings.Lines(string(b)) {
		if k, v, ok := strings.Cut(strings.TrimSpace(line), " "); ok {
			if n, err := strconv.ParseInt(v, 10, 64); err == nil {
				m[k] = n
			}
		}
	}
	return m
}

// remove kills whatever is left in the cgroup and removes it. The
// sandbox's init was killed already, which takes the command's processes
// with it; this is for what escaped that (a launcher killed before it
// reported its init). A process killed is still in the cgroup until it
// has exited, so the removal is retried, killing again, until
// cgroupRemoveWait.
func (g *cgroup) remove() error {
	deadline := time.Now().Add(cgroupRemoveWait)
	var errs []error
	for i := len(g.dirs) - 1; i >= 0; i-- {
		dir := g.dirs[i]
		for {
			g.kill(dir)
			err := syscall.Rmdir(dir)
			if err == nil || errors.Is(err, syscall.ENOENT) {
				break
			}
			if !errors.Is(err, syscall.EBUSY) || time.Now().After(deadline) {
				errs = append(errs, fmt.Errorf("sandbox: remove cgroup %s: %w", dir, err))
				break
			}
			time.Sleep(2 * time.Millisecond)
		}
	}
	return errors.Join(errs...)
}

// kill SIGKILLs every process in the cgroup dir: through cgroup.kill
// where the kernel has it (v2, Linux 5.14), which also reaches processes
// forked meanwhile; else one by one from cgroup.procs (a process forked
// after the read is caught by the next round of remove). Each of those is
// held by a pidfd and seen still in the cgroup before the signal, so a
// process that exited and left its number to another is not hit.
func (g *cgroup) kill(dir string) {
	if g.v2 && writeControl(filepath.Join(dir, "cgroup.kill"), "1") == nil {
		return
	}
	b, err := os.ReadFile(filepath.Join(dir, "cgroup.procs"))
	if err != nil {
		return
	}
	member := "/" + cgroupParent + "/" + filepath.Base(dir) + "\n"
	for _, f := range strings.Fields(string(b)) {
		pid, err := strconv.Atoi(f)
		if err != nil || pid <= 0 {
			continue
		}
		_, _ = proctab.KillIf(pid, func() bool {
			b, err := os.ReadFile("/proc/" + f + "/cgroup")
			return err == nil && strings.Contains(string(b), member)
		})
	}
}

// reapCgroups removes the command cgroups of workers that are gone
// (their PID, the first part of the name, no longer runs) and that are
// empty; a cgroup with processes left in it (an orphaned sandbox not yet
// reaped) stays, bounded as before. It says how many it removed. On v1 it
// reads every controller's parent, not only memory's: a worker that died
// while creating a command's cgroup (memory's removed or never made, the
// pids or cpu one made) leaves a name in the other hierarchies only.
func (c *cgroups) reapCgroups() (int, error) {
	removed := 0
	var errs []error
	var names []string
	for _, p := range c.parents {
		entries, err := os.ReadDir(p.dir)
		if err != nil {
			return 0, fmt.Errorf("sandbox: list cgroups: %w", err)
		}
		for _, e := range entries {
			if e.IsDir() && !slices.Contains(names, e.Name()) {
				names = append(names, e.Name())
			}
		}
	}
	for _, name := range names {
		owner, _, ok := strings.Cut(name, "-")
		pid, err := strconv.Atoi(owner)
		if !ok || err != nil || pid <= 0 || syscall.Kill(pid, 0) != syscall.ESRCH {
			continue
		}
		gone := true
		for i := len(c.parents) - 1; i >= 0; i-- {
			err := syscall.Rmdir(filepath.Join(c.parents[i].dir, name))
			if err != nil && !errors.Is(err, syscall.ENOENT) {
				gone = false
				if !errors.Is(err, syscall.EBUSY) {
					errs = append(errs, fmt.Errorf("sandbox: remove leftover cgroup %s: %w", name, err))
				}
			}
		}
		if gone {
			removed++
		}
	}
	return removed, errors.Join(errs...)
}
