package probe

import (
	"context"
	"encoding/json"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/seed-7bc021c3/reckon/internal/npmtest"
	"github.com/seed-7bc021c3/reckon/internal/pgtest"
	"github.com/seed-7bc021c3/reckon/internal/sqlitefile"
	"github.com/seed-7bc021c3/reckon/internal/tau2"
	"github.com/seed-7bc021c3/reckon/kernel"
	"github.com/seed-7bc021c3/reckon/kernel/priorstate"
	"github.com/seed-7bc021c3/reckon/pipeline"
	"github.com/seed-7bc021c3/reckon/tool/mcptool"
)

// contractHarness drives a real server through the kernel's MCP tool, as
// the worker does: the prior state is recorded, then the call is made (a
// crash past the write) or not (a crash before it); each run holds the
// calls made in it, and the probe settles one of them afterwards.
type contractHarness struct {
	t      *testing.T
	ctx    context.Context
	priors priorstate.Store
	ts     *mcptool.ToolSet
	srv    mcptool.ServerConfig
	runs   map[string]*Run
}

func newContractHarness(t *testing.T, srv mcptool.ServerConfig) *contractHarness {
	t.Helper()
	db := pgtest.New(t)
	ts, err := mcptool.New([]mcptool.ServerConfig{srv}, mcptool.Config{})
	if err != nil {
		t.Fatal(err)
	}
	return &contractHarness{t: t, ctx: context.Background(), priors: priorstate.Store{Pool: db.Pool}, ts: ts, srv: srv, runs: map[string]*Run{}}
}

// started is when every harness call started: long enough ago that the
// grace has passed.
var started = time.Now().Add(-time.Hour)

// call records the prior state of op in run as the worker does, then
// executes the call when apply says so.
func (h *contractHarness) call(runID, op, tool string, args any, apply bool) {
	h.t.Helper()
	raw, _ := json.Marshal(args)
	tl, ok := h.ts.Lookup(tool)
	if !ok {
		h.t.Fatalf("no tool %s", tool)
	}
	c := kernel.ToolCall{Project: "acme", RunID: runID, OperationID: op, Tool: tool, Args: raw, Workspace: h.t.TempDir()}
	if pr, ok := tl.(kernel.PriorReader); ok {
		st, applies, err := pr.ReadPrior(h.ctx, c)
		if applies {
			p := priorstate.Prior{Tool: tool, TakenAt: time.Now().UTC(), State: st}
			if err != nil {
				p.Error = err.Error()
			}
			if err := h.priors.Put(h.ctx, "acme", runID, op, p); err != nil {
				h.t.Fatal(err)
			}
		}
	}
	if apply {
		if _, err := tl.Execute(h.ctx, c); err != nil {
			h.t.Fatalf("%s: %v", op, err)
		}
	}
	r, ok := h.runs[runID]
	if !ok {
		c := clocked(Run{Project: "acme", RunID: runID, Ended: true})
		r = &c
		h.runs[runID] = r
	}
	r.Started = append(r.Started, StartedOp{OperationID: op, Tool: tool, Args: raw, StartedAt: started, Answered: true})
}

// probe settles op of run with the MCP probe over the harness's server.
func (h *contractHarness) probe(runID, op string) pipeline.Evidence {
	h.t.Helper()
	run := *h.runs[runID]
	s, i := startedOp(run, op)
	if i < 0 {
		h.t.Fatalf("no op %s in %s", op, runID)
	}
	w := pipeline.WallOperation{OperationID: op, Tool: s.Tool, Args: s.Args, State: "failed_uncertain", StartedAt: started, JournaledAt: journaled(started),
		StartedKey: kernel.EventKey{SourceID: kernel.SourceKernel, EventID: op}}
	p := MCP{Looker: MCPClient{Servers: []mcptool.ServerConfig{h.srv}, Timeout: 20 * time.Second}, Priors: h.priors}
	wp, done := p.ForWall(run)
	defer done()
	ev, ok := wp.Probe(h.ctx, run, w)
	if !ok {
		h.t.Fatalf("%s/%s: the probe does not apply", runID, op)
	}
	return ev
}

// expect checks op's finding, and that a decisive one rests on the
// exclusive store.
func (h *contractHarness) expect(runID, op, finding, detail string) {
	h.t.Helper()
	ev := h.probe(runID, op)
	if ev.Probe != MCPStateName || ev.Finding != finding || !strings.Contains(ev.Detail, detail) {
		h.t.Errorf("%s/%s: %s %s %q, want %s containing %q", runID, op, ev.Probe, ev.Finding, ev.Detail, finding, detail)
	}
}

