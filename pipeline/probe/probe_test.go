package probe

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/seed-7bc021c3/reckon/internal/mcpserver"
	"github.com/seed-7bc021c3/reckon/internal/pgtest"
	"github.com/seed-7bc021c3/reckon/kernel"
	"github.com/seed-7bc021c3/reckon/kernel/operations"
	"github.com/seed-7bc021c3/reckon/pipeline"
	"github.com/seed-7bc021c3/reckon/tool/mcptool"
)

var t0 = time.Date(2026, 11, 30, 10, 0, 0, 0, time.UTC)

func now() time.Time { return t0.Add(time.Hour) }

func pc(path, sum string) json.RawMessage {
	b, _ := json.Marshal(Postcondition{Path: path, SHA256: sum})
	return b
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

func TestMCPLookup(t *testing.T) {
	t.Parallel()
	store, err := mcpserver.OpenStore(filepath.Join(t.TempDir(), "issues.json"))
	if err != nil {
		t.Fatal(err)
	}
	// Another run's op-1 under the bare id must not count (ids repeat
	// across runs); the kernel's qualified key does.
	if _, _, err := store.CreateIssue("op-2", "bare id of another run", ""); err != nil {
		t.Fatal(err)
	}
	if _, _, err := store.CreateIssue(mcptool.IdempotencyKey("acme", "run-1", "op-1"), "Disk full on db-3", ""); err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(mcpserver.Handler(mcpserver.NewServer(store)))
	defer hs.Close()
	client := MCPClient{Servers: []mcptool.ServerConfig{{Name: "issues", URL: hs.URL + mcpserver.HTTPPath}}, Timeout: 10 * time.Second}
	run := clocked(Run{Project: "acme", RunID: "run-1"})
	// Through the per-wall scope, as the sweep asks.
	wp, done := MCP{Looker: client, Grace: 5 * time.Minute}.ForWall(run)
	defer done()
	p := wp.(MCP)
	op := func(id, state string, started time.Time) pipeline.WallOperation {
		return pipeline.WallOperation{OperationID: id, Tool: "mcp__create_issue", State: state, StartedAt: started, JournaledAt: journaled(started),
			StartedKey: kernel.EventKey{SourceID: kernel.SourceKernel, EventID: "acme/run-1/" + id + "/started"}}
	}
	cases := []struct {
		name    string
		op      pipeline.WallOperation
		finding string
	}{
		{"applied", op("op-1", "failed_uncertain", t0), pipeline.FindingOccurred},
		{"never seen, old", op("op-2", "crash_window", t0), pipeline.FindingNone},
		{"never seen, young", op("op-3", "crash_window", now().Add(-time.Minute)), pipeline.FindingInconclusive},
		{"never seen, in flight", op("op-4", "stale_in_flight", t0), pipeline.FindingInconclusive},
	}
	for _, c := range cases {
		ev, ok := p.Probe(context.Background(), run, c.op)
		if !ok || ev.Finding != c.finding || !strings.Contains(string(ev.Provenance), c.op.OperationID) {
			t.Errorf("%s: got ok=%v %s %q %s", c.name, ok, ev.Finding, ev.Detail, ev.Provenance)
		}
	}
	// Only age stands between a young never_seen and a proof: the probe
	// says when to look again. An in-flight call gives no such time.
	young, _ := p.Probe(context.Background(), run, op("op-3", "crash_window", now().Add(-time.Minute)))
	if young.RecheckAfter == nil || !young.RecheckAfter.Equal(now().Add(4*time.Minute)) {
		t.Errorf("young never_seen: recheck after %v, want %v", young.RecheckAfter, now().Add(4*time.Minute))
	}
	if inflight, _ := p.Probe(context.Background(), run, op("op-4", "stale_in_flight", t0)); inflight.RecheckAfter != nil {
		t.Errorf("in-flight never_seen: recheck after %v, want none", inflight.RecheckAfter)
	}
	// Ids with "/" make keys that read alike: op "y" of run "run-1/x" filed
	// an issue under "acme/run-1/x/y", which is also what op "x/y" of run
	// "run-1" would send. Its completed must not prove that operation, nor
	// a never_seen anything: the probe does not ask.
	if _, _, err := store.CreateIssue(mcptool.IdempotencyKey("acme", "run-1/x", "y"), "another run's issue", ""); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		run Run
		op  string
	}{{run, "x/y"}, {clocked(Run{Project: "acme", RunID: "run-1/x"}), "y"}, {clocked(Run{Project: "ac/me", RunID: "run-1"}), "op-9"}} {
		ev, ok := p.Probe(context.Background(), c.run, op(c.op, "failed_uncertain", t0))
		if !ok || ev.Finding != pipeline.FindingInconclusive || !strings.Contains(ev.Detail, "not looked up") {
			t.Errorf("run %s op %s, ambiguous key: got ok=%v %s %q", c.run.RunID, c.op, ok, ev.Finding, ev.Detail)
		}
	}
	// A tool the server does not offer: the probe does not apply.
	if _, ok := p.Probe(context.Background(), run, pipeline.WallOperation{OperationID: "op-1", Tool: "mcp__delete_repo", StartedAt: t0, JournaledAt: journaled(t0)}); ok {
		t.Error("unsupported tool: the probe must not apply")
	}
}

