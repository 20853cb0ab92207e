package probe

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"runtime"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/seed-7bc021c3/reckon/kernel"
	"github.com/seed-7bc021c3/reckon/pipeline"
)

// WorkspaceName names the postcondition probe in evidence.
const WorkspaceName = "workspace.postcondition"

// Postcondition is what a run_command step declares it leaves behind.
type Postcondition struct {
	Path   string `json:"path"`
	SHA256 string `json:"sha256,omitempty"`
}

// Workspaces finds a run's workspace in the kernel's own state, never in
// event data: <Root>/<project>/<run_id> for a kernel run (kernel_runs, or a
// child run beneath one, per Owners), nothing for anyone else's run.
type Workspaces struct {
	// Root is <RECKON_DATA_DIR>/workspaces.
	Root string
	// Owners tells the kernel's runs.
	Owners kernel.RunOwners
}

// Of returns the run's workspace relative to Root ("<project>/<run_id>"),
// or why there is none. err is a failure to ask.
func (w Workspaces) Of(ctx context.Context, project, runID string) (rel, whyNot string, err error) {
	if w.Root == "" || w.Owners == nil {
		return "", "no workspace root is configured for probes", nil
	}
	if kernel.ValidateID("project", project) != nil || kernel.ValidateID("run_id", runID) != nil {
		return "", fmt.Sprintf("run %q of project %q cannot name a kernel workspace", runID, project), nil
	}
	owned, err := w.Owners.KernelRuns(ctx, []kernel.RunKey{{Project: project, RunID: runID}})
	if err != nil {
		return "", "", err
	}
	if !owned[kernel.RunKey{Project: project, RunID: runID}] {
		return "", fmt.Sprintf("run %s of project %s is not a kernel run, so the kernel made no workspace for it", runID, project), nil
	}
	return project + "/" + runID, "", nil
}

// Dir returns the run's absolute workspace directory, or "" when it has
// none (see Of).
func (w Workspaces) Dir(ctx context.Context, project, runID string) string {
	rel, _, err := w.Of(ctx, project, runID)
	if err != nil || rel == "" {
		return ""
	}
	root, err := filepath.Abs(w.Root)
	if err != nil {
		return ""
	}
	return filepath.Join(root, rel)
}

// Workspace checks a run_command's declared postcondition in the run's
// workspace: the declaration is the plan author's contract that this step
// creates the file (with that content, when sha256 is given). Present and
// matching proves the effect landed; present with other content is
// inconclusive; missing proves it did not land only when nothing could
// have removed it since (the run over, the command past its bound, no
// later operation in the workspace, the workspace still there). Every
// earlier operation must be over by this one's start, and another
// operation declaring the same path makes the file prove nothing. The
// full argument: docs/internals.md#postcondition-probe.
// TestWorkspacePostcondition.
//
// Trust. The probe applies only to operations whose tool.started the kernel
// wrote, in runs the kernel owns; the workspace is the kernel's own layout
// (Workspaces), never a path from event data. Every component beneath Root
// is opened relative to its parent without following a symlink (or "..",
// which a declared path may not contain), so nothing a sandboxed command
// leaves in its workspace can point the probe at another file.
type Workspace struct {
	// Root is <RECKON_DATA_DIR>/workspaces; Owners tells the kernel's
	// runs. Both are required: without them the probe finds nothing.
	Root   string
	Owners kernel.RunOwners
	// Manifests reads the manifests the kernel recorded before each
	// workspace call. With it, a file the manifest recorded before this
	// operation already lists (an earlier step, which need not declare it,
	// left it there) proves nothing, nor does a file when that manifest is
	// gone or incomplete. Without it, or for a run recorded before
	// manifests, that residual risk stands (see Soundness).
	Manifests ManifestReader
	// Grace bounds an earlier MCP call like MCP.Grace; default 5m.
	Grace time.Duration
}

// Name implements Probe.
func (p Workspace) Name() string { return WorkspaceName }

// boundSlack covers the sandbox's kill and a clock difference between the
// worker and the sweep.
const boundSlack = time.Minute

