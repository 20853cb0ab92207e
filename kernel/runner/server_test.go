package runner

import (
	"testing"

	"go.temporal.io/sdk/converter"

	"github.com/seed-7bc021c3/reckon/internal/mcpserver"
	"github.com/seed-7bc021c3/reckon/internal/mcptest"
	"github.com/seed-7bc021c3/reckon/kernel"
	"github.com/seed-7bc021c3/reckon/tool/mcptool"
)

// issueServers serves reckon's test MCP server once per name, over HTTP,
// each with a store of its own.
func issueServers(t *testing.T, names ...string) ([]mcptool.ServerConfig, map[string]*mcpserver.Store) {
	t.Helper()
	var cfgs []mcptool.ServerConfig
	stores := map[string]*mcpserver.Store{}
	for _, n := range names {
		store, hs := mcptest.IssueServer(t)
		cfgs = append(cfgs, mcptool.ServerConfig{Name: n, URL: hs.URL + mcpserver.HTTPPath})
		stores[n] = store
	}
	return cfgs, stores
}

// The kernel records in tool.started the server its MCP call goes to, as
// the gateway does, so that a probe asks that server and no other; the
// call goes there. Before ChangeRecordServer the journal did not say, and
// with two servers offering create_issue a probe could only guess.
func TestMCPCallRecordsItsServer(t *testing.T) {
	t.Parallel()
	cfgs, stores := issueServers(t, "a", "b")
	e := newEnv(t, envOpts{extra: mcpTools(t, cfgs, "mcp__create_issue")})
	evs, err := e.run("pinned", Plan{Steps: []Step{{Tool: "mcp__create_issue", Args: []byte(`{"title": "Disk full"}`)}}})
	if err != nil {
		t.Fatalf("run: %v", err)
	}
	wantShape(t, evs, "run.started", "tool.started op-1", "tool.completed op-1", "run.completed")
	d := data(t, evs[1])
	if d["server"] != "a" || d["upstream_tool"] != "create_issue" {
		t.Fatalf("tool.started records server %v, upstream_tool %v; want a, create_issue", d["server"], d["upstream_tool"])
	}
	// And a's endpoint identity, so that a probe whose "a" is elsewhere
	// does not answer for the call.
	if d["server_endpoint"] != cfgs[0].Endpoint() || cfgs[0].Endpoint() == cfgs[1].Endpoint() {
		t.Fatalf("tool.started records server_endpoint %v; want a's, %s (b's is %s)", d["server_endpoint"], cfgs[0].Endpoint(), cfgs[1].Endpoint())
	}
	key := mcptool.IdempotencyKey(e.project, "pinned", "op-1")
	if _, _, found, _ := stores["a"].Lookup(key); !found {
		t.Fatal("the issue is not on a, the server tool.started names")
	}
	if _, _, found, _ := stores["b"].Lookup(key); found {
		t.Fatal("the issue is on b too")
	}
}

// A call pinned to a server goes there or nowhere: resolved by its bare
// name to another server (the pinned one was down when this worker first
// looked, or the configuration changed), it takes the qualified name; a
// worker without the server refuses it (effect none) rather than make it
// where the probes will not look.
func TestRunToolKeepsToThePinnedServer(t *testing.T) {
	t.Parallel()
	cfgs, _ := issueServers(t, "a", "b")
	both, err := mcptool.New(cfgs, mcptool.Config{})
	if err != nil {
		t.Fatal(err)
	}
	onlyA, err := mcptool.New(cfgs[:1], mcptool.Config{})
	if err != nil {
		t.Fatal(err)
	}
	call := kernel.ToolCall{Tool: "mcp__create_issue", Server: "b", UpstreamTool: "create_issue"}
	a := &Activities{Tools: Chain{NewTools(), both}}
	if r, err := a.ResolveTool(t.Context(), "mcp__create_issue"); err != nil || r.Server != "a" || r.UpstreamTool != "create_issue" || r.ServerEndpoint != cfgs[0].Endpoint() {
		t.Fatalf("resolve: %+v %v, want a's create_issue", r, err)
	}
	tool, ok := a.lookupPinned(call)
	if !ok {
		t.Fatal("pinned to b: not resolved")
	}
	if server, _ := tool.(kernel.Upstream).Upstream(); server != "b" {
		t.Fatalf("pinned to b: resolved to %s", server)
	}
	if tool, ok := (&Activities{Tools: Chain{NewTools(), onlyA}}).lookupPinned(call); ok {
		server, _ := tool.(kernel.Upstream).Upstream()
		t.Fatalf("a worker without b resolved the call pinned to b, to %s", server)
	}
	// Pinned to b's endpoint too: a worker whose "b" is elsewhere (another
	// store under the same name) refuses it; pinned by name alone (a call
	// scheduled before server_endpoint), it goes to that worker's b.
	call.ServerEndpoint = cfgs[1].Endpoint()
	if _, ok := a.lookupPinned(call); !ok {
		t.Fatal("pinned to b at its endpoint: not resolved")
	}
	other, _ := issueServers(t, "b")
	elsewhere, err := mcptool.New([]mcptool.ServerConfig{cfgs[0], other[0]}, mcptool.Config{})
	if err != nil {
		t.Fatal(err)
	}
	if tool, ok := (&Activities{Tools: Chain{NewTools(), elsewhere}}).lookupPinned(call); ok {
		t.Fatalf("a worker whose b is at another endpoint resolved the call pinned to b's, to %s", tool.(kernel.Endpointed).ServerEndpoint())
	}
	call.ServerEndpoint = ""
	if _, ok := (&Activities{Tools: Chain{NewTools(), elsewhere}}).lookupPinned(call); !ok {
		t.Fatal("a call pinned by name alone no longer resolves to the worker's b")
	}
	call.Server, call.UpstreamTool = "", ""
	if _, ok := (&Activities{Tools: Chain{NewTools(), onlyA}}).lookupPinned(call); !ok {
		t.Fatal("an unpinned call (a run from before ChangeRecordServer) no longer resolves")
	}
}

// ResolveTool's result gained server_endpoint without a workflow version:
// a result recorded before it (a local activity marker's payload, which a
// replay decodes rather than runs ResolveTool again) must decode with it
// empty, so the replay rebuilds the tool.started recorded then, without
// server_endpoint.
func TestResolvedToolRecordedBeforeServerEndpoint(t *testing.T) {
	t.Parallel()
	dc := converter.GetDefaultDataConverter()
	old, err := dc.ToPayload(map[string]string{"server": "a", "upstream_tool": "create_issue"})
	if err != nil {
		t.Fatal(err)
	}
	var got ResolvedTool
	if err := dc.FromPayload(old, &got); err != nil || got != (ResolvedTool{Server: "a", UpstreamTool: "create_issue"}) {
		t.Fatalf("an old ResolveTool result decodes as %+v (%v)", got, err)
	}
}