// tau2Server serves the tau2 retail tools over HTTP on a copy of the
// small committed database.
func tau2Server(t *testing.T) string {
	t.Helper()
	_, file, _, _ := runtime.Caller(0)
	init := filepath.Join(filepath.Dir(file), "..", "..", "testdata", "tau2", "db.json")
	st := tau2.Store{Path: filepath.Join(t.TempDir(), "db.json"), Init: init}
	srv := tau2.NewServer(st)
	mux := http.NewServeMux()
	mux.Handle("/mcp", mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, nil))
	return serveMCP(t, mux)
}

var adaAddress = map[string]any{"address1": "12 Analytical Way", "address2": "", "city": "London", "country": "UK", "state": "LN", "zip": "10001"}

func withAddress(key, id string, addr map[string]any) map[string]any {
	out := map[string]any{key: id}
	for k, v := range addr {
		out[k] = v
	}
	return out
}

// TestContractTau2Retail: the tau2-retail set against reckon's retail
// server: a crash past the write proves occurred, before it none, a state
// that already held is inconclusive; a later write to the same order is
// the comparison point of an earlier one.
func TestContractTau2Retail(t *testing.T) {
	t.Parallel()
	url := tau2Server(t)
	h := newContractHarness(t, mcptool.ServerConfig{Name: "retail", URL: strings.TrimSuffix(url, "/mcp") + "/mcp", Exclusive: true,
		Probes: &mcptool.ProbeSpec{Builtin: "tau2-retail"}})
	newAddr := map[string]any{"address1": "1 Engine Row", "address2": "Flat 2", "city": "Leeds", "country": "UK", "state": "WY", "zip": "20002"}

	h.call("r1", "op-1", "mcp__get_order_details", map[string]any{"order_id": "#W0000001"}, true)
	h.call("r1", "op-2", "mcp__cancel_pending_order", map[string]any{"order_id": "#W0000001", "reason": "no longer needed"}, true)
	h.call("r2", "op-1", "mcp__modify_pending_order_items", map[string]any{"order_id": "#W0000002", "item_ids": []any{"2000000001"},
		"new_item_ids": []any{"2000000002"}, "payment_method_id": "credit_card_200"}, false)
	h.call("r3", "op-1", "mcp__modify_user_address", withAddress("user_id", "ada_lovelace_1815", adaAddress), true)
	h.call("r4", "op-1", "mcp__return_delivered_order_items", map[string]any{"order_id": "#W0000003", "item_ids": []any{"2000000001"}, "payment_method_id": "credit_card_200"}, true)
	h.call("r5", "op-1", "mcp__modify_pending_order_address", withAddress("order_id", "#W0000002", newAddr), true)
	h.call("r5", "op-2", "mcp__modify_pending_order_payment", map[string]any{"order_id": "#W0000002", "payment_method_id": "gift_card_100"}, true)
	h.call("r6", "op-1", "mcp__exchange_delivered_order_items", map[string]any{"order_id": "#W0000004", "item_ids": []any{"2000000002"},
		"new_item_ids": []any{"2000000001"}, "payment_method_id": "gift_card_100"}, false)
	h.call("r6", "op-2", "mcp__transfer_to_human_agents", map[string]any{"summary": "wants a call"}, true)

	h.expect("r1", "op-2", pipeline.FindingOccurred, `status = "cancelled" held neither before op-2`)
	h.expect("r2", "op-1", pipeline.FindingNone, "it was not applied")
	h.expect("r3", "op-1", pipeline.FindingInconclusive, "already held before the call")
	h.expect("r4", "op-1", pipeline.FindingOccurred, `"return requested"`)
	h.expect("r5", "op-1", pipeline.FindingOccurred, "until the state recorded before the later write op-2")
	h.expect("r5", "op-2", pipeline.FindingOccurred, `payment_method_id="gift_card_100"`)
	h.expect("r6", "op-1", pipeline.FindingNone, "the server's state now")
}