// commandBound is how long after its start a run_command can still be
// running anywhere: its timeout_s (or, when the call gave none or one that
// does not parse, kernel.MaxCommandTimeout, the largest the sandbox
// accepts) plus boundSlack. A command whose worker died is held to it by
// the sandbox's own deadline (its timeout plus 5 s, kernel/sandbox).
func commandBound(args json.RawMessage) time.Duration {
	// Every casing of timeout_s counts, the largest winning: the sandbox
	// decoded the plan's args, in which any of them may have come last
	// (encoding/json matches names in any casing), and these are the
	// journal's, keys sorted. The sandbox now refuses such args; runs
	// journaled before may hold them.
	var m map[string]json.RawMessage
	limit := time.Duration(0)
	if json.Unmarshal(args, &m) == nil {
		for k, v := range m {
			if !strings.EqualFold(k, "timeout_s") {
				continue
			}
			var secs int
			if json.Unmarshal(v, &secs) != nil || secs <= 0 {
				limit = kernel.MaxCommandTimeout
				break
			}
			limit = max(limit, time.Duration(secs)*time.Second)
		}
	}
	if limit <= 0 || limit > kernel.MaxCommandTimeout {
		limit = kernel.MaxCommandTimeout
	}
	return limit + boundSlack
}

// defaultGrace bounds an MCP call when a probe is given no Grace: how long
// after its start a call to a workspace-rooted server may still write.
const defaultGrace = 5 * time.Minute

// graceOr is grace, or defaultGrace when grace is not set: every probe's
// Grace defaults the same way.
func graceOr(grace time.Duration) time.Duration {
	if grace > 0 {
		return grace
	}
	return defaultGrace
}

// actBound is how long after its start s may still act on the workspace:
// commandBound for run_command, grace (defaultGrace when zero) for an MCP
// call.
func actBound(s StartedOp, grace time.Duration) time.Duration {
	if s.Tool == kernel.ToolRunCommand {
		return commandBound(s.Args)
	}
	return graceOr(grace)
}

// over reports whether s can no longer act on the workspace after t: its
// worker answered for it, or t is past its bound; never for a command
// that ran unconfined. t is on the workflow's clock, as s.StartedAt is
// (a time the kernel wrote for the same run); a zero start (a call the
// kernel did not start) is never past its bound.
func over(s StartedOp, t time.Time, grace time.Duration) bool {
	if s.Unconfined && s.Tool == kernel.ToolRunCommand {
		// Unconfined, a command's processes can leave its process group
		// (setsid) and outlive every bound: it is never over.
		return false
	}
	if s.Answered {
		return true
	}
	return !s.StartedAt.IsZero() && !t.IsZero() && !t.Before(s.StartedAt.Add(actBound(s, grace)))
}

// stillActing returns the first of ops that may still act on the workspace
// after t (on the workflow's clock), if any.
func stillActing(ops []StartedOp, t time.Time, grace time.Duration) (StartedOp, bool) {
	for _, s := range ops {
		if !over(s, t, grace) {
			return s, true
		}
	}
	return StartedOp{}, false
}

// Probe implements Probe.
func (p Workspace) Probe(ctx context.Context, run Run, op pipeline.WallOperation) (pipeline.Evidence, bool) {
	if op.Tool != kernel.ToolRunCommand || len(op.Postcondition) == 0 || string(op.Postcondition) == "null" {
		return pipeline.Evidence{}, false
	}
	if op.StartedKey.SourceID != kernel.SourceKernel {
		// Only the kernel runs run_command in a workspace it made; another
		// writer's declaration is a claim about nothing the probe can read.
		return pipeline.Evidence{}, false
	}
	w := &wsProbe{p: p, run: run, op: op, at: run.now(), prov: map[string]any{"postcondition": op.Postcondition}}
	if ev, answered := w.attribute(ctx); answered {
		return ev, true
	}
	return w.inspect(ctx), true
}

// wsProbe is one operation's probe on its way through Probe's steps: what
// they establish, and the provenance its evidence carries.
type wsProbe struct {
	p    Workspace
	run  Run
	op   pipeline.WallOperation
	at   time.Time
	prov map[string]any
	pc   Postcondition
	rel  string // the run's workspace, relative to p.Root
	ws   string // the run's workspace
	self StartedOp
	idx  int // self's index in run.Started
}

