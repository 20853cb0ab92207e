package probe

import (
	"context"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/seed-7bc021c3/reckon/internal/mcpserver"
	"github.com/seed-7bc021c3/reckon/kernel"
	"github.com/seed-7bc021c3/reckon/pipeline"
	"github.com/seed-7bc021c3/reckon/tool/mcptool"
)

// issueServer serves `reckon mcp-test-server`'s tools over HTTP, its
// store holding an issue filed under each of keys.
func issueServer(t *testing.T, keys ...string) *httptest.Server {
	t.Helper()
	store, err := mcpserver.OpenStore(filepath.Join(t.TempDir(), "issues.json"))
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range keys {
		if _, _, err := store.CreateIssue(k, "filed", ""); err != nil {
			t.Fatal(err)
		}
	}
	hs := httptest.NewServer(mcpserver.Handler(mcpserver.NewServer(store)))
	t.Cleanup(hs.Close)
	return hs
}

// A kernel call of a bare mcp__<tool> names no server: the worker called
// the first configured server offering the tool that it could reach then,
// which need not be the first the probe reaches. Were the probe to take
// the first server that answers lookup_operation, it would prove none of
// an issue another server had filed.
func TestMCPBareToolAsksEveryServerOfferingIt(t *testing.T) {
	t.Parallel()
	key := mcptool.IdempotencyKey("acme", "run-1", "op-1")
	issues := func(keys ...string) mcptool.ServerConfig {
		return mcptool.ServerConfig{URL: issueServer(t, keys...).URL + mcpserver.HTTPPath}
	}
	// plain offers create_issue and nothing to ask it with.
	plain := func() mcptool.ServerConfig {
		s := mcp.NewServer(&mcp.Implementation{Name: "plain", Version: "1"}, nil)
		type none struct{}
		mcp.AddTool(s, &mcp.Tool{Name: "create_issue"}, func(context.Context, *mcp.CallToolRequest, none) (*mcp.CallToolResult, any, error) {
			return &mcp.CallToolResult{}, nil, nil
		})
		hs := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s }, nil))
		t.Cleanup(hs.Close)
		return mcptool.ServerConfig{URL: hs.URL}
	}
	named := func(name string, sc mcptool.ServerConfig) mcptool.ServerConfig { sc.Name = name; return sc }
	down := mcptool.ServerConfig{URL: "http://127.0.0.1:1/mcp"}
	run := clocked(Run{Project: "acme", RunID: "run-1"})
	op := pipeline.WallOperation{OperationID: "op-1", Tool: "mcp__create_issue", State: "crash_window", StartedAt: t0, JournaledAt: journaled(t0),
		StartedKey: kernel.EventKey{SourceID: kernel.SourceKernel, EventID: "run-1/op-1/started"}}
	cases := []struct {
		name    string
		servers []mcptool.ServerConfig
		finding string
		detail  string
	}{
		{"the second server filed it", []mcptool.ServerConfig{named("a", issues()), named("b", issues(key))}, pipeline.FindingOccurred, "server b has key"},
		{"every server never saw it", []mcptool.ServerConfig{named("a", issues()), named("b", issues())}, pipeline.FindingNone, "server a, b has never seen"},
		{"the first server cannot be asked", []mcptool.ServerConfig{named("a", plain()), named("b", issues())}, pipeline.FindingInconclusive, "a also offer create_issue without lookup_operation"},
		// A server the probe cannot reach leaves the evidence unavailable:
		// the sweep takes the operation up again later.
		{"the first server is down", []mcptool.ServerConfig{named("a", down), named("b", issues())}, pipeline.FindingUnavailable, "server a:"},
		{"two servers without lookup_operation", []mcptool.ServerConfig{named("a", plain()), named("b", plain())}, pipeline.FindingInconclusive, "servers a, b all offer create_issue"},
	}
	for _, c := range cases {
		p := MCP{Looker: MCPClient{Servers: c.servers, Timeout: 5 * time.Second}, Grace: 5 * time.Minute}
		wp, done := p.ForWall(run)
		ev, ok := wp.Probe(context.Background(), run, op)
		done()
		if !ok || ev.Finding != c.finding || !strings.Contains(ev.Detail, c.detail) {
			t.Errorf("%s: ok=%v %s %q, want %s naming %q", c.name, ok, ev.Finding, ev.Detail, c.finding, c.detail)
		}
	}
}
