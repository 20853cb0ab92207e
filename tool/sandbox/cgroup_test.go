package sandbox

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/seed-7bc021c3/reckon/kernel"
	"github.com/seed-7bc021c3/reckon/platform/proctab"
)

// hostCgroups is this machine's hierarchy, nil when commands get no
// cgroup here (the tests then assert the fallback).
func hostCgroups(t *testing.T) *cgroups {
	t.Helper()
	c, err := newCgroups(DefaultCgroupRoot)
	if c == nil {
		t.Logf("no cgroups on this machine (%v): asserting the fallback", err)
	}
	return c
}

// cgroupTool is run_command with o, recording the cgroups of its commands.
func cgroupTool(o Config) (*runCommand, func() []*cgroup) {
	r := NewRunCommand(o).(*runCommand)
	var mu sync.Mutex
	var made []*cgroup
	r.cgroupMade = func(g *cgroup) {
		mu.Lock()
		defer mu.Unlock()
		made = append(made, g)
	}
	return r, func() []*cgroup {
		mu.Lock()
		defer mu.Unlock()
		return append([]*cgroup(nil), made...)
	}
}

// wantRemoved fails unless every directory of every cgroup in gs is gone.
func wantRemoved(t *testing.T, what string, gs []*cgroup) {
	t.Helper()
	for _, g := range gs {
		for _, dir := range g.dirs {
			if _, err := os.Stat(dir); !errors.Is(err, fs.ErrNotExist) {
				t.Errorf("%s: cgroup %s left behind (%v)", what, dir, err)
			}
		}
	}
}

// Four processes of 40 MiB each fit their own 64 MiB address space, not
// the command's 64 MiB together; /tmp's pages count in the sum too.
func TestCgroupMemoryBoundsTheCommand(t *testing.T) {
	t.Parallel()
	c := hostCgroups(t)
	// A tail of a stream without a newline holds all of it (40 MiB
	// touched) until the end, which the sleep delays so that the four
	// hold theirs at once.
	hold := `{ head -c 40M /dev/zero; sleep 1; } | tail -n1 >/dev/null`
	cases := map[string]string{
		"four processes":    `for i in 1 2 3 4; do ` + hold + ` & pids="$pids $!"; done; rc=0; for p in $pids; do wait $p || rc=$?; done; exit $rc`,
		"tmp and a process": `head -c 40M /dev/zero > /tmp/fill && ` + hold,
	}
	for name, command := range cases {
		tool, made := cgroupTool(Config{MaxMemory: 64 << 20})
		out, res, err := run(t, tool, call(t, wsDir(t), map[string]any{"command": command, "timeout_s": 30}))
		wantRemoved(t, name, made())
		if c == nil {
			if err != nil || out.OOMKilled {
				t.Fatalf("%s without cgroups: %v (%+v)", name, err, out)
			}
			continue
		}
		te := wantToolError(t, err, ErrorTypeCommandFailed, kernel.EffectUncertain)
		if out.ExitCode != 137 || !out.OOMKilled {
			t.Fatalf("%s: exit %d, oom_killed %v (stderr %q), want 137 after an OOM kill", name, out.ExitCode, out.OOMKilled, out.Stderr)
		}
		if !strings.Contains(res.Summary, "out of memory") || !strings.Contains(te.Error(), "out of memory") {
			t.Fatalf("%s: summary %q, error %v", name, res.Summary, te)
		}
		if !strings.Contains(string(res.Output), `"oom_killed":true`) {
			t.Fatalf("%s: output %s", name, res.Output)
		}
	}
	// A command within its limit is not marked.
	out, _, err := run(t, NewRunCommand(Config{MaxMemory: 64 << 20}), call(t, wsDir(t), map[string]any{"command": "head -c 20M /dev/zero | tail -n1 | wc -c"}))
	if err != nil || out.OOMKilled || strings.Contains(string(mustJSON(out)), "oom_killed") {
		t.Fatalf("20 MiB under 64: %v %+v", err, out)
	}
}

