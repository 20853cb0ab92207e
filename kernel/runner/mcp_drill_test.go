package runner

import (
	"context"
	"encoding/json"
	"net/http/httptest"
	"path/filepath"
	"testing"

	"github.com/seed-7bc021c3/reckon/internal/mcpserver"
	"github.com/seed-7bc021c3/reckon/internal/mcptest"
	"github.com/seed-7bc021c3/reckon/internal/npmtest"
	"github.com/seed-7bc021c3/reckon/kernel"
	"github.com/seed-7bc021c3/reckon/kernel/fault"
	"github.com/seed-7bc021c3/reckon/tool/mcptool"
)

// mcpTools resolves names through a real mcptool.ToolSet composed with the
// kernel's fixed tools, the way the worker composes them, and returns the
// tools the drill plans use.
func mcpTools(t *testing.T, servers []mcptool.ServerConfig, names ...string) []kernel.Tool {
	t.Helper()
	ts, err := mcptool.New(servers, mcptool.Config{})
	if err != nil {
		t.Fatal(err)
	}
	chain := Chain{NewTools(), ts}
	var out []kernel.Tool
	for _, n := range names {
		tool, ok := chain.Lookup(n)
		if !ok {
			t.Fatalf("the MCP tool set does not resolve %s", n)
		}
		out = append(out, tool)
	}
	return out
}

// issuesServer serves reckon's test MCP server over streamable HTTP
// until the test ends.
func issuesServer(t *testing.T) (*mcpserver.Store, *httptest.Server) {
	t.Helper()
	return mcptest.IssueServer(t)
}

// The live drill with KERNEL_FAULT_AFTER_EFFECT=mcp__create_issue against
// reckon's test MCP server (streamable HTTP): the issue is created, the
// worker reports a crash, tool.failed(effect=uncertain) is journaled; a
// retry with the same idempotency key returns the same issue; a new
// operation creates a new issue only when the plan asks for a re-issue.
func TestMCPDrillCreateIssueFaultAfterEffect(t *testing.T) {
	t.Parallel()
	store, hs := issuesServer(t)
	tools := mcpTools(t, []mcptool.ServerConfig{{Name: "issues", URL: hs.URL + mcpserver.HTTPPath}}, "mcp__create_issue", "mcp__lookup_operation")
	e := newEnv(t, envOpts{fault: fault.Config{AfterEffect: "mcp__create_issue"}, extra: tools})
	step := Step{Tool: "mcp__create_issue", Args: json.RawMessage(`{"title": "Disk full on db-3"}`)}

	// 1. No re-issue in the plan: the run stops at the uncertain failure.
	evs, err := e.run("drill", Plan{Steps: []Step{step}})
	if err == nil {
		t.Fatal("the faulted run completed")
	}
	wantShape(t, evs, "run.started", "tool.started op-1", "tool.failed op-1 injected_fault effect=uncertain", "run.failed")
	key := mcptool.IdempotencyKey(e.project, "drill", "op-1")
	_, first, found, err := store.Lookup(key)
	if err != nil || !found {
		t.Fatalf("the effect did not commit: key %s found=%v err=%v", key, found, err)
	}
	recs, err := fault.Records(context.Background(), e.pool.Pool, e.project, "drill")
	if err != nil || len(recs) != 1 || recs[0].Truth != kernel.EffectOccurred || recs[0].Tool != "mcp__create_issue" {
		t.Fatalf("ground truth = %+v (%v)", recs, err)
	}
	if all, _ := store.Issues(); len(all) != 1 {
		t.Fatalf("store holds %d issues after one faulted call, want 1", len(all))
	}

	// 2. A retry of the same operation (same idempotency key, e.g. by a
	// recovering worker) returns the original issue and creates nothing.
	ctx := context.Background()
	retry := kernel.ToolCall{Project: e.project, RunID: "drill", OperationID: "op-1", Tool: step.Tool, Args: step.Args, Workspace: e.workspace("drill")}
	res, err := tools[0].Execute(ctx, retry)
	if err != nil {
		t.Fatalf("retry with the same key: %v", err)
	}
	var out mcpserver.CreateIssueResult
	if err := json.Unmarshal(res.Output, &out); err != nil || out.Issue.ID != first.ID || !out.Replayed {
		t.Fatalf("retry returned %s (replayed=%v, %v), want the original %s", res.Output, out.Replayed, err, first.ID)
	}
	// lookup_operation, what probes ask, says the same.
	res, err = tools[1].Execute(ctx, kernel.ToolCall{Project: e.project, RunID: "probe", OperationID: "probe-1", Tool: tools[1].Name(),
		Args: json.RawMessage(`{"key": "` + key + `"}`), Workspace: t.TempDir()})
	var lk mcpserver.LookupOperationResult
	if err != nil || json.Unmarshal(res.Output, &lk) != nil || lk.Status != "completed" || lk.Issue == nil || lk.Issue.ID != first.ID {
		t.Fatalf("lookup_operation %s: %s %v", key, res.Output, err)
	}
	if all, _ := store.Issues(); len(all) != 1 {
		t.Fatalf("store holds %d issues after the retry, want 1", len(all))
	}

	// 3. The plan asks for a re-issue: op-1 (faulted, committed) and
	// op-1-r1 (a new operation, a new key) create one issue each.
	step.OnUncertain = OnUncertainReissue
	evs, err = e.run("drill2", Plan{Steps: []Step{step}})
	if err != nil {
		t.Fatalf("the re-issuing run failed: %v", err)
	}
	wantShape(t, evs, "run.started", "tool.started op-1", "tool.failed op-1 injected_fault effect=uncertain",
		"tool.started op-1-r1", "tool.completed op-1-r1", "run.completed")
	_, a, okA, _ := store.Lookup(mcptool.IdempotencyKey(e.project, "drill2", "op-1"))
	_, b, okB, _ := store.Lookup(mcptool.IdempotencyKey(e.project, "drill2", "op-1-r1"))
	if !okA || !okB || a.ID == b.ID || a.ID == first.ID {
		t.Fatalf("re-issue: op-1 %v %s, op-1-r1 %v %s (first run %s): want two new, distinct issues", okA, a.ID, okB, b.ID, first.ID)
	}
	if all, _ := store.Issues(); len(all) != 3 {
		t.Fatalf("store holds %d issues, want 3 (1 + 2)", len(all))
	}
}

