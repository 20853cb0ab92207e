package probe

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/seed-7bc021c3/reckon/internal/pgtest"
	"github.com/seed-7bc021c3/reckon/kernel"
	"github.com/seed-7bc021c3/reckon/kernel/operations"
	"github.com/seed-7bc021c3/reckon/pipeline"
)

var t0 = time.Date(2026, 11, 30, 10, 0, 0, 0, time.UTC)

func now() time.Time { return t0.Add(time.Hour) }

func pc(path, sum string) json.RawMessage {
	b, _ := json.Marshal(Postcondition{Path: path, SHA256: sum})
	return b
}

// checkEvidence fails the test unless the probe applied (ok) and found
// want, with a detail containing detail.
func checkEvidence(t *testing.T, name string, ev pipeline.Evidence, ok bool, want, detail string) {
	t.Helper()
	if !ok || ev.Finding != want || !strings.Contains(ev.Detail, detail) {
		t.Errorf("%s: ok=%v %s %q, want %s containing %q", name, ok, ev.Finding, ev.Detail, want, detail)
	}
}

// kernelRuns records runs as started through the API, so that they (and
// their child runs) are the kernel's.
func kernelRuns(t *testing.T, pool *pgxpool.Pool, project string, runs ...string) {
	t.Helper()
	for _, r := range runs {
		if _, err := pool.Exec(context.Background(),
			`INSERT INTO kernel_runs (project, run_id, plan, plan_digest, workflow_id) VALUES ($1, $2, '{}', '\x00', $3)`,
			project, r, "reckon/"+project+"/"+r); err != nil {
			t.Fatal(err)
		}
	}
}

// gatewayRun records run as a client run of the MCP gateway (source
// mcp-gateway), as the gateway does when a host's session starts it.
func gatewayRun(t *testing.T, pool *pgxpool.Pool, project, run string) {
	t.Helper()
	if _, err := pool.Exec(context.Background(),
		`INSERT INTO gateway_runs (project, run_id, source_id, kind) VALUES ($1, $2, 'mcp-gateway', 'client')`, project, run); err != nil {
		t.Fatal(err)
	}
}