// inconclusive is the probe's evidence that it cannot tell.
func (w *wsProbe) inconclusive(format string, args ...any) pipeline.Evidence {
	return evidence(WorkspaceName, pipeline.FindingInconclusive, fmt.Sprintf(format, args...), w.at, w.prov)
}

// unavailable is the probe's evidence that it could not read the
// workspace now (a root it cannot open, a directory it may not enter):
// the sweep leaves the operation for a later one.
func (w *wsProbe) unavailable(format string, args ...any) pipeline.Evidence {
	return evidence(WorkspaceName, pipeline.FindingUnavailable, fmt.Sprintf(format, args...), w.at, w.prov)
}

// attribute finds the declared file in the run's workspace and checks that
// its state can be credited to the operation alone: no other operation of
// the run declares it, and none before it may still have been acting. It
// answers (inconclusive) when it cannot.
func (w *wsProbe) attribute(ctx context.Context) (pipeline.Evidence, bool) {
	op := w.op
	if err := json.Unmarshal(op.Postcondition, &w.pc); err != nil || w.pc.Path == "" {
		return w.inconclusive("the declared postcondition is not {\"path\", \"sha256\"?}"), true
	}
	rel, whyNot, err := Workspaces{Root: w.p.Root, Owners: w.p.Owners}.Of(ctx, w.run.Project, w.run.RunID)
	switch {
	case err != nil:
		return w.unavailable("the run's workspace could not be established: %v", err), true
	case rel == "":
		return w.inconclusive("the run's workspace is unknown: %s", whyNot), true
	}
	w.rel, w.ws = rel, filepath.Join(w.p.Root, rel)
	w.prov["workspace"] = w.ws
	if !filepath.IsLocal(w.pc.Path) || strings.ContainsRune(w.pc.Path, 0) {
		return w.inconclusive("postcondition path %q is not a relative path inside the workspace", w.pc.Path), true
	}
	w.prov["file"] = filepath.Join(w.ws, w.pc.Path)
	if others := otherDeclarers(w.run, op.OperationID, w.pc.Path); len(others) > 0 {
		return w.inconclusive("operations %s of this run declare the same path, so its state cannot be attributed to %s", strings.Join(others, ", "), op.OperationID), true
	}
	// An earlier operation that may still act after this one started
	// (a call the activity gave up on keeps running until its bound) could
	// have written the file or removed it: its state proves nothing about
	// this operation either way.
	w.self, w.idx = startedOp(w.run, op.OperationID)
	if w.idx < 0 {
		return w.inconclusive("%s is not among the run's journaled operations, so what ran beside it is unknown", op.OperationID), true
	}
	if s, running := stillActing(w.run.Started[:w.idx], op.StartedAt, w.p.Grace); running {
		return w.inconclusive("the earlier operation %s may still have been running after %s started (%s), so the state of %s cannot be attributed to %s",
			s.OperationID, op.OperationID, op.StartedAt.UTC().Format(time.RFC3339), w.pc.Path, op.OperationID), true
	}
	return pipeline.Evidence{}, false
}

// inspect opens the declared file without following a symlink, from the
// workspaces root down, and reads what its absence or presence proves.
func (w *wsProbe) inspect(ctx context.Context) pipeline.Evidence {
	root, err := os.Open(w.p.Root)
	if err != nil {
		return w.unavailable("the workspaces root %s cannot be opened: %v", w.p.Root, err)
	}
	defer root.Close()
	wsDir, err := openNoFollow(root, w.rel, true)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return w.inconclusive("the workspace %s is gone; a missing file proves nothing", w.ws)
	case errors.Is(err, fs.ErrPermission):
		return w.unavailable("the workspace %s cannot be entered by this process: %v", w.ws, err)
	case err != nil:
		return w.inconclusive("the workspace %s cannot be opened without following a symlink: %v", w.ws, err)
	}
	defer wsDir.Close()
	f, err := openNoFollow(wsDir, w.pc.Path, false)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return w.missing()
	case errors.Is(err, errSymlink):
		return w.inconclusive("%s resolves through a symlink; not followed", w.pc.Path)
	case err != nil:
		return w.inconclusive("open %s: %v", w.pc.Path, err)
	}
	defer f.Close()
	return w.present(ctx, f)
}

