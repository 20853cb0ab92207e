package probe

import (
	"context"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/seed-7bc021c3/reckon/internal/mcpserver"
	"github.com/seed-7bc021c3/reckon/kernel"
	"github.com/seed-7bc021c3/reckon/pipeline"
	"github.com/seed-7bc021c3/reckon/tool/mcptool"
)

// A lookup_operation answer names the key it is about. A server that
// matches keys loosely (here: by prefix, so op-1 finds op-10's record)
// answered "completed" about another key, and the probe proved occurred
// for a call that never reached it.
func TestMCPLookupRefusesAnAnswerAboutAnotherKey(t *testing.T) {
	t.Parallel()
	type lookupArgs struct {
		Key string `json:"key"`
	}
	type lookupResult struct {
		Key    string `json:"key"`
		Status string `json:"status"`
	}
	srv := mcp.NewServer(&mcp.Implementation{Name: "loose", Version: "1"}, nil)
	mcp.AddTool(srv, &mcp.Tool{Name: "create_issue"}, func(ctx context.Context, req *mcp.CallToolRequest, in lookupArgs) (*mcp.CallToolResult, lookupResult, error) {
		return nil, lookupResult{}, nil
	})
	mcp.AddTool(srv, &mcp.Tool{Name: "lookup_operation"}, func(ctx context.Context, req *mcp.CallToolRequest, in lookupArgs) (*mcp.CallToolResult, lookupResult, error) {
		if stored := "acme/run-1/op-10"; strings.HasPrefix(stored, in.Key) {
			return nil, lookupResult{Key: stored, Status: "completed"}, nil
		}
		return nil, lookupResult{Key: in.Key, Status: "never_seen"}, nil
	})
	hs := httptest.NewServer(mcpserver.Handler(srv))
	defer hs.Close()
	run := clocked(Run{Project: "acme", RunID: "run-1"})
	wp, done := MCP{Looker: MCPClient{Servers: []mcptool.ServerConfig{{Name: "loose", URL: hs.URL + mcpserver.HTTPPath}}, Timeout: 5 * time.Second},
		Grace: 5 * time.Minute}.ForWall(run)
	defer done()
	op := func(id string) pipeline.WallOperation {
		return pipeline.WallOperation{OperationID: id, Tool: "mcp__create_issue", State: "crash_window", StartedAt: t0, JournaledAt: journaled(t0),
			StartedKey: kernel.EventKey{SourceID: kernel.SourceKernel, EventID: "acme/run-1/" + id + "/started"}}
	}
	if ev, ok := wp.Probe(context.Background(), run, op("op-1")); !ok || ev.Finding != pipeline.FindingInconclusive || !strings.Contains(ev.Detail, "not the key asked about") {
		t.Errorf("answer about another key: ok=%v %s %q, want inconclusive", ok, ev.Finding, ev.Detail)
	}
	if ev, ok := wp.Probe(context.Background(), run, op("op-10")); !ok || ev.Finding != pipeline.FindingOccurred {
		t.Errorf("answer about the key asked: ok=%v %s %q, want occurred", ok, ev.Finding, ev.Detail)
	}
}