// The live drill with KERNEL_FAULT_AFTER_EFFECT=mcp__write_file against a
// real third-party server, @modelcontextprotocol/server-filesystem (stdio,
// started per call, rooted at the run's workspace): the file exists and
// tool.failed(effect=uncertain) is journaled.
func TestMCPDrillWriteFileFaultAfterEffect(t *testing.T) {
	t.Parallel()
	entry := npmtest.Entry(t, "server-filesystem")
	tools := mcpTools(t, []mcptool.ServerConfig{{Name: "fs", Command: []string{"node", entry, "{workspace}"}}}, "mcp__write_file")
	e := newEnv(t, envOpts{fault: fault.Config{AfterEffect: "mcp__write_file"}, extra: tools})
	ws := e.workspace("fsdrill")
	args, _ := json.Marshal(map[string]string{"path": filepath.Join(ws, "proof.txt"), "content": "written by server-filesystem\n"})
	evs, err := e.run("fsdrill", Plan{Steps: []Step{{Tool: "mcp__write_file", Args: args}}})
	if err == nil {
		t.Fatal("the faulted run completed")
	}
	wantShape(t, evs, "run.started", "tool.started op-1", "tool.failed op-1 injected_fault effect=uncertain", "run.failed")
	if got := e.readFile("fsdrill", "proof.txt"); got != "written by server-filesystem\n" {
		t.Fatalf("proof.txt = %q: the effect must have committed", got)
	}
	recs, err := fault.Records(context.Background(), e.pool.Pool, e.project, "fsdrill")
	if err != nil || len(recs) != 1 || recs[0].Truth != kernel.EffectOccurred || recs[0].Tool != "mcp__write_file" {
		t.Fatalf("ground truth = %+v (%v)", recs, err)
	}

	// Without a fault the same step completes.
	e2 := newEnv(t, envOpts{extra: tools})
	ws2 := e2.workspace("fsok")
	args2, _ := json.Marshal(map[string]string{"path": filepath.Join(ws2, "ok.txt"), "content": "ok\n"})
	if evs, err := e2.run("fsok", Plan{Steps: []Step{{Tool: "mcp__write_file", Args: args2}}}); err != nil {
		t.Fatalf("clean write_file run failed: %v (%v)", err, shape(evs))
	}
	if got := e2.readFile("fsok", "ok.txt"); got != "ok\n" {
		t.Fatalf("ok.txt = %q", got)
	}
}