// missing is what the file's absence proves: that the effect did not
// occur only once nothing can still create the file.
func (w *wsProbe) missing() pipeline.Evidence {
	op, path := w.op, w.pc.Path
	if op.State == "stale_in_flight" || !(w.run.Ended || op.State == "crash_window") {
		return w.inconclusive("%s is missing, but the run may still be running: the command could yet create it", path)
	}
	if later := laterOps(w.run, op.OperationID); len(later) > 0 {
		return w.inconclusive("%s is missing, but later operations (%s) ran in the same workspace and could have removed it", path, strings.Join(later, ", "))
	}
	// Unconfined, a command's processes can leave its process group
	// (setsid) and outlive the bound below.
	if w.self.Unconfined {
		return w.inconclusive("%s is missing, but %s ran unconfined (RECKON_SANDBOX_UNCONFINED): a process it left could still create it", path, op.OperationID)
	}
	// An ended run or a closed workflow does not prove the command is
	// gone: a worker that lost its workflow (terminated, or cut off
	// from the server) runs the command until it notices or until the
	// sandbox's wall-clock timeout kills it. Past that bound nothing
	// can still create the file.
	// The bound is measured on the database's clock, from the journal's
	// commit time of the tool.started (pipeline.Clock).
	el, passed, why, due := w.run.waited(op.JournaledAt, commandBound(op.Args))
	if !passed {
		ev := w.inconclusive("%s is missing, but the command could still be running (its timeout plus %s): %s", path, boundSlack, why)
		ev.RecheckAfter = due
		return ev
	}
	w.prov["exists"] = false
	ev := evidence(WorkspaceName, pipeline.FindingNone,
		fmt.Sprintf("%s is missing from the workspace, the run is over, no later operation ran there, and the command's timeout plus %s has passed", path, boundSlack), w.at, w.prov)
	return withPreconditions(ev, pipeline.Preconditions{Elapsed: &el})
}

// present is what the open file f proves: that the effect occurred when it
// is a regular file with the declared content that the workspace did not
// already hold before the operation.
func (w *wsProbe) present(ctx context.Context, f *os.File) pipeline.Evidence {
	path := w.pc.Path
	info, err := f.Stat()
	switch {
	case err != nil:
		return w.inconclusive("stat %s: %v", path, err)
	case !info.Mode().IsRegular():
		return w.inconclusive("%s is not a regular file", path)
	}
	sum, err := hashFile(ctx, f)
	if err != nil {
		return w.inconclusive("read %s: %v", path, err)
	}
	w.prov["exists"], w.prov["sha256"], w.prov["size"] = true, sum, info.Size()
	if w.pc.SHA256 != "" && !strings.EqualFold(w.pc.SHA256, sum) {
		return w.inconclusive("%s exists but its sha256 %s differs from the declared %s (partial write or later change)", path, sum, w.pc.SHA256)
	}
	if why := w.p.preexisting(ctx, w.run, w.run.Started[w.idx], path); why != "" {
		return w.inconclusive("%s exists, but %s", path, why)
	}
	detail := fmt.Sprintf("%s exists in the workspace", path)
	if w.pc.SHA256 != "" {
		detail += " with the declared sha256"
	}
	return evidence(WorkspaceName, pipeline.FindingOccurred, detail, w.at, w.prov)
}

