package gateway

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/seed-7bc021c3/reckon/tool/mcptool"
)

// TestHTTPSessionsAreBounded: past MaxSessions open sessions a new one is
// refused with 503 before anything is recorded or started, while the open
// ones keep working; once one ends, a new one is served. Each session
// records a run and may start a process per stdio upstream, so a client
// opening sessions in a loop must not fill the journal and the process
// table.
func TestHTTPSessionsAreBounded(t *testing.T) {
	t.Parallel()
	up := newHTTPIssues(t)
	f := newFixture(t, newSchema(t), Config{Project: "acme", Servers: []mcptool.ServerConfig{up.config("issues")}, MaxSessions: 2})
	open := func() int {
		f.g.mu.Lock()
		defer f.g.mu.Unlock()
		return len(f.g.sessions)
	}
	waitFor := func(n int) {
		t.Helper()
		for deadline := time.Now().Add(10 * time.Second); open() != n; time.Sleep(10 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("%d sessions open, want %d", open(), n)
			}
		}
	}
	a, b := f.client(), f.client()
	waitFor(2)

	_, err := mcp.NewClient(&mcp.Implementation{Name: "third", Version: "1"}, nil).
		Connect(context.Background(), &mcp.StreamableClientTransport{Endpoint: f.url, MaxRetries: -1}, nil)
	if err == nil || !strings.Contains(err.Error(), "503") && !strings.Contains(err.Error(), http.StatusText(http.StatusServiceUnavailable)) {
		t.Fatalf("third session: %v, want a 503", err)
	}
	if n := open(); n != 2 {
		t.Fatalf("the refused session was created: %d open", n)
	}
	// The open sessions are served.
	callTool(t, a, "create_issue", map[string]any{"title": "still served"}, nil)

	_ = b.Close()
	waitFor(1)
	f.client()
	waitFor(2)
}