func TestWorkspacePostcondition(t *testing.T) {
	t.Parallel()
	db := pgtest.New(t)
	kernelRuns(t, db.Pool, "acme", "run-1", "run-3")
	root, secret, good := workspaceFixture(t)
	base := clocked(Run{Project: "acme", RunID: "run-1", Ended: true,
		Started: []StartedOp{{OperationID: "op-1", Tool: "run_command", PostconditionPath: "proof.txt"}}})
	withLater := base
	withLater.Started = append(append([]StartedOp(nil), base.Started...), StartedOp{OperationID: "op-2", Tool: "run_command"})
	withTwin := base
	withTwin.Started = append(append([]StartedOp(nil), base.Started...), StartedOp{OperationID: "op-1-r1", Tool: "run_command", PostconditionPath: "./proof.txt"})
	// An earlier bare command the activity gave up on (no answer; its
	// timeout_s of 600 runs past op-1's start at t0): it may have written
	// proof.txt, or removed absent.txt after op-1 wrote it.
	earlier := func(o StartedOp) Run {
		r := base
		r.Started = append([]StartedOp{o}, base.Started...)
		return r
	}
	abandoned := StartedOp{OperationID: "op-0", Tool: "run_command", StartedAt: t0.Add(-10 * time.Second), Args: json.RawMessage(`{"timeout_s": 600}`)}
	withAbandoned := earlier(abandoned)
	answered := abandoned
	answered.Answered = true
	withAnswered := earlier(answered)
	pastBound := abandoned
	pastBound.StartedAt = t0.Add(-11 * time.Minute)
	withPastBound := earlier(pastBound)
	// An earlier call to a workspace-rooted MCP server, bounded by Grace.
	withMCP := earlier(StartedOp{OperationID: "op-0", Tool: "mcp__write_file", StartedAt: t0.Add(-time.Minute)})
	unordered := base
	unordered.Started = []StartedOp{{OperationID: "op-9", Tool: "run_command"}}
	running := base
	running.Ended = false
	childRun := base
	childRun.RunID = "run-1.op-2"
	notKernel := base
	notKernel.RunID = "run-2"
	linkedWS := base
	linkedWS.RunID = "run-3"
	// Unconfined, a command can leave processes that outlive its timeout
	// (setsid): a missing file proves nothing, whichever command of the
	// run could still create it or remove it.
	unconfined := base
	unconfined.Started = []StartedOp{{OperationID: "op-1", Tool: "run_command", PostconditionPath: "proof.txt", Unconfined: true}}
	earlierUnconfined := earlier(StartedOp{OperationID: "op-0", Tool: "run_command", StartedAt: t0.Add(-time.Hour), Answered: true, Unconfined: true})

	p := Workspace{Root: root, Owners: operations.Owners{Pool: db.Pool}}
	kernelStarted := kernel.EventKey{SourceID: kernel.SourceKernel, EventID: "acme/run-1/op-1/started"}
	op := func(path, sum, state string) pipeline.WallOperation {
		return pipeline.WallOperation{OperationID: "op-1", Tool: "run_command", State: state, StartedAt: t0, JournaledAt: journaled(t0), Postcondition: pc(path, sum), StartedKey: kernelStarted}
	}
	cases := []struct {
		name    string
		run     Run
		op      pipeline.WallOperation
		finding string
		detail  string
	}{
		{"present with hash", base, op("proof.txt", good, "failed_uncertain"), pipeline.FindingOccurred, "declared sha256"},
		{"present without hash", base, op("proof.txt", "", "failed_uncertain"), pipeline.FindingOccurred, "exists"},
		{"hash differs", base, op("proof.txt", strings.Repeat("0", 64), "failed_uncertain"), pipeline.FindingInconclusive, "differs"},
		{"missing, run over", base, op("absent.txt", "", "failed_uncertain"), pipeline.FindingNone, "missing"},
		{"missing, crash window", running, op("absent.txt", "", "crash_window"), pipeline.FindingNone, "missing"},
		{"missing, run may be running", running, op("absent.txt", "", "failed_uncertain"), pipeline.FindingInconclusive, "may still be running"},
		{"missing, in flight", base, op("absent.txt", "", "stale_in_flight"), pipeline.FindingInconclusive, "may still be running"},
		{"missing, later op", withLater, op("absent.txt", "", "failed_uncertain"), pipeline.FindingInconclusive, "later operations (op-2)"},
		{"present, twin declares it", withTwin, op("proof.txt", good, "failed_uncertain"), pipeline.FindingInconclusive, "op-1-r1"},
		{"present, earlier op may still run", withAbandoned, op("proof.txt", good, "failed_uncertain"), pipeline.FindingInconclusive, "earlier operation op-0 may still have been running"},
		{"missing, earlier op may still run", withAbandoned, op("absent.txt", "", "failed_uncertain"), pipeline.FindingInconclusive, "earlier operation op-0 may still have been running"},
		{"present, earlier op answered", withAnswered, op("proof.txt", good, "failed_uncertain"), pipeline.FindingOccurred, "declared sha256"},
		{"missing, earlier op answered", withAnswered, op("absent.txt", "", "failed_uncertain"), pipeline.FindingNone, "missing"},
		{"missing, earlier op past its bound", withPastBound, op("absent.txt", "", "failed_uncertain"), pipeline.FindingNone, "missing"},
		{"missing, unconfined", unconfined, op("absent.txt", "", "failed_uncertain"), pipeline.FindingInconclusive, "unconfined"},
		{"missing, earlier op unconfined", earlierUnconfined, op("absent.txt", "", "failed_uncertain"), pipeline.FindingInconclusive, "earlier operation op-0 may still"},
		{"present, unconfined", unconfined, op("proof.txt", good, "failed_uncertain"), pipeline.FindingOccurred, "declared sha256"},
		{"present, earlier op unconfined", earlierUnconfined, op("proof.txt", good, "failed_uncertain"), pipeline.FindingInconclusive, "earlier operation op-0 may still"},
		{"present, earlier MCP call within grace", withMCP, op("proof.txt", good, "failed_uncertain"), pipeline.FindingInconclusive, "earlier operation op-0"},
		{"present, not in the journal order", unordered, op("proof.txt", good, "failed_uncertain"), pipeline.FindingInconclusive, "not among the run's journaled operations"},
		{"child run", childRun, op("c.txt", "", "failed_uncertain"), pipeline.FindingOccurred, "exists"},
		{"not a kernel run", notKernel, op("proof.txt", "", "failed_uncertain"), pipeline.FindingInconclusive, "not a kernel run"},
		{"workspace is a symlink", linkedWS, op("secret", "", "failed_uncertain"), pipeline.FindingInconclusive, "without following a symlink"},
		{"escaping path", base, op("../run-2/proof.txt", "", "failed_uncertain"), pipeline.FindingInconclusive, "not a relative path"},
		{"absolute path", base, op(secret, "", "failed_uncertain"), pipeline.FindingInconclusive, "not a relative path"},
		{"symlinked file", base, op("link.txt", "", "failed_uncertain"), pipeline.FindingInconclusive, "symlink"},
		{"symlinked directory", base, op("sub/secret", "", "failed_uncertain"), pipeline.FindingInconclusive, "symlink"},
		{"fifo", base, op("fifo", "", "failed_uncertain"), pipeline.FindingInconclusive, "not a regular file"},
	}
	for _, c := range cases {
		ev, ok := p.Probe(context.Background(), c.run, c.op)
		if !ok || ev.Finding != c.finding || !strings.Contains(ev.Detail, c.detail) || ev.Probe != WorkspaceName || len(ev.Provenance) == 0 {
			t.Errorf("%s: got ok=%v %s %q, want %s containing %q", c.name, ok, ev.Finding, ev.Detail, c.finding, c.detail)
		}
		if strings.Contains(string(ev.Provenance), "not yours") || (ev.Finding == pipeline.FindingOccurred && c.run.RunID == "run-3") {
			t.Errorf("%s: the probe read a file outside the workspace: %s", c.name, ev.Provenance)
		}
	}
	// An operation whose tool.started another writer recorded: not the
	// kernel's command, so the probe does not apply.
	foreign := op("proof.txt", good, "failed_uncertain")
	foreign.StartedKey = kernel.EventKey{SourceID: "agent-x", EventID: "run-1/op-1/started"}
	if _, ok := p.Probe(context.Background(), base, foreign); ok {
		t.Error("agent-recorded tool.started: the probe must not apply")
	}
	// Without the kernel's state the probe finds no workspace at all.
	if ev, _ := (Workspace{Root: root}).Probe(context.Background(), base, op("proof.txt", good, "failed_uncertain")); ev.Finding != pipeline.FindingInconclusive {
		t.Errorf("no owners: %s %q", ev.Finding, ev.Detail)
	}
	checkRecheckAfter(t, p, base, op("absent.txt", "", "crash_window"))
	if _, ok := p.Probe(context.Background(), base, pipeline.WallOperation{OperationID: "op-1", Tool: "run_command", StartedKey: kernelStarted}); ok {
		t.Error("no postcondition: the probe must not apply")
	}
	if _, ok := p.Probe(context.Background(), base, pipeline.WallOperation{OperationID: "op-1", Tool: "mcp__x", Postcondition: pc("proof.txt", ""), StartedKey: kernelStarted}); ok {
		t.Error("other tools: the probe must not apply")
	}
}