// The MCP gateway records which upstream it sent a call to (tool.started's
// server and upstream_tool); the probe asks that server. Asking the first
// configured server offering the tool instead, another server that has
// never seen the key would answer never_seen, and the probe would prove
// "none" of an issue that exists: an unsafe-none.
func TestMCPLookupAsksTheServerTheGatewayCalled(t *testing.T) {
	t.Parallel()
	server := func(keys ...string) *httptest.Server { return issueServer(t, keys...) }
	db := pgtest.New(t)
	if _, err := db.Pool.Exec(context.Background(),
		`INSERT INTO gateway_runs (project, run_id, source_id, kind) VALUES ('acme', 'gw-1', 'mcp-gateway', 'client')`); err != nil {
		t.Fatal(err)
	}
	a := server()
	b := server(mcptool.IdempotencyKey("acme", "gw-1", "op-1"))
	client := MCPClient{Servers: []mcptool.ServerConfig{
		{Name: "a", URL: a.URL + mcpserver.HTTPPath}, {Name: "b", URL: b.URL + mcpserver.HTTPPath}}, Timeout: 10 * time.Second}
	run := clocked(Run{Project: "acme", RunID: "gw-1"})
	wp, done := MCP{Looker: client, Grace: 5 * time.Minute, Owners: operations.Owners{Pool: db.Pool}}.ForWall(run)
	defer done()
	p := wp.(MCP)
	op := func(server string) pipeline.WallOperation {
		return pipeline.WallOperation{OperationID: "op-1", Tool: "mcp__create_issue", State: "crash_window", StartedAt: t0, JournaledAt: journaled(t0),
			Server: server, UpstreamTool: "create_issue",
			StartedKey: kernel.EventKey{SourceID: kernel.RecorderGateway, EventID: "gw-1/op-1/started"}}
	}
	if ev, ok := p.Probe(context.Background(), run, op("b")); !ok || ev.Finding != pipeline.FindingOccurred {
		t.Errorf("call the gateway sent to b: got ok=%v %s %q, want occurred (b has the key)", ok, ev.Finding, ev.Detail)
	}
	// A server this configuration does not know: nothing is asked, so
	// nothing is proven.
	if ev, ok := p.Probe(context.Background(), run, op("c")); ok && ev.Finding == pipeline.FindingNone {
		t.Errorf("call the gateway sent to an unconfigured server: got %s %q, want no proof", ev.Finding, ev.Detail)
	}
}

