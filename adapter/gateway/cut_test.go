package gateway

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/seed-7bc021c3/reckon/kernel"
	"github.com/seed-7bc021c3/reckon/tool/mcptool"
)

// A call a session makes in a client-named run belongs to that run, not
// to the session's: when the session is cut with it in flight, the
// session's run has no operation of its own open and completes; its end
// must not name "op-1" of another run as its own (the session run may
// well have an op-1 of its own that completed).
func TestCutCallInClientRunDoesNotFailSessionRun(t *testing.T) {
	t.Parallel()
	up := newHTTPIssues(t)
	pool := newSchema(t)
	f := newFixture(t, pool, Config{Project: "acme", Servers: []mcptool.ServerConfig{up.config("issues")}, ShutdownGrace: 300 * time.Millisecond})
	cs := f.client()
	if res := callTool(t, cs, "create_issue", map[string]any{"title": "own"}, nil); res.IsError {
		t.Fatal(mcptool.ContentText(res.Content))
	}
	errc := make(chan error, 1)
	go func() {
		_, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "slow_create_issue",
			Arguments: map[string]any{"title": "long", "delay_ms": 20000}, Meta: mcp.Meta{RunIDMeta: "host-3"}})
		errc <- err
	}()
	waitFor(t, "the call in flight", func() bool { return len(ofRun(events(t, pool, "acme"), "host-3")) >= 2 })
	f.g.Close()
	<-errc
	rows := events(t, pool, "acme")
	session := rows[0].RunID
	if got := strings.Join(summary(ofRun(rows, session)), ", "); got != "run.started, tool.started op-1, tool.completed op-1, run.completed" {
		t.Errorf("session run %s: %s", session, got)
	}
	host := ofRun(rows, "host-3")
	if got := strings.Join(summary(host), ", "); got != "run.started, tool.started op-1, tool.failed op-1" {
		t.Fatalf("run host-3: %s", got)
	}
	var fd kernel.ToolFailed
	if err := host[2].DecodeData(&fd); err != nil || fd.Effect != kernel.EffectUncertain {
		t.Fatalf("tool.failed %+v (%v), want effect uncertain", fd, err)
	}
}