// More processes than MaxProcs fail to start, and the cgroup counts the
// sandbox's own (bubblewrap's launcher, outside the sandbox's user
// namespace, is not counted by RLIMIT_NPROC).
func TestCgroupProcessLimit(t *testing.T) {
	t.Parallel()
	c := hostCgroups(t)
	ws := wsDir(t)
	const maxProcs = 16
	out, err := sandboxed(t, Config{MaxProcs: maxProcs}, ws,
		"n=0; while [ $n -lt 40 ]; do sleep 31.1616 & n=$((n+1)); echo $n > count; done")
	mustFail(t, "40 processes under 16", out, err)
	b, _ := os.ReadFile(filepath.Join(ws, "count"))
	n, _ := strconv.Atoi(strings.TrimSpace(string(b)))
	// In the command's cgroup besides the sleeps: the launcher, the
	// sandbox's init, timeout and the command's shell. RLIMIT_NPROC
	// alone lets one more sleep start.
	want := maxProcs - 4
	if c == nil {
		want = maxProcs - 3
	}
	if n != want {
		t.Fatalf("started %d sleeps under %d processes, want %d (stderr %q)", n, maxProcs, want, out.Stderr)
	}
	waitGone(t, "31.1616")
}

// Every process of the command, the ones bubblewrap and the command fork
// first included, is in the command's cgroup, whose limits are set; a
// cancel removes it.
func TestCgroupPlacement(t *testing.T) {
	t.Parallel()
	c := hostCgroups(t)
	const maxMemory = 96 << 20
	tool, made := cgroupTool(Config{MaxMemory: maxMemory, MaxProcs: 50})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	// Markers of this run only, sharing its token, so that they catch no
	// process of another sandbox test running at the same time.
	token := fmt.Sprintf("%09d", rand.IntN(1e9))
	m1, m2 := "30."+token+"1", "30."+token+"2"
	go func() {
		_, err := tool.Execute(ctx, call(t, wsDir(t), map[string]any{
			"command": "sleep " + m1 + " & sh -c 'sleep " + m2 + "' & wait", "timeout_s": 60}))
		done <- err
	}()
	var pids []int
	deadline := time.Now().Add(10 * time.Second)
	for {
		a, _ := proctab.Matching("sleep\x00" + m1)
		b, _ := proctab.Matching("sleep\x00" + m2)
		if len(a) > 0 && len(b) > 0 {
			// Both sleeps run, so every process the test looks for is
			// there: the launcher, the init, timeout, the shells (each
			// carries a marker, so the token).
			pids, _ = proctab.Matching("30." + token)
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the command's processes did not appear")
		}
		time.Sleep(10 * time.Millisecond)
	}
	gs := made()
	if c == nil {
		if len(gs) != 0 {
			t.Fatalf("cgroups made without a hierarchy: %v", gs)
		}
	} else {
		if len(gs) != 1 {
			t.Fatalf("%d cgroups made, want 1", len(gs))
		}
		g := gs[0]
		rel := "/" + cgroupParent + "/" + filepath.Base(g.path())
		if len(pids) < 6 {
			t.Fatalf("found %d processes of the command, want at least 6: %v", len(pids), pids)
		}
		for _, pid := range pids {
			b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cgroup")
			if err != nil {
				t.Fatal(err)
			}
			for _, ctl := range []string{"memory", "pids", "cpu"} {
				if got := cgroupOf(string(b), ctl, c.v2); got != rel {
					t.Errorf("process %d (%s) is in %s cgroup %q, want %q", pid, comm(pid), ctl, got, rel)
				}
			}
		}
		wantLimits(t, c, g, maxMemory, 50)
	}
	wantCommandOOMFirst(t, pids)
	cancel()
	wantToolError(t, <-done, ErrorTypeCommandCanceled, kernel.EffectUncertain)
	wantRemoved(t, "cancel", gs)
	waitGone(t, "30.7")
}