// never_seen proves none only of a call reckon made, which carried the
// key: the kernel's or the MCP gateway's. An agent that reports its own
// call (POST /v1/events) made it with a client of its own that need not
// have sent reckon's key, so the server's never having seen the key says
// nothing of whether the issue was filed. completed still proves the
// call: the key names that very operation.
func TestMCPNeverSeenProvesOnlyReckonsCalls(t *testing.T) {
	t.Parallel()
	db := pgtest.New(t)
	if _, err := db.Pool.Exec(context.Background(),
		`INSERT INTO gateway_runs (project, run_id, source_id, kind) VALUES ('acme', 'gw-1', 'mcp-gateway', 'client')`); err != nil {
		t.Fatal(err)
	}
	store, err := mcpserver.OpenStore(filepath.Join(t.TempDir(), "issues.json"))
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := store.CreateIssue(mcptool.IdempotencyKey("acme", "agent-run", "op-2"), "filed with reckon's key", ""); err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(mcpserver.Handler(mcpserver.NewServer(store)))
	defer hs.Close()
	client := MCPClient{Servers: []mcptool.ServerConfig{{Name: "issues", URL: hs.URL + mcpserver.HTTPPath}}, Timeout: 10 * time.Second}
	p := MCP{Looker: client, Grace: 5 * time.Minute, Owners: operations.Owners{Pool: db.Pool}}
	op := func(id, source string) pipeline.WallOperation {
		return pipeline.WallOperation{OperationID: id, Tool: "mcp__create_issue", State: "crash_window", StartedAt: t0, JournaledAt: journaled(t0),
			StartedKey: kernel.EventKey{SourceID: source, EventID: id + "/started"}, AgentReported: source != kernel.SourceKernel}
	}
	cases := []struct {
		name    string
		run     string
		op      pipeline.WallOperation
		finding string
	}{
		{"an agent's own call, never seen", "agent-run", op("op-1", "agent-7"), pipeline.FindingInconclusive},
		{"an agent's own call, applied under reckon's key", "agent-run", op("op-2", "agent-7"), pipeline.FindingOccurred},
		{"the gateway's call, never seen", "gw-1", op("op-1", "mcp-gateway"), pipeline.FindingNone},
		{"an agent's call under the gateway's source name, in its own run", "agent-run", op("op-1", "mcp-gateway"), pipeline.FindingInconclusive},
	}
	for _, c := range cases {
		ev, ok := p.Probe(context.Background(), clocked(Run{Project: "acme", RunID: c.run}), c.op)
		if !ok || ev.Finding != c.finding {
			t.Errorf("%s: got ok=%v %s %q", c.name, ok, ev.Finding, ev.Detail)
		}
	}
	// Without Owners, only the kernel's calls are told apart.
	p.Owners = nil
	if ev, _ := p.Probe(context.Background(), clocked(Run{Project: "acme", RunID: "gw-1"}), op("op-1", "mcp-gateway")); ev.Finding != pipeline.FindingInconclusive {
		t.Errorf("no owners: the gateway's never_seen gave %s, want inconclusive", ev.Finding)
	}
}

type fakeRuns map[string][]kernel.StoredEvent

func (f fakeRuns) RunEvents(ctx context.Context, project, runID string) ([]kernel.StoredEvent, error) {
	return f[runID], nil
}

func ev(t *testing.T, run, typ string, data any) kernel.StoredEvent {
	t.Helper()
	e, err := kernel.NewEvent("kernel", run+"/"+typ, "acme", run, typ, "kernel", t0, data)
	if err != nil {
		t.Fatal(err)
	}
	return kernel.StoredEvent{Event: e}
}

