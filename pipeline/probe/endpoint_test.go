package probe

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/seed-7bc021c3/reckon/internal/mcpserver"
	"github.com/seed-7bc021c3/reckon/kernel"
	"github.com/seed-7bc021c3/reckon/pipeline"
	"github.com/seed-7bc021c3/reckon/tool/mcptool"
)

// Servers are configured by name, and the probes' "issues" need not be
// the worker's: a staging store there has never seen the key, and its
// never_seen proved "none" of an issue filed on the store the call went
// to (an unsafe-none). The call's tool.started records its server's
// endpoint identity; a server of that name configured here with another
// is not asked, and neither its never_seen nor its completed counts.
// Events without server_endpoint are looked up by name, as before.
func TestMCPLookupSkipsAServerConfiguredElsewhere(t *testing.T) {
	t.Parallel()
	key := mcptool.IdempotencyKey("acme", "run-1", "op-1")
	production := mcptool.ServerConfig{Name: "issues", URL: "http://issues.prod.example:9000/mcp"}
	empty := issueServer(t)
	holding := issueServer(t, key)
	staging := mcptool.ServerConfig{Name: "issues", URL: empty.URL + mcpserver.HTTPPath}
	stagingWithKey := mcptool.ServerConfig{Name: "issues", URL: holding.URL + mcpserver.HTTPPath}
	run := clocked(Run{Project: "acme", RunID: "run-1"})
	client := func(c mcptool.ServerConfig) Looker {
		return MCPClient{Servers: []mcptool.ServerConfig{c}, Timeout: 10 * time.Second}
	}
	op := func(endpoint string) pipeline.WallOperation {
		return pipeline.WallOperation{OperationID: "op-1", Tool: "mcp__create_issue", State: "crash_window", StartedAt: t0, JournaledAt: journaled(t0),
			Server: "issues", UpstreamTool: "create_issue", ServerEndpoint: endpoint,
			StartedKey: kernel.EventKey{SourceID: kernel.SourceKernel, EventID: "run-1/op-1/started"}}
	}
	cases := []struct {
		name    string
		looker  Looker
		op      pipeline.WallOperation
		finding string
		detail  string
	}{
		{"call went to production, staging configured here, never seen there", client(staging),
			op(production.Endpoint()), pipeline.FindingInconclusive,
			`server "issues" is configured here as endpoint ` + staging.Endpoint() + `, the call went to endpoint ` + production.Endpoint() + `: not asked`},
		{"call went to production, a staging store holding the key configured here", client(stagingWithKey),
			op(production.Endpoint()), pipeline.FindingInconclusive, "not asked"},
		{"same endpoint as the call's", client(staging),
			op(staging.Endpoint()), pipeline.FindingNone, "has never seen key"},
		{"same endpoint, holding the key", client(stagingWithKey),
			op(stagingWithKey.Endpoint()), pipeline.FindingOccurred, "stored result"},
		{"an event from before server_endpoint", client(staging),
			op(""), pipeline.FindingNone, "has never seen key"},
		{"a looker that cannot tell its endpoints", neverSeen{},
			op(production.Endpoint()), pipeline.FindingInconclusive, "cannot tell which endpoint"},
		{"a looker that cannot tell its endpoints, an event from before server_endpoint", neverSeen{},
			op(""), pipeline.FindingNone, "has never seen key"},
	}
	for _, c := range cases {
		wp, done := MCP{Looker: c.looker, Grace: 5 * time.Minute}.ForWall(run)
		ev, ok := wp.Probe(context.Background(), run, c.op)
		done()
		if !ok || ev.Finding != c.finding || !strings.Contains(ev.Detail, c.detail) {
			t.Errorf("%s: got ok=%v %s %q, want %s with %q", c.name, ok, ev.Finding, ev.Detail, c.finding, c.detail)
		}
	}
}
