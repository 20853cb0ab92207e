package probe

import (
	"context"
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/seed-7bc021c3/reckon/internal/npmtest"
	"github.com/seed-7bc021c3/reckon/internal/pgtest"
	"github.com/seed-7bc021c3/reckon/kernel"
	"github.com/seed-7bc021c3/reckon/kernel/priorstate"
	"github.com/seed-7bc021c3/reckon/pipeline"
	"github.com/seed-7bc021c3/reckon/tool/mcptool"
)

// TestMCPStateMemoryServer drives @modelcontextprotocol/server-memory for
// real: the kernel's tool records the prior state and makes (or not) the
// call, then the probe reads the graph back.
func TestMCPStateMemoryServer(t *testing.T) {
	t.Parallel()
	entry := npmtest.Entry(t, "server-memory")
	db := pgtest.New(t)
	ctx := context.Background()
	priors := priorstate.Store{Pool: db.Pool}
	srv := mcptool.ServerConfig{Name: "memory", Command: []string{"node", entry},
		Env: map[string]string{"MEMORY_FILE_PATH": filepath.Join(t.TempDir(), "memory.jsonl")}}
	ts, err := mcptool.New([]mcptool.ServerConfig{srv}, mcptool.Config{})
	if err != nil {
		t.Fatal(err)
	}
	started := time.Now().Add(-time.Hour)
	run := clocked(Run{Project: "acme", RunID: "run-1", Ended: true})
	create := func(name string) json.RawMessage {
		b, _ := json.Marshal(map[string]any{"entities": []any{map[string]any{"name": name, "entityType": "incident", "observations": []any{"seen"}}}})
		return b
	}
	// call records the prior state as the worker does, then executes the
	// call when apply says so.
	call := func(op, tool string, args json.RawMessage, apply bool) {
		t.Helper()
		tl, ok := ts.Lookup(tool)
		if !ok {
			t.Fatalf("no tool %s", tool)
		}
		c := kernel.ToolCall{Project: "acme", RunID: "run-1", OperationID: op, Tool: tool, Args: args, Workspace: t.TempDir()}
		if pr, ok := tl.(kernel.PriorReader); ok {
			st, applies, err := pr.ReadPrior(ctx, c)
			if applies {
				p := priorstate.Prior{Tool: tool, TakenAt: time.Now().UTC(), State: st}
				if err != nil {
					p.Error = err.Error()
				}
				if err := priors.Put(ctx, "acme", "run-1", op, p); err != nil {
					t.Fatal(err)
				}
			}
		}
		if apply {
			if _, err := tl.Execute(ctx, c); err != nil {
				t.Fatalf("%s: %v", op, err)
			}
		}
		run.Started = append(run.Started, StartedOp{OperationID: op, Tool: tool, Args: args, StartedAt: started, Answered: true})
	}
	wop := func(id string) pipeline.WallOperation {
		for _, s := range run.Started {
			if s.OperationID == id {
				return pipeline.WallOperation{OperationID: id, Tool: s.Tool, Args: s.Args, State: "failed_uncertain", StartedAt: started, JournaledAt: journaled(started),
					StartedKey: kernel.EventKey{SourceID: kernel.SourceKernel, EventID: id}}
			}
		}
		t.Fatalf("no op %s", id)
		return pipeline.WallOperation{}
	}
	call("op-1", "mcp__create_entities", create("alpha"), true)  // landed
	call("op-2", "mcp__create_entities", create("beta"), false)  // never sent
	call("op-3", "mcp__create_entities", create("alpha"), false) // existed before
	call("op-4", "mcp__create_entities", create("gamma"), true)  // landed, then re-issued
	call("op-4-r1", "mcp__create_entities", create("gamma"), true)

	probeWith := func(cfg mcptool.ServerConfig, id string) (pipeline.Evidence, bool) {
		p := MCP{Looker: MCPClient{Servers: []mcptool.ServerConfig{cfg}}, Priors: priors}
		wp, done := p.ForWall(run)
		defer done()
		return wp.Probe(ctx, run, wop(id))
	}
	// Only this test writes the store: declared exclusive, the state
	// proves either way.
	exclusive := srv
	exclusive.Exclusive = true
	for _, c := range []struct{ op, finding, detail string }{
		{"op-1", pipeline.FindingOccurred, `entities[name="alpha"] exists held neither before op-1`},
		{"op-2", pipeline.FindingNone, "can no longer arrive"},
		{"op-3", pipeline.FindingInconclusive, "already held before the call"},
		{"op-4", pipeline.FindingOccurred, "the later write op-4-r1"},
	} {
		ev, ok := probeWith(exclusive, c.op)
		if !ok || ev.Probe != MCPStateName || ev.Finding != c.finding || !strings.Contains(ev.Detail, c.detail) {
			t.Errorf("%s: ok=%v %s %s %q, want %s containing %q", c.op, ok, ev.Probe, ev.Finding, ev.Detail, c.finding, c.detail)
		}
		if pre := ev.Preconditions; c.finding != pipeline.FindingInconclusive && (pre == nil || pre.Store == nil || !pre.Store.Exclusive) {
			t.Errorf("%s: a finding on a store declared exclusive must say so: %+v", c.op, pre)
		}
	}
	// Not declared exclusive, the store is anyone's: neither finding
	// stands. Another agent creates delta in it after op-6's prior state
	// was read, though op-6 was never sent: taken for op-6's effect, that
	// would be an unsafe occurred.
	call("op-6", "mcp__create_entities", create("delta"), false)
	other, _ := ts.Lookup("mcp__create_entities")
	if _, err := other.Execute(ctx, kernel.ToolCall{Project: "acme", RunID: "other-agent", OperationID: "x", Tool: "mcp__create_entities", Args: create("delta"), Workspace: t.TempDir()}); err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"op-1", "op-2", "op-6"} {
		if ev, _ := probeWith(srv, id); ev.Finding != pipeline.FindingInconclusive || !strings.Contains(ev.Detail, "can be written by its other clients") || ev.RecheckAfter != nil {
			t.Errorf("%s on a shared store: %s %q, want inconclusive, not waiting for a later sweep", id, ev.Finding, ev.Detail)
		}
	}

	// Pruned by the evidence retention, op-1's prior state is gone: the
	// probe cannot tell "created by op-1" from "held before" any more, and
	// says so. op-4's prior states are newer and kept.
	ageAndPrune(t, db.Pool, "kernel_mcp_prior_states", "op-1")
	if ev, ok := probeWith(exclusive, "op-1"); !ok || ev.Finding != pipeline.FindingInconclusive || !strings.Contains(ev.Detail, "none was recorded") {
		t.Errorf("op-1 after pruning: ok=%v %s %q, want inconclusive", ok, ev.Finding, ev.Detail)
	}
	if ev, _ := probeWith(exclusive, "op-4"); ev.Finding != pipeline.FindingOccurred {
		t.Errorf("op-4, within the retention, after pruning: %s %q", ev.Finding, ev.Detail)
	}

	// TestContractLaterCalls: a later call of the server that no contract
	// checks and that is not a declared read could have undone op-7's
	// entity: neither finding stands. A later declared read (read_graph)
	// changes nothing.
	call("op-7", "mcp__create_entities", create("zeta"), true)
	call("op-7-read", "mcp__read_graph", json.RawMessage(`{}`), true)
	if ev, _ := probeWith(exclusive, "op-7"); ev.Finding != pipeline.FindingOccurred {
		t.Errorf("op-7 followed by a read: %s %q, want occurred", ev.Finding, ev.Detail)
	}
	call("op-8", "mcp__delete_entities", json.RawMessage(`{"entityNames":["zeta"]}`), true)
	if ev, _ := probeWith(exclusive, "op-7"); ev.Finding != pipeline.FindingInconclusive || !strings.Contains(ev.Detail, "op-8 (mcp__delete_entities), which no contract checks") {
		t.Errorf("op-7 followed by delete_entities: %s %q, want inconclusive naming op-8", ev.Finding, ev.Detail)
	}
	run.Started = run.Started[:len(run.Started)-3]

	// A read-only tool settles none only when the configuration trusts
	// the server's annotations.
	call("op-5", "mcp__read_graph", json.RawMessage(`{}`), false)
	if ev, ok := probeWith(srv, "op-5"); ok {
		t.Errorf("untrusted annotations were relied on: %+v", ev)
	}
	trusted := srv
	trusted.TrustAnnotations = true
	if ev, ok := probeWith(trusted, "op-5"); !ok || ev.Probe != MCPAnnotationsName || ev.Finding != pipeline.FindingNone {
		t.Errorf("trusted readOnlyHint: ok=%v %+v", ok, ev)
	}
}
