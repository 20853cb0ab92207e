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
	"path/filepath"
	"strings"
	"time"

	"github.com/seed-7bc021c3/reckon/kernel/sandbox"
	"github.com/seed-7bc021c3/reckon/pipeline"
)

// WorkspaceName names the postcondition probe in evidence.
const WorkspaceName = "workspace.postcondition"

// Postcondition is what a run_command step declares it leaves behind.
type Postcondition struct {
	Path   string `json:"path"`
	SHA256 string `json:"sha256,omitempty"`
}

// Workspace checks a run_command's declared postcondition in the run's
// workspace.
//
// Soundness. The declaration is the plan author's contract that this step
// creates the file (with that content, when sha256 is given).
//   - Present (and matching) proves the effect landed only if nothing else
//     in the run could have produced the file: when another operation of
//     the run declares the same path (a reissue, a repeat) the file proves
//     nothing about this one, and the finding is inconclusive. A command
//     without a declaration writing the same path is a residual risk the
//     declaration accepts.
//   - Present with different content is inconclusive: a partial write or a
//     later change.
//   - Missing proves the effect did not land only if nothing could have
//     removed it since: the run must be over (crash_window, or run.completed/
//     run.failed journaled) so the command cannot still be running, no later
//     operation of the run may have run in the same workspace (a later
//     command or filesystem tool could delete it), and the workspace itself
//     must still exist (a cleaned-up workspace proves nothing). Otherwise
//     inconclusive.
//
// Only kernel-recorded workspaces are read, only beneath Root when it is
// set, and never through a symlink, so a journal entry cannot point the
// probe at arbitrary files.
type Workspace struct {
	// Root, when set, is the directory every workspace must lie beneath
	// (<RECKON_DATA_DIR>/workspaces).
	Root string
	Now  func() time.Time
}

// Name implements Probe.
func (p Workspace) Name() string { return WorkspaceName }

// boundSlack covers the sandbox's kill and a clock difference between the
// worker and the sweep.
const boundSlack = time.Minute

// commandBound is how long after its start a run_command can still be
// running anywhere: its timeout_s (or, when the call gave none or one that
// does not parse, the sandbox's largest) plus boundSlack.
func commandBound(args json.RawMessage) time.Duration {
	var a struct {
		TimeoutS int `json:"timeout_s"`
	}
	limit := sandbox.DefaultMaxTimeout
	if json.Unmarshal(args, &a) == nil && a.TimeoutS > 0 && time.Duration(a.TimeoutS)*time.Second < limit {
		limit = time.Duration(a.TimeoutS) * time.Second
	}
	return limit + boundSlack
}

// Probe implements Probe.
func (p Workspace) Probe(ctx context.Context, run Run, op pipeline.WallOperation) (pipeline.Evidence, bool) {
	if op.Tool != "run_command" || len(op.Postcondition) == 0 || string(op.Postcondition) == "null" {
		return pipeline.Evidence{}, false
	}
	at := nowOr(p.Now)
	prov := map[string]any{"workspace": run.Workspace, "postcondition": op.Postcondition}
	inconclusive := func(format string, args ...any) (pipeline.Evidence, bool) {
		return evidence(WorkspaceName, pipeline.FindingInconclusive, fmt.Sprintf(format, args...), at, prov), true
	}
	var pc Postcondition
	if err := json.Unmarshal(op.Postcondition, &pc); err != nil || pc.Path == "" {
		return inconclusive("the declared postcondition is not {\"path\", \"sha256\"?}")
	}
	if run.Workspace == "" || !filepath.IsAbs(run.Workspace) {
		return inconclusive("the run's workspace is unknown (no kernel-recorded run.started with an absolute workspace)")
	}
	ws := filepath.Clean(run.Workspace)
	if p.Root != "" {
		root, err := filepath.Abs(p.Root)
		if err != nil || !within(root, ws) {
			return inconclusive("workspace %s is not beneath the data directory's workspaces %s; not read", ws, p.Root)
		}
	}
	if !filepath.IsLocal(pc.Path) {
		return inconclusive("postcondition path %q is not a relative path inside the workspace", pc.Path)
	}
	target := filepath.Join(ws, pc.Path)
	prov["file"] = target
	if others := otherDeclarers(run, op.OperationID, pc.Path); len(others) > 0 {
		return inconclusive("operations %s of this run declare the same path, so its state cannot be attributed to %s", strings.Join(others, ", "), op.OperationID)
	}
	wsInfo, err := os.Stat(ws)
	if err != nil || !wsInfo.IsDir() {
		return inconclusive("the workspace %s is gone; a missing file proves nothing", ws)
	}
	// Refuse symlinks anywhere below the workspace: the probe reads only
	// what the sandboxed command itself could have written.
	if real, err := filepath.EvalSymlinks(target); err == nil {
		realWS, _ := filepath.EvalSymlinks(ws)
		if real != filepath.Join(realWS, pc.Path) {
			return inconclusive("%s resolves through a symlink; not followed", pc.Path)
		}
	}
	info, err := os.Lstat(target)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		if op.State == "stale_in_flight" || !(run.Ended || op.State == "crash_window") {
			return inconclusive("%s is missing, but the run may still be running: the command could yet create it", pc.Path)
		}
		if later := laterOps(run, op.OperationID); len(later) > 0 {
			return inconclusive("%s is missing, but later operations (%s) ran in the same workspace and could have removed it", pc.Path, strings.Join(later, ", "))
		}
		// An ended run or a closed workflow does not prove the command is
		// gone: a worker that lost its workflow (terminated, or cut off
		// from the server) runs the command until it notices or until the
		// sandbox's wall-clock timeout kills it. Past that bound nothing
		// can still create the file.
		if done := op.StartedAt.Add(commandBound(op.Args)); at.Before(done) {
			ev, ok := inconclusive("%s is missing, but the command could still be running until %s (its timeout plus %s)", pc.Path, done.UTC().Format(time.RFC3339), boundSlack)
			ev.RecheckAfter = &done
			return ev, ok
		}
		prov["exists"] = false
		return evidence(WorkspaceName, pipeline.FindingNone,
			fmt.Sprintf("%s is missing from the workspace, the run is over and no later operation ran there", pc.Path), at, prov), true
	case err != nil:
		return inconclusive("stat %s: %v", pc.Path, err)
	case !info.Mode().IsRegular():
		return inconclusive("%s is not a regular file", pc.Path)
	}
	sum, err := hashFile(ctx, target)
	if err != nil {
		return inconclusive("read %s: %v", pc.Path, err)
	}
	prov["exists"], prov["sha256"], prov["size"] = true, sum, info.Size()
	if pc.SHA256 != "" && !strings.EqualFold(pc.SHA256, sum) {
		return inconclusive("%s exists but its sha256 %s differs from the declared %s (partial write or later change)", pc.Path, sum, pc.SHA256)
	}
	detail := fmt.Sprintf("%s exists in the workspace", pc.Path)
	if pc.SHA256 != "" {
		detail += " with the declared sha256"
	}
	return evidence(WorkspaceName, pipeline.FindingOccurred, detail, at, prov), true
}

func within(root, path string) bool {
	rel, err := filepath.Rel(root, path)
	return err == nil && rel != "." && filepath.IsLocal(rel)
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

func hashFile(ctx context.Context, path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
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
