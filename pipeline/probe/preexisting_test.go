package probe

import (
	"crypto/sha256"
	"encoding/hex"
	"testing"

	"github.com/seed-7bc021c3/reckon/kernel"
	"github.com/seed-7bc021c3/reckon/kernel/manifest"
	"github.com/seed-7bc021c3/reckon/kernel/operations"
	"github.com/seed-7bc021c3/reckon/pipeline"
)

// A file the declared postcondition names proves the step made it only if
// it was not there already. An earlier step (its command is not the one
// under judgement, and need not declare the path) wrote proof.txt; the
// step declaring it then crashed before running. The postcondition probe
// found the file and proved "occurred", settling work that never ran —
// alone whenever the diff probe could not tell, as when the earlier step
// also filled the workspace past the manifest's caps. The kernel's
// manifest taken before the step lists the file, or cannot say.
func TestPostconditionIgnoresAFileThatWasThereBefore(t *testing.T) {
	t.Parallel()
	r := newWorkspaceRig(t)
	content := "done\n"
	sum := sha256.Sum256([]byte(content))
	good := hex.EncodeToString(sum[:])
	cmd := func(id string, m *kernel.WorkspaceManifest, declares string) StartedOp {
		c := r.cmd(id, m, id == "op-1")
		c.PostconditionPath = declares
		return c
	}
	op := func(id string) pipeline.WallOperation {
		o := r.op(id, "failed_uncertain")
		o.Postcondition = pc("proof.txt", good)
		return o
	}
	p := Workspace{Root: r.root, Owners: operations.Owners{Pool: r.db.Pool}, Manifests: r.st}

	// op-1 makes no declaration and writes proof.txt; op-2 declares it.
	m1 := r.manifest(t, "op-1")
	r.write(t, "proof.txt", content)
	run := r.run(cmd("op-1", m1, ""), cmd("op-2", r.manifest(t, "op-2"), "proof.txt"))
	r.checkOp(t, p, "file there before the step", run, op("op-2"), pipeline.FindingInconclusive, "already lists it")
	// A manifest that hit its caps cannot say the file was absent.
	capped, _ := r.record(t, "op-3", manifest.Limits{MaxFiles: 1})
	run.Started[1] = cmd("op-3", capped, "proof.txt")
	r.checkOp(t, p, "truncated manifest before the step", run, op("op-3"), pipeline.FindingInconclusive, "incomplete")
	// The step's own file, absent from its manifest, still proves it.
	r.checkOp(t, p, "file the step made", r.run(cmd("op-1", m1, "proof.txt")), op("op-1"), pipeline.FindingOccurred, "")
}