// TestContractGitServer: the git-mcp-server set against
// @cyanheads/git-mcp-server from testdata/npm on a repository of the
// test's: a commit, tag or branch made past the crash proves occurred,
// one never sent none, a tag or branch that already existed is
// inconclusive.
func TestContractGitServer(t *testing.T) {
	t.Parallel()
	repo := t.TempDir()
	for _, c := range [][]string{{"init", "-q", "-b", "main"}, {"config", "user.email", "drill@example.com"}, {"config", "user.name", "Drill"},
		{"config", "commit.gpgsign", "false"}, {"config", "tag.gpgsign", "false"}, {"commit", "-q", "--allow-empty", "-m", "first"}} {
		cmd := exec.Command("git", c...)
		cmd.Dir = repo
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("git %v: %v %s", c, err, out)
		}
	}
	if err := os.WriteFile(filepath.Join(repo, "a.txt"), []byte("a\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	h := newContractHarness(t, mcptool.ServerConfig{Name: "git", Command: []string{"node", npmtest.Entry(t, "@cyanheads/git-mcp-server")},
		Env: map[string]string{"GIT_SIGN_COMMITS": "false", "MCP_LOG_LEVEL": "error"}, Exclusive: true,
		Probes: &mcptool.ProbeSpec{Builtin: "git-mcp-server"}})

	h.call("g1", "op-1", "mcp__git_commit", map[string]any{"path": repo, "message": "add a", "filesToStage": []any{"a.txt"}}, true)
	h.call("g2", "op-1", "mcp__git_commit", map[string]any{"path": repo, "message": "never sent", "allowEmpty": true}, false)
	h.call("g3", "op-1", "mcp__git_tag", map[string]any{"path": repo, "mode": "create", "tagName": "v1"}, true)
	h.call("g4", "op-1", "mcp__git_tag", map[string]any{"path": repo, "mode": "create", "tagName": "v1", "force": true}, false)
	h.call("g5", "op-1", "mcp__git_branch", map[string]any{"path": repo, "mode": "create", "branchName": "never"}, false)
	h.call("g6", "op-1", "mcp__git_branch", map[string]any{"path": repo, "mode": "create", "branchName": "feature"}, true)
	h.call("g6", "op-2", "mcp__git_log", map[string]any{"path": repo}, true)
	h.call("g7", "op-1", "mcp__git_branch", map[string]any{"path": repo, "mode": "create", "branchName": "feature"}, false)

	h.expect("g1", "op-1", pipeline.FindingOccurred, `$.commits[0].hash ≠`)
	h.expect("g2", "op-1", pipeline.FindingNone, "it was not applied")
	h.expect("g3", "op-1", pipeline.FindingOccurred, `tags[name="v1"] exists`)
	h.expect("g4", "op-1", pipeline.FindingInconclusive, "already held before the call")
	h.expect("g5", "op-1", pipeline.FindingNone, "it was not applied")
	h.expect("g6", "op-1", pipeline.FindingOccurred, `branches[name="feature"] exists`)
	h.expect("g7", "op-1", pipeline.FindingInconclusive, "already held before the call")
}

// TestContractMCPSQLite: the mcp-sqlite set against the mcp-sqlite server
// from testdata/npm on a SQLite file of the test's: for each write tool a
// crash past the write proves occurred, one before it none, a state that
// already held inconclusive; a row created with a null column is seen by
// the whole table changing, since SQL's = never matches null.
func TestContractMCPSQLite(t *testing.T) {
	t.Parallel()
	// One file per run ({run_id}): each run's store is its own, as
	// declaring it exclusive says.
	tmp := t.TempDir()
	seed := `CREATE TABLE items (id INTEGER PRIMARY KEY, name TEXT NOT NULL, qty INTEGER, note TEXT);
INSERT INTO items VALUES (1, 'bolt', 3, 'bin a'), (2, 'nut', 5, NULL), (3, 'gear', 1, NULL);`
	for _, run := range []string{"c1", "c2", "c3", "c4", "u1", "u2", "u3", "u4", "d1", "d2", "d3", "q1"} {
		db := sqlitefile.File{Path: filepath.Join(tmp, run+".db")}
		if err := db.Exec(context.Background(), seed); err != nil {
			t.Fatal(err)
		}
	}
	h := newContractHarness(t, mcptool.ServerConfig{Name: "sqlite", Command: []string{"node", npmtest.File(t, "mcp-sqlite", "mcp-sqlite-server.js"), filepath.Join(tmp, "{run_id}.db")},
		Exclusive: true, Probes: &mcptool.ProbeSpec{Builtin: "mcp-sqlite"}})
	row := func(id int, name string, qty any, note any) map[string]any {
		return map[string]any{"table": "items", "data": map[string]any{"id": id, "name": name, "qty": qty, "note": note}}
	}
	upd := func(id int, data map[string]any) map[string]any {
		return map[string]any{"table": "items", "data": data, "conditions": map[string]any{"id": id}}
	}
	del := map[string]any{"table": "items", "conditions": map[string]any{"name": "gear"}}

	h.call("c1", "op-1", "mcp__read_records", map[string]any{"table": "items"}, true)
	h.call("c1", "op-2", "mcp__create_record", row(10, "washer", 7, "bin c"), true)
	h.call("c2", "op-1", "mcp__create_record", row(11, "spring", 2, "bin d"), false)
	h.call("c3", "op-1", "mcp__create_record", row(1, "bolt", 3, "bin a"), false)
	h.call("c4", "op-1", "mcp__create_record", row(12, "rivet", 9, nil), true)
	h.call("u1", "op-1", "mcp__update_records", upd(2, map[string]any{"qty": 40}), true)
	h.call("u2", "op-1", "mcp__update_records", upd(3, map[string]any{"qty": 41}), false)
	h.call("u3", "op-1", "mcp__update_records", upd(1, map[string]any{"qty": 3}), false)
	h.call("u4", "op-1", "mcp__update_records", upd(1, map[string]any{"note": nil}), true)
	h.call("d1", "op-1", "mcp__delete_records", map[string]any{"table": "items", "conditions": map[string]any{"id": 2}}, false)
	h.call("d2", "op-1", "mcp__delete_records", del, true)
	h.call("d3", "op-1", "mcp__delete_records", map[string]any{"table": "items", "conditions": map[string]any{"name": "cog"}}, false)
	h.call("q1", "op-1", "mcp__create_record", row(13, "pin", 1, "bin e"), true)
	h.call("q1", "op-2", "mcp__query", map[string]any{"sql": "SELECT count(*) AS n FROM items"}, true)

	h.expect("c1", "op-2", pipeline.FindingOccurred, `read_records{"conditions":{"id":10,"name":"washer","note":"bin c","qty":7},"table":"items"} $[0] exists; `)
	h.expect("c2", "op-1", pipeline.FindingNone, "it was not applied")
	h.expect("c3", "op-1", pipeline.FindingInconclusive, "already held before the call")
	h.expect("c4", "op-1", pipeline.FindingOccurred, `read_records{"table":"items"} $ ≠`)
	h.expect("u1", "op-1", pipeline.FindingOccurred, `read_records{"conditions":{"id":2},"table":"items"} $ ≠`)
	h.expect("u2", "op-1", pipeline.FindingNone, "it was not applied")
	h.expect("u3", "op-1", pipeline.FindingInconclusive, "already held before the call")
	h.expect("u4", "op-1", pipeline.FindingOccurred, `read_records{"conditions":{"id":1},"table":"items"} $ ≠`)
	h.expect("d1", "op-1", pipeline.FindingNone, "it was not applied")
	h.expect("d2", "op-1", pipeline.FindingOccurred, `read_records{"conditions":{"name":"gear"},"table":"items"} $ = []`)
	h.expect("d3", "op-1", pipeline.FindingInconclusive, "already held before the call")
	h.expect("q1", "op-1", pipeline.FindingInconclusive, "which no contract checks")
}