// workspaceFixture lays out the workspaces of TestWorkspacePostcondition
// under root: run-1's, holding proof.txt (its sha256 is good) and what a
// sandboxed command can leave behind, its child run's, and run-3's
// replaced by a symlink to the directory of secret, a file outside.
func workspaceFixture(t *testing.T) (root, secret, good string) {
	t.Helper()
	root = t.TempDir()
	ws := filepath.Join(root, "acme", "run-1")
	if err := os.MkdirAll(ws, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(ws, "proof.txt"), []byte("ok\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256([]byte("ok\n"))
	good = hex.EncodeToString(sum[:])
	// What a sandboxed command can leave behind: symlinks out of the
	// workspace, to a file and through a directory, and a FIFO.
	secret = filepath.Join(t.TempDir(), "secret")
	if err := os.WriteFile(secret, []byte("not yours\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(secret, filepath.Join(ws, "link.txt")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Dir(secret), filepath.Join(ws, "sub")); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mkfifo(filepath.Join(ws, "fifo"), 0o644); err != nil {
		t.Fatal(err)
	}
	// A child run's workspace is the kernel's too (a sibling directory).
	child := filepath.Join(root, "acme", "run-1.op-2")
	if err := os.MkdirAll(child, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(child, "c.txt"), []byte("child\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	// A kernel run whose workspace directory was replaced by a symlink.
	if err := os.Symlink(filepath.Dir(secret), filepath.Join(root, "acme", "run-3")); err != nil {
		t.Fatal(err)
	}
	return root, secret, good
}

// checkRecheckAfter: a missing file proves none only once the command's
// timeout_s plus a minute has passed; until then the probe names the time
// to look again.
func checkRecheckAfter(t *testing.T, p Workspace, base Run, young pipeline.WallOperation) {
	t.Helper()
	young.Args = json.RawMessage(`{"command": "sleep 1", "timeout_s": 30}`)
	for _, c := range []struct {
		age     time.Duration
		finding string
	}{{80 * time.Second, pipeline.FindingInconclusive}, {100 * time.Second, pipeline.FindingNone}} {
		young.StartedAt = now().Add(-c.age)
		young.JournaledAt = journaled(young.StartedAt)
		ev, _ := p.Probe(context.Background(), base, young)
		if ev.Finding != c.finding {
			t.Errorf("missing, timeout_s 30, age %s: %s (%s), want %s", c.age, ev.Finding, ev.Detail, c.finding)
		}
		if want := young.StartedAt.Add(90 * time.Second); c.finding == pipeline.FindingInconclusive && (ev.RecheckAfter == nil || !ev.RecheckAfter.Equal(want)) {
			t.Errorf("missing, timeout_s 30, age %s: recheck after %v, want %v", c.age, ev.RecheckAfter, want)
		}
	}
}

// A command's bound is the largest timeout_s it may have run with,
// whatever the casing and order of the journal's copy of its args.
func TestCommandBoundEveryCasing(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		args string
		want time.Duration
	}{
		{`{"command":"x","timeout_s":30}`, 30*time.Second + boundSlack},
		{`{"command":"x"}`, kernel.MaxCommandTimeout + boundSlack},
		{`{"command":"x","timeout_s":null}`, kernel.MaxCommandTimeout + boundSlack},
		{`{"command":"x","timeout_s":"30"}`, kernel.MaxCommandTimeout + boundSlack},
		{`{"command":"x","timeout_s":900}`, kernel.MaxCommandTimeout + boundSlack},
		// The journal's sorted copy of {"timeout_s": 5, "TIMEOUT_S": 300},
		// which the sandbox ran for 300 s.
		{`{"TIMEOUT_S":300,"command":"x","timeout_s":5}`, 300*time.Second + boundSlack},
		{`{"Timeout_S":300,"timeout_s":5}`, 300*time.Second + boundSlack},
	} {
		if got := commandBound(json.RawMessage(c.args)); got != c.want {
			t.Errorf("commandBound(%s) = %s, want %s", c.args, got, c.want)
		}
	}
}