// cgroupOf is the cgroup of controller ctl in a /proc/<pid>/cgroup text.
func cgroupOf(procCgroup, ctl string, v2 bool) string {
	for line := range strings.Lines(procCgroup) {
		f := strings.SplitN(strings.TrimSpace(line), ":", 3)
		if len(f) != 3 {
			continue
		}
		if v2 && f[0] == "0" {
			return f[2]
		}
		for _, c := range strings.Split(f[1], ",") {
			if !v2 && c == ctl {
				return f[2]
			}
		}
	}
	return ""
}

// wantLimits checks the limit files of the command's cgroup g.
func wantLimits(t *testing.T, c *cgroups, g *cgroup, memory int64, procs int) {
	t.Helper()
	name := filepath.Base(g.path())
	want := map[string]string{}
	dir := func(ctl string) string {
		for _, p := range c.parents {
			if p.controller == ctl || c.v2 {
				return filepath.Join(p.dir, name)
			}
		}
		return ""
	}
	if c.v2 {
		want[filepath.Join(dir(""), "memory.max")] = strconv.FormatInt(memory, 10)
		want[filepath.Join(dir(""), "pids.max")] = strconv.Itoa(procs)
		want[filepath.Join(dir(""), "cpu.max")] = "100000 100000"
	} else {
		want[filepath.Join(dir("memory"), "memory.limit_in_bytes")] = strconv.FormatInt(memory, 10)
		want[filepath.Join(dir("pids"), "pids.max")] = strconv.Itoa(procs)
		want[filepath.Join(dir("cpu"), "cpu.cfs_quota_us")] = "100000"
	}
	for f, v := range want {
		b, err := os.ReadFile(f)
		if err != nil || strings.TrimSpace(string(b)) != v {
			t.Errorf("%s = %q (%v), want %q", f, b, err, v)
		}
	}
}

// A command's cgroup goes when it exits, when it times out, and when it
// leaves processes behind.
func TestCgroupRemoved(t *testing.T) {
	t.Parallel()
	c := hostCgroups(t)
	tool, made := cgroupTool(Config{})
	ws := wsDir(t)
	if _, _, err := run(t, tool, call(t, ws, map[string]any{"command": "echo ok"})); err != nil {
		t.Fatal(err)
	}
	if _, _, err := run(t, tool, call(t, ws, map[string]any{"command": "sleep 30.8181 & echo left", "timeout_s": 5})); err != nil {
		t.Fatal(err)
	}
	_, _, err := run(t, tool, call(t, ws, map[string]any{"command": "sleep 30.8282", "timeout_s": 1}))
	wantToolError(t, err, ErrorTypeCommandTimeout, kernel.EffectUncertain)
	gs := made()
	if c != nil && len(gs) != 3 {
		t.Fatalf("%d cgroups made, want 3", len(gs))
	}
	wantRemoved(t, "exit, background, timeout", gs)
	waitGone(t, "30.8")
}

// Without a usable hierarchy commands run as before, bounded per
// process, and the tool says why once.
func TestCgroupFallback(t *testing.T) {
	t.Parallel()
	var warnings []error
	tool, made := cgroupTool(Config{CgroupRoot: "/nonexistent/cgroup", Warn: func(err error) { warnings = append(warnings, err) }})
	if tool.cg != nil {
		t.Fatalf("a hierarchy at /nonexistent/cgroup")
	}
	if len(warnings) != 1 {
		t.Fatalf("warnings = %v, want one", warnings)
	}
	msg := warnings[0].Error()
	for _, want := range []string{"/nonexistent/cgroup", "memory", "no cgroup", "RLIMIT_AS"} {
		if !strings.Contains(msg, want) {
			t.Errorf("warning %q does not say %q", msg, want)
		}
	}
	out, _, err := run(t, tool, call(t, wsDir(t), map[string]any{"command": "echo ok"}))
	if err != nil || out.Stdout != "ok\n" || !out.Confined {
		t.Fatalf("without cgroups: %v %+v", err, out)
	}
	if len(made()) != 0 || len(warnings) != 1 {
		t.Fatalf("cgroups %v, warnings %v", made(), warnings)
	}
}