func TestChildReplay(t *testing.T) {
	t.Parallel()
	started := func(run, op string) kernel.StoredEvent {
		return ev(t, run, kernel.TypeToolStarted, kernel.ToolStarted{OperationID: op, Tool: "run_command"})
	}
	done := func(run, op string) kernel.StoredEvent {
		return ev(t, run, kernel.TypeToolCompleted, kernel.ToolCompleted{OperationID: op})
	}
	runs := fakeRuns{
		"r.op-1": {ev(t, "r.op-1", kernel.TypeRunStarted, kernel.RunStarted{ParentRunID: "r"}), started("r.op-1", "op-1"), done("r.op-1", "op-1"), ev(t, "r.op-1", kernel.TypeRunFailed, kernel.RunFailed{Error: "x"})},
		"r.op-2": {ev(t, "r.op-2", kernel.TypeRunStarted, kernel.RunStarted{}), started("r.op-2", "op-1"), ev(t, "r.op-2", kernel.TypeRunFailed, kernel.RunFailed{Error: "x"})},
		"r.op-3": {ev(t, "r.op-3", kernel.TypeRunStarted, kernel.RunStarted{}), started("r.op-3", "op-1")},
		"r.op-5": {ev(t, "r.op-5", kernel.TypeRunStarted, kernel.RunStarted{}), ev(t, "r.op-5", kernel.TypeRunCompleted, struct{}{})},
		// Every call refused before it ran: the child did nothing.
		"r.op-7": {ev(t, "r.op-7", kernel.TypeRunStarted, kernel.RunStarted{}), started("r.op-7", "op-1"),
			ev(t, "r.op-7", kernel.TypeToolFailed, kernel.ToolFailed{OperationID: "op-1", ErrorType: kernel.ErrorTypeValidation, Error: "bad args", Effect: kernel.EffectNone}),
			ev(t, "r.op-7", kernel.TypeRunFailed, kernel.RunFailed{Error: "x"})},
		// Settled unknown proves neither way.
		"r.op-8": {ev(t, "r.op-8", kernel.TypeRunStarted, kernel.RunStarted{}), started("r.op-8", "op-1"),
			ev(t, "r.op-8", kernel.TypeOperationReconciled, kernel.Reconciliation{OperationID: "op-1", Effect: kernel.EffectUnknown, Basis: "operator", Note: "cannot tell"}),
			ev(t, "r.op-8", kernel.TypeRunFailed, kernel.RunFailed{Error: "x"})},
	}
	p := Child{Journal: runs}
	run := clocked(Run{Project: "acme", RunID: "r"})
	for op, want := range map[string]string{
		"op-1": pipeline.FindingOccurred, "op-2": pipeline.FindingInconclusive, "op-3": pipeline.FindingInconclusive,
		"op-4": pipeline.FindingInconclusive, "op-5": pipeline.FindingNone,
		"op-7": pipeline.FindingNone, "op-8": pipeline.FindingInconclusive,
	} {
		e, ok := p.Probe(context.Background(), run, pipeline.WallOperation{OperationID: op, Tool: "delegate",
			StartedKey: kernel.EventKey{SourceID: kernel.SourceKernel, EventID: "r/" + op + "/started"}})
		if !ok || e.Finding != want {
			t.Errorf("%s: got %s (%s), want %s", op, e.Finding, e.Detail, want)
		}
	}
	// A kernel delegation naming another run than its own child is not
	// replayed as that run.
	if e, ok := p.Probe(context.Background(), run, pipeline.WallOperation{OperationID: "op-9", Tool: "delegate", ChildRunID: "r.op-1",
		StartedKey: kernel.EventKey{SourceID: kernel.SourceKernel, EventID: "acme/r/op-9/started"}}); !ok || e.Finding != pipeline.FindingInconclusive {
		t.Errorf("op-9 naming r.op-1: got %s (%s)", e.Finding, e.Detail)
	}
	// A child run holding another source's events proves nothing.
	foreign := ev(t, "r.op-6", kernel.TypeRunCompleted, struct{}{})
	foreign.SourceID = "agent-x"
	runs["r.op-6"] = []kernel.StoredEvent{ev(t, "r.op-6", kernel.TypeRunStarted, kernel.RunStarted{}), foreign}
	if e, ok := p.Probe(context.Background(), run, pipeline.WallOperation{OperationID: "op-6", Tool: "delegate",
		StartedKey: kernel.EventKey{SourceID: kernel.SourceKernel, EventID: "acme/r/op-6/started"}}); !ok || e.Finding != pipeline.FindingInconclusive {
		t.Errorf("op-6 with a foreign event: got %s (%s)", e.Finding, e.Detail)
	}
}

// An agent's tool.started with the tool "delegate" is its account of a
// call: the child run it names (or the one derived from its run and
// operation) is a run the agent chose, and its replay proves nothing of the
// call. Here the agent points at a run that ended settled and at one that
// ended empty, which the probe would take for occurred and none.
func TestChildIgnoresAgentsDelegations(t *testing.T) {
	t.Parallel()
	started := ev(t, "k", kernel.TypeToolStarted, kernel.ToolStarted{OperationID: "op-1", Tool: "run_command"})
	done := ev(t, "k", kernel.TypeToolCompleted, kernel.ToolCompleted{OperationID: "op-1"})
	runs := fakeRuns{
		"k":      {ev(t, "k", kernel.TypeRunStarted, kernel.RunStarted{}), started, done, ev(t, "k", kernel.TypeRunCompleted, struct{}{})},
		"a.op-2": {ev(t, "a.op-2", kernel.TypeRunStarted, kernel.RunStarted{}), ev(t, "a.op-2", kernel.TypeRunCompleted, struct{}{})},
	}
	p := Child{Journal: runs}
	run := clocked(Run{Project: "acme", RunID: "a"})
	for _, op := range []pipeline.WallOperation{
		{OperationID: "op-1", Tool: "delegate", ChildRunID: "k"},
		{OperationID: "op-2", Tool: "delegate"},
	} {
		op.StartedKey = kernel.EventKey{SourceID: "agent-7", EventID: "a/" + op.OperationID + "/started"}
		op.AgentReported = true
		if e, ok := p.Probe(context.Background(), run, op); ok {
			t.Errorf("%s: the agent's delegation was probed: %s (%s)", op.OperationID, e.Finding, e.Detail)
		}
		op.StartedKey.SourceID, op.AgentReported = kernel.SourceKernel, false
		if _, ok := p.Probe(context.Background(), run, op); !ok {
			t.Errorf("%s: the kernel's delegation was not probed", op.OperationID)
		}
	}
}

