package gateway

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/rs/zerolog"

	"github.com/seed-7bc021c3/reckon/kernel"
	"github.com/seed-7bc021c3/reckon/tool/mcptool"
)

// An upstream's failure text is the upstream's to choose; a NUL in it
// must not get the gateway's tool.failed refused by the outbox, leaving
// the operation open although the call had ended. It is recorded, the
// NUL as U+FFFD.
func TestFailedTextWithNULIsRecorded(t *testing.T) {
	t.Parallel()
	up := newHTTPIssues(t)
	f := newFixture(t, newSchema(t), Config{Servers: []mcptool.ServerConfig{up.config("issues")}})
	s := &session{g: f.g, open: map[string]string{}, atEnd: map[string]bool{}}
	run := runRef{project: f.g.o.Project, runID: "nul-run", source: f.g.o.Source, kind: kindSession, instance: f.g.instance}
	upstream := &kernel.ToolError{ErrorType: mcptool.ErrorTypeCallFailed, Effect: kernel.EffectUncertain, Err: errors.New("upstream said a\x00b")}
	f.g.failed(context.Background(), s, run, "op-1", upstream, "", zerolog.Nop())
	var got string
	if err := f.pool.QueryRow(context.Background(),
		`SELECT event->'data'->>'error' FROM kernel_event_outbox WHERE event->>'type' = 'tool.failed' AND event->>'run_id' = 'nul-run'`).Scan(&got); err != nil {
		t.Fatalf("tool.failed not recorded: %v", err)
	}
	if !strings.Contains(got, "upstream said a\uFFFDb") {
		t.Fatalf("recorded error %q, want the upstream's text with U+FFFD for the NUL", got)
	}
}

// Arguments reckon cannot store (a NUL, a lone surrogate, a key twice) are
// the client's to fix: the call is refused saying so, never blamed on the
// database, and nothing is recorded or sent.
func TestUnstorableArgsRefusedAsTheClients(t *testing.T) {
	t.Parallel()
	pool, f := issuesGateway(t)
	cs := f.client()
	for _, raw := range []string{`{"title":"a\u0000b"}`, `{"title":"\ud800"}`, `{"title":"a","title":"b"}`} {
		res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "create_issue", Arguments: json.RawMessage(raw)})
		if err != nil {
			t.Fatalf("%s: %v", raw, err)
		}
		msg := mcptool.ContentText(res.Content)
		if !res.IsError || !strings.Contains(msg, "arguments cannot be recorded") || strings.Contains(msg, "durably") || !strings.Contains(msg, "nothing was recorded or sent upstream") {
			t.Errorf("%s: %s", raw, msg)
		}
	}
	for _, r := range events(t, pool, "acme") {
		if r.Type != kernel.TypeRunStarted {
			t.Errorf("refused calls recorded %s %s", r.Type, r.OperationID())
		}
	}
}

// The client's name and version are the client's to choose and only
// describe the run: a NUL in one must not make run.started unstorable,
// and with it every call of the session (and every client-named run it
// opens) refused. They are recorded storable, and bounded.
func TestClientInfoWithNULDoesNotBlockCalls(t *testing.T) {
	t.Parallel()
	pool, f := issuesGateway(t)
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "evil\x00host" + strings.Repeat("x", 10000), Version: "1\x00"}, nil).
		Connect(context.Background(), &mcp.StreamableClientTransport{Endpoint: f.url, MaxRetries: -1}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	for _, meta := range []mcp.Meta{nil, {RunIDMeta: "host-nul"}} {
		if res := callTool(t, cs, "create_issue", map[string]any{"title": "t"}, meta); res.IsError {
			t.Fatalf("call (meta %v): %s", meta, mcptool.ContentText(res.Content))
		}
	}
	for _, r := range events(t, pool, "acme") {
		if r.Type == kernel.TypeRunStarted && len(r.Data) > 2000 {
			t.Errorf("run.started of %s holds %d bytes of client info", r.RunID, len(r.Data))
		}
	}
}