// fakeV2 lays out a cgroup v2 root in a temporary directory with
// controllers.
func fakeV2(t *testing.T, controllers string) string {
	t.Helper()
	root := t.TempDir()
	for f, v := range map[string]string{"cgroup.controllers": controllers, "cgroup.subtree_control": ""} {
		if err := os.WriteFile(filepath.Join(root, f), []byte(v), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return root
}

func readTrim(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(string(b))
}

// The v2 path against files laid out as cgroup v2 has them: only what is
// written is checked, not what a kernel makes of it.
func TestCgroupV2Files(t *testing.T) {
	t.Parallel()
	root := fakeV2(t, "cpuset cpu io memory pids")
	c, missing, err := detectCgroups(root)
	if err != nil || !c.v2 || len(missing) != 0 {
		t.Fatalf("detect: %v %+v missing %v", err, c, missing)
	}
	parent := filepath.Join(root, cgroupParent)
	for _, dir := range []string{root, parent} {
		if got := readTrim(t, filepath.Join(dir, "cgroup.subtree_control")); got != "+memory +pids +cpu" {
			t.Fatalf("%s/cgroup.subtree_control = %q", dir, got)
		}
	}
	g, err := c.create(cgroupLimits{memory: 64 << 20, procs: 16})
	if err != nil {
		t.Fatal(err)
	}
	if len(g.dirs) != 1 || filepath.Dir(g.path()) != parent {
		t.Fatalf("cgroup dirs %v", g.dirs)
	}
	wantLimits(t, c, g, 64<<20, 16)
	if err := g.place(4242); err != nil {
		t.Fatal(err)
	}
	if got := readTrim(t, filepath.Join(g.path(), "cgroup.procs")); got != "4242" {
		t.Fatalf("cgroup.procs = %q", got)
	}
	if g.oomKilled() {
		t.Fatalf("OOM-killed before any kill")
	}
	if err := os.WriteFile(filepath.Join(g.path(), "memory.events"), []byte("low 0\nhigh 0\nmax 5\noom 2\noom_kill 2\noom_group_kill 0\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if !g.oomKilled() {
		t.Fatalf("not OOM-killed after 2 kills at the limit")
	}
	// A plain directory is not empty as a cgroup's is, so its removal
	// fails, after cgroup.kill was written.
	if err := g.remove(); err == nil || !strings.Contains(err.Error(), "remove cgroup") {
		t.Fatalf("remove: %v", err)
	}
	if got := readTrim(t, filepath.Join(g.path(), "cgroup.kill")); got != "1" {
		t.Fatalf("cgroup.kill = %q", got)
	}

	// Without pids and cpu: a cgroup all the same, and what is missing said.
	c, missing, err = detectCgroups(fakeV2(t, "memory io"))
	if err != nil || fmt.Sprint(missing) != "[pids cpu]" || c.controllers() != "+memory" {
		t.Fatalf("memory only: %v %v", err, missing)
	}
	// Without memory: no cgroups.
	if _, _, err := detectCgroups(fakeV2(t, "cpu pids")); err == nil || !strings.Contains(err.Error(), "no memory controller") {
		t.Fatalf("no memory: %v", err)
	}
}

// Leftover empty cgroups of a worker that is gone are removed; a live
// worker's are not.
func TestReapCgroups(t *testing.T) {
	t.Parallel()
	c, _, err := detectCgroups(fakeV2(t, "memory pids cpu"))
	if err != nil {
		t.Fatal(err)
	}
	parent := c.parents[0].dir
	dead := filepath.Join(parent, "999999999-1") // above any pid_max
	live := filepath.Join(parent, strconv.Itoa(os.Getpid())+"-1")
	for _, d := range []string{dead, live} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	n, err := c.reapCgroups()
	if err != nil || n != 1 {
		t.Fatalf("reaped %d: %v", n, err)
	}
	if _, err := os.Stat(dead); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("dead worker's cgroup left: %v", err)
	}
	if _, err := os.Stat(live); err != nil {
		t.Fatalf("live worker's cgroup removed: %v", err)
	}
}

// fakeV1 is a directory laid out as cgroup v1 has it, with the memory,
// pids and cpu controllers, for detectCgroups.
func fakeV1(t *testing.T) string {
	t.Helper()
	root := t.TempDir()
	for _, f := range []string{"memory/memory.usage_in_bytes", "pids/cgroup.procs", "cpu/cpu.cfs_quota_us"} {
		if err := os.MkdirAll(filepath.Join(root, filepath.Dir(f)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(root, f), nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return root
}

// On v1 a dead worker's leftover that exists in the pids or cpu hierarchy
// only (it died between the controllers' mkdirs, or memory's was removed
// first) is removed too; a live worker's is not.
func TestReapCgroupsInEveryHierarchy(t *testing.T) {
	t.Parallel()
	c, missing, err := detectCgroups(fakeV1(t))
	if err != nil || len(missing) != 0 || c.v2 || len(c.parents) != 3 {
		t.Fatalf("fake v1: %+v missing %v: %v", c, missing, err)
	}
	dir := func(ctl, name string) string {
		for _, p := range c.parents {
			if p.controller == ctl {
				return filepath.Join(p.dir, name)
			}
		}
		t.Fatalf("no %s parent", ctl)
		return ""
	}
	deadPids := dir("pids", "999999999-1") // above any pid_max
	deadCPU := dir("cpu", "999999999-2")
	live := dir("cpu", strconv.Itoa(os.Getpid())+"-1")
	for _, d := range []string{deadPids, deadCPU, live} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	n, err := c.reapCgroups()
	if err != nil || n != 2 {
		t.Fatalf("reaped %d: %v; want the 2 dead worker's cgroups", n, err)
	}
	for _, d := range []string{deadPids, deadCPU} {
		if _, err := os.Stat(d); !errors.Is(err, fs.ErrNotExist) {
			t.Fatalf("dead worker's cgroup %s left: %v", d, err)
		}
	}
	if _, err := os.Stat(live); err != nil {
		t.Fatalf("live worker's cgroup removed: %v", err)
	}
}

// A command runs through the v2 path end to end against files laid out
// as cgroup v2 has them (the gate is released after the PID is written);
// the directory, not being a real cgroup, cannot be removed, and Warn
// hears of it.
func TestCgroupV2Execute(t *testing.T) {
	t.Parallel()
	if os.Geteuid() != 0 {
		// newCgroups needs root; a worker that is not root gets the fallback.
		tool, made := cgroupTool(Config{CgroupRoot: fakeV2(t, "memory pids cpu")})
		if _, _, err := run(t, tool, call(t, wsDir(t), map[string]any{"command": "true"})); err != nil || len(made()) != 0 {
			t.Fatalf("not root: %v, cgroups %v", err, made())
		}
		return
	}
	var mu sync.Mutex
	var warnings []error
	root := fakeV2(t, "memory pids cpu")
	tool, made := cgroupTool(Config{CgroupRoot: root, Warn: func(err error) {
		mu.Lock()
		defer mu.Unlock()
		warnings = append(warnings, err)
	}})
	out, _, err := run(t, tool, call(t, wsDir(t), map[string]any{"command": "echo ok"}))
	if err != nil || out.Stdout != "ok\n" {
		t.Fatalf("%v %+v", err, out)
	}
	gs := made()
	if len(gs) != 1 {
		t.Fatalf("%d cgroups", len(gs))
	}
	if pid := readTrim(t, filepath.Join(gs[0].path(), "cgroup.procs")); pid == "" {
		t.Fatalf("no PID written")
	}
	mu.Lock()
	defer mu.Unlock()
	if len(warnings) != 1 || !strings.Contains(warnings[0].Error(), "remove cgroup "+gs[0].path()) {
		t.Fatalf("warnings %v", warnings)
	}
}

// What is left in a command's cgroup (here a process the test placed in
// it) is killed when the cgroup is removed.
func TestCgroupRemoveKillsWhatIsLeft(t *testing.T) {
	t.Parallel()
	c := hostCgroups(t)
	if c == nil {
		return // nothing to remove; TestCgroupFallback covers this host
	}
	g, err := c.create(cgroupLimits{memory: 64 << 20, procs: 16})
	if err != nil {
		t.Fatal(err)
	}
	sleep := exec.Command("sleep", "30.9191")
	if err := sleep.Start(); err != nil {
		_ = g.remove()
		t.Fatal(err)
	}
	waited := make(chan error, 1)
	go func() { waited <- sleep.Wait() }()
	if err := g.place(sleep.Process.Pid); err != nil {
		_ = sleep.Process.Kill()
		<-waited
		_ = g.remove()
		t.Fatal(err)
	}
	// Reaped meanwhile, so that the cgroup can empty.
	if err := g.remove(); err != nil {
		t.Fatal(err)
	}
	if err := <-waited; err == nil || !strings.Contains(err.Error(), "killed") {
		t.Fatalf("sleep in the cgroup: %v, want killed", err)
	}
	wantRemoved(t, "leftover process", []*cgroup{g})
}

// nextNames are the names the next n commands' cgroups would get, were
// nothing else to take a number meanwhile (the tests planting them do not
// run in parallel).
func nextNames(n int) []string {
	var names []string
	next := cgroupSeq.Load()
	for i := range uint64(n) {
		names = append(names, strconv.Itoa(os.Getpid())+"-"+strconv.FormatUint(next+1+i, 10))
	}
	return names
}

// plant makes dir, a cgroup directory someone else left or put where a
// command's would go.
func plant(t *testing.T, dir string) {
	t.Helper()
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
}

// A name taken in the hierarchy (a crashed worker's that had this PID, or
// one planted) is not adopted: the command gets the next name, in a cgroup
// of its own, and the existing directory is left untouched. Past
// 16 taken names, creation fails and says why. Not
// parallel: the names planted are the next of this process's sequence.
func TestCgroupNameTaken(t *testing.T) {
	root := fakeV2(t, "memory pids cpu")
	c, _, err := detectCgroups(root)
	if err != nil {
		t.Fatal(err)
	}
	parent := c.parents[0].dir
	taken := filepath.Join(parent, nextNames(1)[0])
	plant(t, taken)
	if err := os.WriteFile(filepath.Join(taken, "memory.max"), []byte("max"), 0o644); err != nil {
		t.Fatal(err)
	}
	g, err := c.create(cgroupLimits{memory: 64 << 20, procs: 16})
	if err != nil {
		t.Fatalf("create with the next name taken: %v", err)
	}
	if g.path() == taken || filepath.Dir(g.path()) != parent {
		t.Fatalf("cgroup %v, the taken one is %s", g.dirs, taken)
	}
	wantLimits(t, c, g, 64<<20, 16)
	if got := readTrim(t, filepath.Join(taken, "memory.max")); got != "max" {
		t.Fatalf("the taken cgroup's memory.max = %q, want it untouched", got)
	}
	if entries, _ := os.ReadDir(taken); len(entries) != 1 {
		t.Fatalf("the taken cgroup holds %d files, want only the planted one", len(entries))
	}

	// Every name create would try is taken.
	for _, name := range nextNames(cgroupNameAttempts) {
		plant(t, filepath.Join(parent, name))
	}
	before, _ := os.ReadDir(parent)
	if g, err := c.create(cgroupLimits{memory: 64 << 20, procs: 16}); err == nil || !strings.Contains(err.Error(), "exist already") {
		t.Fatalf("create with every name taken: %v %v", g, err)
	}
	if after, _ := os.ReadDir(parent); len(after) != len(before) {
		t.Fatalf("%d entries in the parent after a failed create, %d before", len(after), len(before))
	}

	// On this host's hierarchy, through Execute: the next name taken in
	// the last controller only (as a leftover of a worker that died
	// while it made its cgroup), the command runs all the same.
	host := hostCgroups(t)
	if host == nil {
		return
	}
	last := filepath.Join(host.parents[len(host.parents)-1].dir, nextNames(1)[0])
	plant(t, last)
	defer func() {
		if err := syscall.Rmdir(last); err != nil {
			t.Errorf("remove the planted cgroup: %v", err)
		}
	}()
	tool, made := cgroupTool(Config{})
	out, _, err := run(t, tool, call(t, wsDir(t), map[string]any{"command": "echo ok"}))
	if err != nil || out.Stdout != "ok\n" {
		t.Fatalf("command with the next name taken: %v %+v", err, out)
	}
	gs := made()
	if len(gs) != 1 || filepath.Base(gs[0].path()) == filepath.Base(last) {
		t.Fatalf("cgroups %v, the taken name is %s", gs, filepath.Base(last))
	}
	wantRemoved(t, "name taken", gs)
	// Still there (the command's cleanup did not remove it) and empty
	// (the deferred rmdir succeeds): nothing of the command went in it.
	if _, err := os.Stat(last); err != nil {
		t.Fatalf("the planted cgroup: %v", err)
	}
}

// oom_killed is the command's own OOM: a kill the kernel counts in the
// command's cgroup (oom_kill counts the victims of any OOM killer, the
// host's too) together with the cgroup's own evidence of reaching its
// limit (v2: memory.events' oom; v1: a failcnt, or a peak usage at the
// limit). Files laid out as each version has them.
func TestOOMKilledIsTheCgroupsOwn(t *testing.T) {
	t.Parallel()
	const oomControl = "oom_kill_disable 0\nunder_oom 0\noom_kill %d\n"
	events := func(max, oom, kill int) string {
		return fmt.Sprintf("low 0\nhigh 0\nmax %d\noom %d\noom_kill %d\noom_group_kill 0\n", max, oom, kill)
	}
	const limit = 64 << 20
	v1 := func(kill, failcnt, peak int) map[string]string {
		return map[string]string{
			"memory.oom_control": fmt.Sprintf(oomControl, kill), "memory.failcnt": strconv.Itoa(failcnt),
			"memory.max_usage_in_bytes": strconv.Itoa(peak), "memory.limit_in_bytes": strconv.Itoa(limit),
			"memory.memsw.failcnt": "0", "memory.memsw.max_usage_in_bytes": strconv.Itoa(peak), "memory.memsw.limit_in_bytes": strconv.Itoa(limit),
		}
	}
	with := func(m map[string]string, f, v string) map[string]string {
		m[f] = v
		return m
	}
	for _, tc := range []struct {
		name  string
		v2    bool
		files map[string]string
		want  bool
	}{
		{"v2 nothing", true, map[string]string{"memory.events": events(0, 0, 0)}, false},
		{"v2 host-wide OOM killed one", true, map[string]string{"memory.events": events(0, 0, 1)}, false},
		{"v2 reached memory.max, reclaimed, then a host-wide kill", true, map[string]string{"memory.events": events(40, 0, 1)}, false},
		{"v2 own limit", true, map[string]string{"memory.events": events(40, 1, 1)}, true},
		{"v2 own limit, no victim", true, map[string]string{"memory.events": events(40, 1, 0)}, false},
		{"v2 unreadable", true, nil, false},
		{"v1 nothing", false, v1(0, 0, 0), false},
		{"v1 host-wide OOM killed one", false, v1(1, 0, 40<<20), false},
		{"v1 host-wide OOM, usage near the limit but below", false, v1(1, 0, limit-2<<20), false},
		{"v1 own limit, peak at it", false, v1(1, 0, limit), true},
		{"v1 own limit, failcnt", false, v1(2, 12, 60<<20), true},
		{"v1 own memsw limit", false, with(v1(1, 0, 40<<20), "memory.memsw.max_usage_in_bytes", strconv.Itoa(limit)), true},
		{"v1 own memsw limit, failcnt", false, with(v1(1, 0, 40<<20), "memory.memsw.failcnt", "3"), true},
		{"v1 limit reached, no kill", false, v1(0, 7, limit), false},
		{"v1 no usage files", false, map[string]string{"memory.oom_control": fmt.Sprintf(oomControl, 1)}, false},
	} {
		dir := t.TempDir()
		for f, v := range tc.files {
			if err := os.WriteFile(filepath.Join(dir, f), []byte(v), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		if got := (&cgroup{v2: tc.v2, dirs: []string{dir}}).oomKilled(); got != tc.want {
			t.Errorf("%s: oomKilled = %v, want %v", tc.name, got, tc.want)
		}
	}
}

// A command whose process is SIGKILLed from outside (by the test here, as
// an operator or another program might), with no OOM anywhere, exits 137
// and is not reported out of memory: a kill signal alone is no evidence.
func TestKilledFromOutsideIsNotOOM(t *testing.T) {
	t.Parallel()
	// A marker of this test's own: with a fixed one, shared with another
	// test running at the same time, it could kill that test's sleep
	// instead of its own.
	marker := fmt.Sprintf("32.%09d", rand.IntN(1e9))
	done := make(chan struct{})
	go func() {
		defer close(done)
		deadline := time.Now().Add(10 * time.Second)
		for time.Now().Before(deadline) {
			if pids, _ := proctab.Matching("sleep\x00" + marker); len(pids) > 0 {
				for _, pid := range pids {
					_ = syscall.Kill(pid, syscall.SIGKILL)
				}
				return
			}
			time.Sleep(10 * time.Millisecond)
		}
	}()
	out, res, err := run(t, NewRunCommand(Config{MaxMemory: 64 << 20}), call(t, wsDir(t), map[string]any{"command": "sleep " + marker, "timeout_s": 20}))
	<-done
	te := wantToolError(t, err, ErrorTypeCommandFailed, kernel.EffectUncertain)
	if out.ExitCode != 137 || out.OOMKilled || strings.Contains(res.Summary, "out of memory") || strings.Contains(te.Error(), "out of memory") ||
		strings.Contains(string(res.Output), "oom_killed") {
		t.Fatalf("killed from outside: exit %d, oom_killed %v, summary %q, error %v", out.ExitCode, out.OOMKilled, res.Summary, te)
	}
	waitGone(t, marker)
}

// wantCommandOOMFirst fails unless, among pids (a running command's), the
// command's processes are the OOM killer's first choice and the
// sandbox's own (the launcher, this process's child, and the init) are
// left as the worker is.
func wantCommandOOMFirst(t *testing.T, pids []int) {
	t.Helper()
	adj := func(pid int) string {
		b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/oom_score_adj")
		if err != nil {
			t.Fatalf("process %d (%s): %v", pid, comm(pid), err)
		}
		return strings.TrimSpace(string(b))
	}
	own := adj(os.Getpid())
	var sandbox, command int
	for _, pid := range pids {
		st, err := readStatus(pid)
		if err != nil {
			t.Fatal(err)
		}
		want := strconv.Itoa(oomFirst)
		if st.ppid == os.Getpid() || st.nsInit {
			sandbox++
			want = own
		} else {
			command++
		}
		if got := adj(pid); got != want {
			t.Errorf("process %d (%s, parent %d) has oom_score_adj %s, want %s", pid, comm(pid), st.ppid, got, want)
		}
	}
	if sandbox != 2 || command < 4 {
		t.Errorf("%d of the sandbox's own processes and %d of the command's among %v, want 2 and at least 4", sandbox, command, pids)
	}
}