// MCPClient over streamable HTTP against the real test MCP server; servers
// that do not offer the tool are skipped, unreachable ones are reported.
func TestMCPClientOverHTTP(t *testing.T) {
	t.Parallel()
	store, err := mcpserver.OpenStore(filepath.Join(t.TempDir(), "issues.json"))
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := store.CreateIssue("acme/run-1/op-1", "Disk full", ""); err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(mcpserver.Handler(mcpserver.NewServer(store)))
	defer hs.Close()
	c := MCPClient{Servers: []mcptool.ServerConfig{
		{Name: "other", URL: hs.URL + mcpserver.HTTPPath, Tools: []string{"search"}},
		{Name: "issues", URL: hs.URL + mcpserver.HTTPPath},
	}, Timeout: 10 * time.Second}
	run := clocked(Run{Project: "acme", RunID: "run-1"})
	ans, ok, err := c.LookupOperation(context.Background(), run, "mcp__create_issue", "acme/run-1/op-1")
	if err != nil || !ok || ans.Status != LookupCompleted || ans.Server != "issues" || !strings.Contains(string(ans.Result), "Disk full") {
		t.Fatalf("lookup: %+v %v %v", ans, ok, err)
	}
	ans, ok, err = c.LookupOperation(context.Background(), run, "mcp__issues__create_issue", "acme/run-1/op-2")
	if err != nil || !ok || ans.Status != LookupNeverSeen {
		t.Fatalf("lookup never seen: %+v %v %v", ans, ok, err)
	}
	if _, ok, err := c.LookupOperation(context.Background(), run, "mcp__delete_repo", "op-1"); ok || err != nil {
		t.Fatalf("unsupported tool: ok=%v err=%v", ok, err)
	}
	down := MCPClient{Servers: []mcptool.ServerConfig{{Name: "down", URL: "http://127.0.0.1:1/mcp"}}, Timeout: 2 * time.Second}
	p := MCP{Looker: down}
	ev, applies := p.Probe(context.Background(), run, pipeline.WallOperation{OperationID: "op-1", Tool: "mcp__create_issue", StartedAt: t0, JournaledAt: journaled(t0)})
	if !applies || ev.Finding != pipeline.FindingUnavailable || !strings.Contains(ev.Detail, "could not be asked now") {
		t.Fatalf("unreachable server: %+v", ev)
	}
}

// neverSeen is a Looker whose server has never seen any key.
type neverSeen struct{}

func (neverSeen) LookupOperation(context.Context, Run, string, string) (LookupAnswer, bool, error) {
	return LookupAnswer{Server: "issues", Status: LookupNeverSeen}, true, nil
}

// countingOwners answers RunWriters from runs and counts the calls.
type countingOwners struct {
	runs  map[kernel.RunKey]kernel.RunWriter
	calls int
}

func (o *countingOwners) KernelRuns(context.Context, []kernel.RunKey) (map[kernel.RunKey]bool, error) {
	return nil, nil
}

func (o *countingOwners) RunWriters(_ context.Context, rks []kernel.RunKey) (map[kernel.RunKey]kernel.RunWriter, error) {
	o.calls++
	out := map[kernel.RunKey]kernel.RunWriter{}
	for _, rk := range rks {
		if w, ok := o.runs[rk]; ok {
			out[rk] = w
		}
	}
	return out, nil
}

// Every operation of a wall is of one run: whether it is the gateway's is
// asked once per wall, however many of its calls the server never saw.
func TestMCPAsksOncePerWallWhoseRunItIs(t *testing.T) {
	t.Parallel()
	owners := &countingOwners{runs: map[kernel.RunKey]kernel.RunWriter{{Project: "acme", RunID: "gw-1"}: {Recorder: kernel.RecorderGateway}}}
	run := clocked(Run{Project: "acme", RunID: "gw-1"})
	wp, done := Set{MCP{Looker: neverSeen{}, Grace: time.Minute, Owners: owners}}.ForWall(run)
	defer done()
	for _, id := range []string{"op-1", "op-2", "op-3"} {
		op := pipeline.WallOperation{OperationID: id, Tool: "mcp__create_issue", State: "crash_window", StartedAt: t0, JournaledAt: journaled(t0),
			StartedKey: kernel.EventKey{SourceID: "mcp-gateway", EventID: id + "/started"}}
		evs := wp.Probe(context.Background(), run, op)
		if len(evs) != 1 || evs[0].Finding != pipeline.FindingNone {
			t.Fatalf("%s: %+v, want the gateway's never_seen to prove none", id, evs)
		}
	}
	if owners.calls != 1 {
		t.Fatalf("asked who writes the run %d times for one wall, want 1", owners.calls)
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
