package gateway

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/seed-7bc021c3/reckon/tool/mcptool"
)

// An upstream that accepts a new session's connection and never answers
// initialize: the server's timeout bounds the connect as it bounds the
// call ("connect + list + call"), so the call ends with
// mcp_connect_failed / none instead of hanging, its tool.started open,
// for as long as the client waits (and holding the session's other calls
// to that upstream behind the same lock).
func TestHungUpstreamConnectIsBounded(t *testing.T) {
	t.Parallel()
	up := newHTTPIssues(t)
	var hang atomic.Bool
	stop := make(chan struct{})
	inner := up.srv.Config.Handler
	hung := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if hang.Load() {
			select {
			case <-r.Context().Done():
			case <-stop:
			}
			return
		}
		inner.ServeHTTP(w, r)
	}))
	t.Cleanup(func() { close(stop); hung.Close() })
	cfg := mcptool.ServerConfig{Name: "issues", URL: hung.URL + "/mcp", Timeout: "500ms"}
	pool := newSchema(t)
	f := newFixture(t, pool, Config{Project: "acme", Servers: []mcptool.ServerConfig{cfg}})
	callTool(t, f.client(), "get_issue", map[string]any{"id": "ISS-1"}, nil) // adopts the discovery session
	hang.Store(true)

	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	began := time.Now()
	res, err := f.client().CallTool(ctx, &mcp.CallToolParams{Name: "create_issue", Arguments: map[string]any{"title": "t"}})
	if err != nil {
		t.Fatalf("call through a hung upstream did not end by itself (%s): %v", time.Since(began).Round(time.Millisecond), err)
	}
	if !res.IsError || !strings.Contains(mcptool.ContentText(res.Content), "tools/call not sent") {
		t.Fatalf("hung upstream: %s", mcptool.ContentText(res.Content))
	}
	assertConnectFailed(t, pool)
}