// preexisting says why a file present now cannot be credited to self,
// "" when nothing says so: the manifest the kernel recorded before self
// already lists the path, or that manifest cannot tell (gone, incomplete,
// not the one tool.started names). A workspace whose manifest hit its caps
// must not let an earlier step's file pass for this one's effect.
func (p Workspace) preexisting(ctx context.Context, run Run, self StartedOp, file string) string {
	if self.Manifest == nil || p.Manifests == nil {
		return ""
	}
	before, err := storedBefore(ctx, p.Manifests, run, self)
	if err != nil {
		return fmt.Sprintf("whether it was there before %s started is unknown (the manifest recorded before it: %v)", self.OperationID, err)
	}
	clean := path.Clean(filepath.ToSlash(file))
	for _, e := range before.Entries {
		if e.Path == clean {
			return fmt.Sprintf("the manifest recorded before %s already lists it: it was there before the command ran, so its presence proves nothing about %s", self.OperationID, self.OperationID)
		}
	}
	return ""
}

// errSymlink says a path component is a symbolic link, which the probe
// never follows.
var errSymlink = errors.New("a path component is a symbolic link")

// openNoFollow opens rel beneath dir one component at a time, each relative
// to its parent's descriptor with O_NOFOLLOW: a component that is a symlink
// fails (errSymlink) instead of being followed, and since every step is
// one openat of one name, nothing can be swapped in between a check and the
// open. ".." is refused. O_NONBLOCK keeps a FIFO planted at the path from
// blocking the probe. wantDir requires the last component to be a
// directory.
func openNoFollow(dir *os.File, rel string, wantDir bool) (*os.File, error) {
	var parts []string
	for _, c := range strings.Split(rel, "/") {
		switch c {
		case "", ".":
			continue
		case "..":
			return nil, fmt.Errorf("%q climbs out with \"..\"", rel)
		}
		parts = append(parts, c)
	}
	fd := int(dir.Fd())
	defer runtime.KeepAlive(dir)
	owned := false
	closeOwned := func() {
		if owned {
			unix.Close(fd)
		}
	}
	for i, c := range parts {
		flags := unix.O_RDONLY | unix.O_CLOEXEC | unix.O_NOFOLLOW | unix.O_NONBLOCK
		if i < len(parts)-1 || wantDir {
			flags |= unix.O_DIRECTORY
		}
		next, err := unix.Openat(fd, c, flags, 0)
		if err != nil {
			var st unix.Stat_t
			isLink := errors.Is(err, unix.ELOOP) ||
				// Linux answers ENOTDIR, not ELOOP, for a symlink opened
				// with O_DIRECTORY|O_NOFOLLOW.
				errors.Is(err, unix.ENOTDIR) && unix.Fstatat(fd, c, &st, unix.AT_SYMLINK_NOFOLLOW) == nil && st.Mode&unix.S_IFMT == unix.S_IFLNK
			closeOwned()
			if isLink {
				return nil, errSymlink
			}
			return nil, &fs.PathError{Op: "open", Path: strings.Join(parts[:i+1], "/"), Err: err}
		}
		closeOwned()
		fd, owned = next, true
	}
	if !owned {
		// rel named dir itself: hand back a descriptor of its own.
		d, err := unix.Dup(fd)
		if err != nil {
			return nil, err
		}
		unix.CloseOnExec(d)
		fd = d
	}
	return os.NewFile(uintptr(fd), rel), nil
}

func otherDeclarers(run Run, opID, path string) []string {
	var out []string
	clean := filepath.Clean(path)
	for _, s := range run.Started {
		if s.OperationID != opID && s.PostconditionPath != "" && filepath.Clean(s.PostconditionPath) == clean {
			out = append(out, s.OperationID)
		}
	}
	return out
}

func laterOps(run Run, opID string) []string {
	var out []string
	seen := false
	for _, s := range run.Started {
		if seen {
			out = append(out, s.OperationID)
		}
		if s.OperationID == opID {
			seen = true
		}
	}
	if !seen {
		// The operation is not in the run's journal order: nothing can be
		// said about what ran after it.
		return []string{"(order unknown)"}
	}
	return out
}

func hashFile(ctx context.Context, f io.Reader) (string, error) {
	h := sha256.New()
	if _, err := io.Copy(h, &ctxReader{ctx: ctx, r: f}); err != nil {
		return "", err
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

type ctxReader struct {
	ctx context.Context
	r   io.Reader
}

func (c *ctxReader) Read(p []byte) (int, error) {
	if err := c.ctx.Err(); err != nil {
		return 0, err
	}
	return c.r.Read(p)
}
