package soak

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/seed-7bc021c3/reckon/platform/proctab"
)

// procs starts reckon child processes (the same binary as the soak) and
// keeps track of them, so that every one of them is gone when the soak
// ends, whichever way it ends.
type procs struct {
	bin    string
	env    []string // the whole environment of every child
	logDir string

	mu   sync.Mutex
	seq  int
	live map[*proc]bool
}

// proc is one child process.
type proc struct {
	name    string
	cmd     *exec.Cmd
	done    chan struct{} // closed once the process has exited
	exitErr error

	mu      sync.Mutex
	matches map[string]string // first submatch of each watched pattern
	waiters []chan struct{}
}

// temporalLine is what `reckon dev` prints about its embedded server.
var temporalLine = regexp.MustCompile(`embedded Temporal on (127\.0\.0\.1:\d+)`)

// workerLine is what `reckon worker` prints once it polls.
var workerLine = regexp.MustCompile(`reckon worker: (executing runs)`)

// start starts `reckon <args>` with extra environment; its output goes to
// <logDir>/<name>-<n>.log.
func (ps *procs) start(name string, args []string, extraEnv ...string) (*proc, error) {
	ps.mu.Lock()
	ps.seq++
	logPath := filepath.Join(ps.logDir, fmt.Sprintf("%03d-%s.log", ps.seq, name))
	ps.mu.Unlock()
	logf, err := os.Create(logPath)
	if err != nil {
		return nil, fmt.Errorf("log of %s: %w", name, err)
	}
	cmd := exec.Command(ps.bin, args...)
	cmd.Env = append(append([]string{}, ps.env...), extraEnv...)
	cmd.Stdout = logf
	p := &proc{name: name, cmd: cmd, done: make(chan struct{}), matches: map[string]string{}}
	cmd.Stderr = &lineWriter{log: logf, line: p.noteLine}
	// A process that exits while something it started still holds its
	// stderr (a tool call's sandbox outliving a SIGKILLed worker) must not
	// keep Wait, and with it the soak, waiting for that pipe to close.
	cmd.WaitDelay = 2 * time.Second
	// Own process group (a Ctrl-C reaches only the soak, which then ends
	// its children itself), and SIGKILL if the soak itself dies.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		logf.Close()
		return nil, fmt.Errorf("start reckon %s: %w", strings.Join(args, " "), err)
	}
	ps.mu.Lock()
	if ps.live == nil {
		ps.live = map[*proc]bool{}
	}
	ps.live[p] = true
	ps.mu.Unlock()
	go func() {
		p.exitErr = cmd.Wait()
		logf.Close()
		ps.mu.Lock()
		delete(ps.live, p)
		ps.mu.Unlock()
		close(p.done)
	}()
	return p, nil
}

// lineWriter copies a process's stderr to its log and hands every
// complete line to line.
type lineWriter struct {
	log  io.Writer
	line func(string)
	buf  []byte
}

func (w *lineWriter) Write(b []byte) (int, error) {
	_, _ = w.log.Write(b)
	w.buf = append(w.buf, b...)
	for {
		i := bytes.IndexByte(w.buf, '\n')
		if i < 0 {
			break
		}
		w.line(string(w.buf[:i]))
		w.buf = w.buf[i+1:]
	}
	if len(w.buf) > 1<<20 {
		w.buf = w.buf[:0] // a line this long is nobody's ready line
	}
	return len(b), nil
}

// noteLine notes the lines the soak waits for.
func (p *proc) noteLine(line string) {
	for _, re := range []*regexp.Regexp{temporalLine, workerLine} {
		if m := re.FindStringSubmatch(line); m != nil {
			p.mu.Lock()
			if _, ok := p.matches[re.String()]; !ok {
				p.matches[re.String()] = m[1]
			}
			for _, w := range p.waiters {
				close(w)
			}
			p.waiters = nil
			p.mu.Unlock()
		}
	}
}

// await waits until the process printed a line matching re and returns its
// first submatch; it fails when the process exits first or after timeout.
func (p *proc) await(ctx context.Context, re *regexp.Regexp, timeout time.Duration) (string, error) {
	deadline := time.After(timeout)
	for {
		p.mu.Lock()
		v, ok := p.matches[re.String()]
		ch := make(chan struct{})
		if !ok {
			p.waiters = append(p.waiters, ch)
		}
		p.mu.Unlock()
		if ok {
			return v, nil
		}
		select {
		case <-ch:
		case <-p.done:
			return "", fmt.Errorf("reckon %s exited before it was ready (%v); see its log", p.name, p.exitErr)
		case <-deadline:
			return "", fmt.Errorf("reckon %s not ready after %s; see its log", p.name, timeout)
		case <-ctx.Done():
			return "", ctx.Err()
		}
	}
}

// exited says whether the process has ended.
func (p *proc) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// kill sends SIGKILL (a crash: nothing runs after it) and waits for the
// process to be gone. Its children die with it where they asked to
// (the sandbox's --die-with-parent).
func (p *proc) kill() {
	_ = p.cmd.Process.Signal(syscall.SIGKILL)
	<-p.done
}

// stop asks the process to end (SIGTERM) and kills it after grace.
func (p *proc) stop(grace time.Duration) {
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(grace):
		p.kill()
	}
}

// killAll kills every child still running.
func (ps *procs) killAll() {
	ps.mu.Lock()
	var all []*proc
	for p := range ps.live {
		all = append(all, p)
	}
	ps.mu.Unlock()
	for _, p := range all {
		p.kill()
	}
}

// orphans returns the pids of processes (other than the soak's own
// children) whose command line names dir: what a SIGKILLed worker left
// behind of its tool calls. The soak's private data directory is unique
// to it, so these are processes the soak caused.
func (ps *procs) orphans(dir string) []int {
	ours := ps.ours()
	all, _ := proctab.Matching(dir)
	var pids []int
	for _, pid := range all {
		if !ours(pid) {
			pids = append(pids, pid)
		}
	}
	return pids
}

// ours says whether a pid is one of the soak's children still running.
func (ps *procs) ours() func(pid int) bool {
	ps.mu.Lock()
	set := map[int]bool{}
	for p := range ps.live {
		set[p.cmd.Process.Pid] = true
	}
	ps.mu.Unlock()
	return func(pid int) bool { return set[pid] }
}

// killOrphans SIGKILLs what orphans finds and says how many there were.
func (ps *procs) killOrphans(dir string) int {
	n, _ := proctab.KillMatching(dir, ps.ours())
	return n
}