// TestContractServerMemory: the server-memory set's relation and
// observation contracts against @modelcontextprotocol/server-memory from
// testdata/npm, one graph per run: a crash past the write proves
// occurred, one before it none, a relation or observation that already
// held inconclusive (TestMCPStateMemoryServer covers create_entities).
func TestContractServerMemory(t *testing.T) {
	t.Parallel()
	h := newContractHarness(t, mcptool.ServerConfig{Name: "memory", Command: []string{"node", npmtest.Entry(t, "server-memory")},
		Env: map[string]string{"MEMORY_FILE_PATH": filepath.Join(t.TempDir(), "{run_id}.jsonl")}, Exclusive: true,
		Probes: &mcptool.ProbeSpec{Builtin: "server-memory"}})
	entities := map[string]any{"entities": []any{
		map[string]any{"name": "api", "entityType": "service", "observations": []any{"serves /v1"}},
		map[string]any{"name": "db", "entityType": "service", "observations": []any{}}}}
	rel := map[string]any{"relations": []any{map[string]any{"from": "api", "to": "db", "relationType": "depends_on"}}}
	obs := func(c string) map[string]any {
		return map[string]any{"observations": []any{map[string]any{"entityName": "api", "contents": []any{c}}}}
	}
	for _, c := range []struct {
		run  string
		tool string
		args map[string]any
	}{{"m1", "create_relations", rel}, {"m2", "create_relations", rel}, {"m4", "add_observations", obs("paged at 3am")},
		{"m5", "add_observations", obs("paged at 3am")}, {"m6", "add_observations", obs("serves /v1")}} {
		h.call(c.run, "op-1", "mcp__create_entities", entities, true)
		h.call(c.run, "op-2", "mcp__"+c.tool, c.args, c.run == "m1" || c.run == "m4")
	}
	h.call("m3", "op-1", "mcp__create_entities", entities, true)
	h.call("m3", "op-2", "mcp__create_relations", rel, true)
	h.call("m3", "op-3", "mcp__create_relations", rel, false)

	h.expect("m1", "op-2", pipeline.FindingOccurred, `relations[from="api",relationType="depends_on",to="db"] exists held neither`)
	h.expect("m2", "op-2", pipeline.FindingNone, "it was not applied")
	h.expect("m3", "op-3", pipeline.FindingInconclusive, "already held before the call")
	h.expect("m4", "op-2", pipeline.FindingOccurred, `observations[="paged at 3am"] exists held neither`)
	h.expect("m5", "op-2", pipeline.FindingNone, "it was not applied")
	h.expect("m6", "op-2", pipeline.FindingInconclusive, "already held before the call")
}
