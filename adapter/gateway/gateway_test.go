package gateway

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/seed-7bc021c3/reckon/internal/reckontest"
	"github.com/seed-7bc021c3/reckon/kernel"
	"github.com/seed-7bc021c3/reckon/tool/mcptool"
)

// A call through the gateway: the client gets the upstream's result
// unchanged; the outbox holds run.started, tool.started, tool.completed in
// that order; the upstream got the operation's idempotency key in _meta
// (its own record answers lookup_operation for it) and as the HTTP header.
func TestCallRecordedAroundUpstream(t *testing.T) {
	t.Parallel()
	up := newHTTPIssues(t)
	f := newFixture(t, newSchema(t), Config{Project: "acme", Servers: []mcptool.ServerConfig{up.config("issues")}})
	cs := f.client()

	tools, err := cs.ListTools(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, tl := range tools.Tools {
		names = append(names, tl.Name)
		if tl.Name == "create_issue" && (tl.Annotations == nil || tl.Annotations.DestructiveHint == nil || *tl.Annotations.DestructiveHint) {
			t.Errorf("create_issue annotations not passed through: %+v", tl.Annotations)
		}
	}
	if strings.Join(names, ",") != "create_issue,create_issue_confirmed,get_issue,lookup_operation,slow_create_issue" {
		t.Fatalf("served tools %v", names)
	}

	before := time.Now()
	res := callTool(t, cs, "create_issue", map[string]any{"title": "Disk full on db-3"}, nil)
	out := structured(t, res)
	iss, _ := out["issue"].(map[string]any)
	if res.IsError || iss["title"] != "Disk full on db-3" || out["replayed"] != false {
		t.Fatalf("result: %+v", res)
	}

	rows := events(t, f.pool, "acme")
	if got := strings.Join(summary(rows), ", "); got != "run.started, tool.started op-1, tool.completed op-1" {
		t.Fatalf("outbox: %s", got)
	}
	runID := rows[0].RunID
	for _, r := range rows {
		if r.SourceID != DefaultSource || r.Actor != "agent" || r.RunID != runID || !strings.HasPrefix(r.EventID, "acme/"+runID+"/") {
			t.Fatalf("event %+v: want source mcp-gateway, actor agent, id acme/<run>/…", r.Event)
		}
	}
	var started kernel.ToolStarted
	if err := rows[1].DecodeData(&started); err != nil {
		t.Fatal(err)
	}
	var args map[string]any
	_ = json.Unmarshal(started.Args, &args)
	if started.Tool != "mcp__create_issue" || started.Server != "issues" || started.UpstreamTool != "create_issue" || len(args) != 1 || args["title"] != "Disk full on db-3" {
		t.Fatalf("tool.started data %+v args %s", started, started.Args)
	}
	if want := up.config("issues").Endpoint(); started.ServerEndpoint != want {
		t.Fatalf("tool.started server_endpoint %q, want the upstream's, %q", started.ServerEndpoint, want)
	}

	key := mcptool.IdempotencyKey("acme", runID, "op-1")
	op, _, found, err := up.store.Lookup(key)
	if err != nil || !found {
		t.Fatalf("upstream has no record of key %s (%v)", key, err)
	}
	if !up.sawKey(key) {
		t.Errorf("no Idempotency-Key %s header reached the upstream", key)
	}
	// The upstream's own record of when it acted lies between tool.started
	// and the terminal event.
	if op.CreatedAt.Before(rows[1].TS) || rows[2].TS.Before(op.CreatedAt) || rows[1].TS.Before(before.Add(-time.Second)) {
		t.Errorf("order: tool.started %s, upstream acted %s, tool.completed %s", rows[1].TS, op.CreatedAt, rows[2].TS)
	}

	// The same call through a plain session with the upstream gives the
	// same shape of result: nothing was added or removed.
	direct, err := mcp.NewClient(&mcp.Implementation{Name: "direct"}, nil).Connect(context.Background(), &mcp.StreamableClientTransport{Endpoint: up.config("x").URL}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer direct.Close()
	dres := callTool(t, direct, "create_issue", map[string]any{"title": "Disk full on db-3"}, mcp.Meta{mcptool.IdempotencyKeyMeta: key})
	a, _ := json.Marshal(res)
	b, _ := json.Marshal(dres)
	if !strings.Contains(string(b), `"replayed":true`) || strings.ReplaceAll(string(b), ":true", ":false") != string(a) {
		t.Errorf("through the gateway %s\ndirect (replayed) %s", a, b)
	}

	// The client ends its session: the run completes.
	if err := cs.Close(); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "run.completed", func() bool {
		r := ofRun(events(t, f.pool, "acme"), runID)
		return len(r) == 4 && r[3].Type == kernel.TypeRunCompleted
	})
}

// tool.started commits before the call leaves: while the outbox is locked
// (the gateway's enqueue waits), the upstream never sees the call.
func TestStartedDurableBeforeUpstreamSeesCall(t *testing.T) {
	t.Parallel()
	up := newHTTPIssues(t)
	pool := newSchema(t)
	f := newFixture(t, pool, Config{Project: "acme", Servers: []mcptool.ServerConfig{up.config("issues")}})
	cs := f.client()
	runID := "host-run-1"

	ctx := context.Background()
	tx, err := pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(ctx, `LOCK TABLE kernel_event_outbox IN EXCLUSIVE MODE`); err != nil {
		t.Fatal(err)
	}
	done := make(chan *mcp.CallToolResult, 1)
	go func() {
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "create_issue", Arguments: map[string]any{"title": "held"}, Meta: mcp.Meta{RunIDMeta: runID}})
		if err != nil {
			res = gatewayError(err.Error())
		}
		done <- res
	}()
	time.Sleep(500 * time.Millisecond)
	key := mcptool.IdempotencyKey("acme", runID, "op-1")
	if _, _, found, _ := up.store.Lookup(key); found || up.sawKey(key) {
		t.Fatal("the upstream saw the call while its tool.started could not commit")
	}
	select {
	case res := <-done:
		t.Fatalf("the call returned while tool.started could not commit: %+v", res)
	default:
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if res := <-done; res.IsError {
		t.Fatalf("after the lock: %s", mcptool.ContentText(res.Content))
	}
	if _, _, found, _ := up.store.Lookup(key); !found {
		t.Fatal("the upstream never got the call")
	}
	if got := strings.Join(summary(ofRun(events(t, pool, "acme"), runID)), ", "); got != "run.started, tool.started op-1, tool.completed op-1" {
		t.Fatalf("outbox of %s: %s", runID, got)
	}
}

// failures carry the kernel's classification, and the client sees the
// upstream's own error result unchanged.
func TestFailureClassification(t *testing.T) {
	t.Parallel()
	up := newHTTPIssues(t)
	pool := newSchema(t)
	slow := up.config("issues")
	slow.Timeout = "400ms"
	f := newFixture(t, pool, Config{Project: "acme", Servers: []mcptool.ServerConfig{slow}})
	cs := f.client()

	// Arguments failing the input schema: rejected, never sent.
	res := callTool(t, cs, "create_issue", map[string]any{"body": "no title"}, nil)
	if !res.IsError || !strings.Contains(mcptool.ContentText(res.Content), "not sent upstream") {
		t.Fatalf("schema violation: %+v", res)
	}
	// An error result of the upstream's (blank title), passed through.
	res = callTool(t, cs, "create_issue", map[string]any{"title": "  "}, nil)
	if !res.IsError || mcptool.ContentText(res.Content) != "title: must not be empty" {
		t.Fatalf("upstream error result changed: %q", mcptool.ContentText(res.Content))
	}
	// No answer within the server's timeout, after the call was sent.
	res = callTool(t, cs, "slow_create_issue", map[string]any{"title": "late", "delay_ms": 3000}, nil)
	if !res.IsError || !strings.Contains(mcptool.ContentText(res.Content), "may have reached the server") {
		t.Fatalf("timeout: %+v", res)
	}

	rows := events(t, pool, "acme")
	want := map[string][2]string{
		"op-1": {kernel.ErrorTypeValidation, kernel.EffectNone},
		"op-2": {mcptool.ErrorTypeErrorResult, kernel.EffectUncertain},
		"op-3": {mcptool.ErrorTypeTimeout, kernel.EffectUncertain},
	}
	seen := 0
	for _, r := range rows {
		if r.Type != kernel.TypeToolFailed {
			continue
		}
		var d kernel.ToolFailed
		if err := r.DecodeData(&d); err != nil {
			t.Fatal(err)
		}
		w := want[d.OperationID]
		if d.ErrorType != w[0] || d.Effect != w[1] {
			t.Errorf("%s: tool.failed %s/%s, want %s/%s (%s)", d.OperationID, d.ErrorType, d.Effect, w[0], w[1], d.Error)
		}
		seen++
	}
	if seen != 3 {
		t.Fatalf("tool.failed events: %v", summary(rows))
	}
	if _, _, found, _ := up.store.Lookup(mcptool.IdempotencyKey("acme", rows[0].RunID, "op-1")); found {
		t.Error("the rejected call reached the upstream")
	}
}

// An upstream that cannot be reached when a session needs it: the call is
// refused with effect none (tools/call never sent).
func TestUnreachableUpstreamIsNone(t *testing.T) {
	t.Parallel()
	up := newHTTPIssues(t)
	pool := newSchema(t)
	f := newFixture(t, pool, Config{Project: "acme", Servers: []mcptool.ServerConfig{up.config("issues")}})
	first := f.client()
	callTool(t, first, "get_issue", map[string]any{"id": "ISS-1"}, nil) // adopts the discovery session
	up.close()
	second := f.client()
	res := callTool(t, second, "create_issue", map[string]any{"title": "nowhere"}, nil)
	if !res.IsError || !strings.Contains(mcptool.ContentText(res.Content), "tools/call not sent") {
		t.Fatalf("unreachable upstream: %+v", res)
	}
	assertConnectFailed(t, pool)
}

// A run named in _meta outlives sessions and gateway processes: operation
// ids continue where the last process stopped, one run.started, and no end
// is recorded for it. Run ids that are malformed or already used by others
// are refused before anything is recorded or sent.
func TestClientRunIDAcrossRestarts(t *testing.T) {
	t.Parallel()
	store := t.TempDir() + "/issues.json"
	pool := newSchema(t)
	o := Config{Project: "acme", Servers: []mcptool.ServerConfig{stdioIssues("issues", store)}}
	meta := mcp.Meta{RunIDMeta: "host-7"}

	g1 := newFixture(t, pool, o)
	cs := g1.client()
	callTool(t, cs, "create_issue", map[string]any{"title": "one"}, meta)
	callTool(t, cs, "create_issue", map[string]any{"title": "two"}, meta)
	_ = cs.Close()
	g1.g.Close()

	g2 := newFixture(t, pool, o)
	cs2 := g2.client()
	res := callTool(t, cs2, "create_issue", map[string]any{"title": "three"}, meta)
	if res.IsError {
		t.Fatalf("after restart: %s", mcptool.ContentText(res.Content))
	}
	_ = cs2.Close()
	waitFor(t, "session runs ended", func() bool {
		n := 0
		for _, r := range events(t, pool, "acme") {
			if r.Type == kernel.TypeRunCompleted {
				n++
			}
		}
		return n == 2
	})
	if got := strings.Join(summary(ofRun(events(t, pool, "acme"), "host-7")), ", "); got !=
		"run.started, tool.started op-1, tool.completed op-1, tool.started op-2, tool.completed op-2, tool.started op-3, tool.completed op-3" {
		t.Fatalf("run host-7: %s", got)
	}

	// A run id the kernel (or anyone else) already used.
	ev, _ := kernel.NewEvent("kernel", "acme/kernel-run/run/started", "acme", "kernel-run", kernel.TypeRunStarted, "kernel", time.Now(), struct{}{})
	raw, _ := json.Marshal(ev)
	if _, err := pool.Exec(context.Background(), `INSERT INTO kernel_event_outbox (source_id, event_id, event, payload_digest) VALUES ('kernel', $1, $2, '\x00')`, ev.EventID, raw); err != nil {
		t.Fatal(err)
	}
	cs3 := g2.client()
	for _, id := range []any{"kernel-run", "a.b", 42} {
		res := callTool(t, cs3, "create_issue", map[string]any{"title": "x"}, mcp.Meta{RunIDMeta: id})
		if !res.IsError || !strings.Contains(mcptool.ContentText(res.Content), "nothing was recorded or sent upstream") {
			t.Fatalf("run id %v: %+v", id, mcptool.ContentText(res.Content))
		}
	}
	if n := len(ofRun(events(t, pool, "acme"), "kernel-run")); n != 1 {
		t.Fatalf("refused calls recorded %d events in kernel-run", n-1)
	}
}

// A gateway that dies holding a session: once its lease runs out, another
// gateway ends the session run with run.failed (its unanswered operation
// moves to the crash window), and the dead session's later calls are
// refused.
func TestDeadInstanceSessionRunsFail(t *testing.T) {
	t.Parallel()
	up := newHTTPIssues(t)
	pool := newSchema(t)
	o := Config{Project: "acme", Servers: []mcptool.ServerConfig{up.config("issues")}, Lease: 600 * time.Millisecond}
	dead := newFixture(t, pool, o)
	cs := dead.client()
	callTool(t, cs, "create_issue", map[string]any{"title": "before the crash"}, nil)
	runID := events(t, pool, "acme")[0].RunID
	// Simulate a crash mid-call: a tool.started with no answer, and the
	// lease no longer renewed.
	if _, err := dead.g.st.beginCall(context.Background(), runRef{project: "acme", runID: runID, source: DefaultSource, kind: kindSession, instance: dead.g.instance}, kernel.Event{},
		func(op string) (kernel.Event, error) {
			return dead.g.event(runID, kernel.TypeToolStarted, op+"/started", kernel.ToolStarted{OperationID: op, Tool: "mcp__create_issue"})
		}); err != nil {
		t.Fatal(err)
	}
	dead.g.stopLease()
	<-dead.g.leaseDone

	time.Sleep(700 * time.Millisecond)
	newFixture(t, pool, o) // its first lease round reaps
	waitFor(t, "run.failed of the dead instance's session", func() bool {
		r := ofRun(events(t, pool, "acme"), runID)
		return r[len(r)-1].Type == kernel.TypeRunFailed
	})
	r := ofRun(events(t, pool, "acme"), runID)
	var d kernel.RunFailed
	_ = r[len(r)-1].DecodeData(&d)
	if r[len(r)-1].SourceID != DefaultSource || !strings.Contains(d.Error, dead.g.instance) {
		t.Fatalf("run.failed %+v", r[len(r)-1])
	}
	res := callTool(t, cs, "create_issue", map[string]any{"title": "after"}, nil)
	if !res.IsError || !strings.Contains(mcptool.ContentText(res.Content), "has ended") {
		t.Fatalf("call in a reaped run: %+v", mcptool.ContentText(res.Content))
	}
}

// Shutdown lets calls in flight finish within the grace, then cancels
// them: the cut call is tool.failed uncertain and its run fails naming it.
func TestShutdownCutsLongCall(t *testing.T) {
	t.Parallel()
	up := newHTTPIssues(t)
	pool := newSchema(t)
	f := newFixture(t, pool, Config{Project: "acme", Servers: []mcptool.ServerConfig{up.config("issues")}, ShutdownGrace: 300 * time.Millisecond})
	cs := f.client()
	errc := make(chan error, 1)
	go func() {
		_, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "slow_create_issue", Arguments: map[string]any{"title": "long", "delay_ms": 20000}})
		errc <- err
	}()
	waitFor(t, "the call in flight", func() bool { return len(events(t, pool, "acme")) >= 2 })
	f.g.Close()
	rows := events(t, pool, "acme")
	got := strings.Join(summary(rows), ", ")
	if got != "run.started, tool.started op-1, tool.failed op-1, run.failed" {
		t.Fatalf("outbox: %s", got)
	}
	var fd kernel.ToolFailed
	var rd kernel.RunFailed
	_ = rows[2].DecodeData(&fd)
	_ = rows[3].DecodeData(&rd)
	if fd.Effect != kernel.EffectUncertain || !strings.Contains(rd.Error, "op-1") {
		t.Fatalf("tool.failed %+v, run.failed %+v", fd, rd)
	}
	var n int
	_ = pool.QueryRow(context.Background(), `SELECT count(*) FROM gateway_instances WHERE stopped_at IS NOT NULL`).Scan(&n)
	if n != 1 {
		t.Fatalf("instance not marked stopped")
	}
	<-errc
}

// The stdio transport: one session, its run completes when stdin closes.
func TestStdioSession(t *testing.T) {
	t.Parallel()
	pool := newSchema(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	g, err := New(ctx, pool, Config{Servers: []mcptool.ServerConfig{stdioIssues("issues", t.TempDir()+"/i.json")}})
	if err != nil {
		t.Fatal(err)
	}
	cs, done := stdioClient(t, g)
	res := callTool(t, cs, "create_issue", map[string]any{"title": "over stdio"}, nil)
	if res.IsError {
		t.Fatal(mcptool.ContentText(res.Content))
	}
	_ = cs.Close()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(summary(events(t, pool, DefaultProject)), ", "); got != "run.started, tool.started op-1, tool.completed op-1, run.completed" {
		t.Fatalf("outbox: %s", got)
	}
}

// Start-up refuses what it cannot serve faithfully, in one line naming
// the servers and the tool.
func TestStartupRefusals(t *testing.T) {
	t.Parallel()
	pool := newSchema(t)
	a, b := newHTTPIssues(t), newHTTPIssues(t)
	ctx := context.Background()
	_, err := New(ctx, pool, Config{Servers: []mcptool.ServerConfig{a.config("a"), b.config("b")}})
	if err == nil || !strings.Contains(err.Error(), `tool "create_issue" is offered by upstream "a" and by upstream "b"`) {
		t.Fatalf("collision: %v", err)
	}
	only := b.config("b")
	only.Tools = []string{"get_issue"}
	g, err := New(ctx, pool, Config{Servers: []mcptool.ServerConfig{a.config("a"), only}})
	if err == nil || !strings.Contains(err.Error(), "get_issue") {
		t.Fatalf("collision on the allowed tool: %v (%v)", err, g)
	}
	only.Tools = []string{"no_such_tool"}
	if _, err := New(ctx, pool, Config{Servers: []mcptool.ServerConfig{only}}); err == nil || !strings.Contains(err.Error(), `has no tool "no_such_tool"`) {
		t.Fatalf("unknown allowed tool: %v", err)
	}
	ws := a.config("ws")
	ws.URL += "?root={workspace}"
	if _, err := New(ctx, pool, Config{Servers: []mcptool.ServerConfig{ws}}); err == nil || !strings.Contains(err.Error(), "{workspace}") {
		t.Fatalf("{workspace}: %v", err)
	}
	for _, src := range []string{"kernel", "supervisor", "operator", "operator:alice"} {
		if _, err := New(ctx, pool, Config{Source: src, Servers: []mcptool.ServerConfig{a.config("a")}}); err == nil || !strings.Contains(err.Error(), "RECKON_GATEWAY_SOURCE") {
			t.Fatalf("source %q: %v", src, err)
		}
	}
	down := mcptool.ServerConfig{Name: "down", Command: []string{"/nonexistent/mcp-server"}}
	if _, err := New(ctx, pool, Config{Servers: []mcptool.ServerConfig{down}}); err == nil || !strings.Contains(err.Error(), `upstream "down"`) {
		t.Fatalf("unreachable upstream at start-up: %v", err)
	}
}

func TestParseCommand(t *testing.T) {
	t.Parallel()
	env := map[string]string{"RECKON_MCP_SERVERS": `[{"name":"issues","command":["reckon","mcp-test-server"]}]`, "RECKON_GATEWAY_PROJECT": "acme"}
	get := func(k string) string { return env[k] }
	c, err := ParseCommand([]string{"--http", "127.0.0.1:0", "--publisher=false"}, get, &strings.Builder{})
	if err != nil || c.Project != "acme" || c.Source != DefaultSource || c.Publisher || c.HTTPAddr != "127.0.0.1:0" || len(c.Servers) != 1 {
		t.Fatalf("%+v %v", c, err)
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--source", "kernel"}, "RECKON_GATEWAY_SOURCE"},
		{[]string{"--source", "operator:bob"}, "reserved"},
		{[]string{"--project", "a/b"}, "RECKON_GATEWAY_PROJECT"},
		{[]string{"--http", "0.0.0.0:8765"}, "RECKON_GATEWAY_TOKEN"},
		{[]string{"--http", "nonsense"}, "HOST:PORT"},
		{[]string{"--servers", "[]"}, "names no upstream"},
		{[]string{"--servers", `[{"name":"x"}]`}, "RECKON_MCP_SERVERS[0].command"},
		{[]string{"--lease", "0s"}, "--lease"},
		{[]string{"extra"}, "unexpected arguments"},
	} {
		if _, err := ParseCommand(tc.args, get, &strings.Builder{}); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: %v, want an error naming %s", tc.args, err, tc.want)
		}
	}
	env["RECKON_GATEWAY_TOKEN"] = "s3cret"
	if _, err := ParseCommand([]string{"--http", "0.0.0.0:8765"}, get, &strings.Builder{}); err != nil {
		t.Fatalf("non-loopback with a token: %v", err)
	}
	var help strings.Builder
	if _, err := ParseCommand([]string{"--help"}, get, &help); !IsHelp(err) || !strings.Contains(help.String(), "RECKON_GATEWAY_PROJECT") || !strings.Contains(help.String(), "-http") {
		t.Fatalf("help: %v\n%s", err, help.String())
	}
}

// With a token, HTTP clients without it are refused.
func TestHTTPToken(t *testing.T) {
	t.Parallel()
	up := newHTTPIssues(t)
	f := newFixture(t, newSchema(t), Config{Servers: []mcptool.ServerConfig{up.config("issues")}, Token: "s3cret"})
	if _, err := mcp.NewClient(&mcp.Implementation{Name: "x"}, nil).Connect(context.Background(), &mcp.StreamableClientTransport{Endpoint: f.url, MaxRetries: -1}, nil); err == nil {
		t.Fatal("a client without the token connected")
	}
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "x"}, nil).Connect(context.Background(), &mcp.StreamableClientTransport{Endpoint: f.url, MaxRetries: -1,
		HTTPClient: &http.Client{Transport: bearer("s3cret")}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	if res := callTool(t, cs, "get_issue", map[string]any{"id": "ISS-9"}, nil); !res.IsError {
		t.Fatal("get_issue of a missing issue must be the upstream's error result")
	}
}

type bearer string

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+string(b))
	return http.DefaultTransport.RoundTrip(r)
}

// The host's own _meta reaches the upstream (its progress token too, and
// the upstream's progress notifications come back to the host); reckon's
// keys are the gateway's, whatever the host put there.
func TestMetaAndProgressPassThrough(t *testing.T) {
	t.Parallel()
	srv := mcp.NewServer(&mcp.Implementation{Name: "echo-upstream"}, nil)
	type none struct{}
	mcp.AddTool(srv, &mcp.Tool{Name: "echo_meta"}, func(ctx context.Context, req *mcp.CallToolRequest, _ none) (*mcp.CallToolResult, any, error) {
		for i := 1; i <= 2; i++ {
			_ = req.Session.NotifyProgress(ctx, &mcp.ProgressNotificationParams{ProgressToken: req.Params.GetProgressToken(), Progress: float64(i), Total: 2})
		}
		b, _ := json.Marshal(req.Params.GetMeta())
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: string(b)}}}, nil, nil
	})
	srv.AddTool(&mcp.Tool{Name: "protocol_error", InputSchema: map[string]any{"type": "object"}}, func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return nil, &jsonrpc.Error{Code: -32001, Message: "upstream refused at the protocol level"}
	})
	hs := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, nil))
	defer func() {
		// The handler keeps a session's reader until the session ends
		// (its closeAll is unexported): end them, or they outlive the test.
		for ss := range srv.Sessions() {
			_ = ss.Close()
		}
		hs.Close()
	}()
	pool := newSchema(t)
	f := newFixture(t, pool, Config{Project: "acme", Servers: []mcptool.ServerConfig{{Name: "echo", URL: hs.URL}}})

	progress := make(chan float64, 4)
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "host"}, &mcp.ClientOptions{
		ProgressNotificationHandler: func(_ context.Context, r *mcp.ProgressNotificationClientRequest) {
			if r.Params.ProgressToken == "tok-1" {
				progress <- r.Params.Progress
			}
		},
	}).Connect(context.Background(), &mcp.StreamableClientTransport{Endpoint: f.url, MaxRetries: -1}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	res := callTool(t, cs, "echo_meta", map[string]any{}, mcp.Meta{
		"progressToken": "tok-1", "host.example/trace": "t-9", mcptool.IdempotencyKeyMeta: "spoofed", RunIDMeta: "host-run",
	})
	var seen map[string]any
	if err := json.Unmarshal([]byte(mcptool.ContentText(res.Content)), &seen); err != nil {
		t.Fatalf("%s: %v", mcptool.ContentText(res.Content), err)
	}
	if seen["host.example/trace"] != "t-9" || seen["progressToken"] != "tok-1" ||
		seen[mcptool.IdempotencyKeyMeta] != "acme/host-run/op-1" || seen[mcptool.OperationIDMeta] != "op-1" || seen[mcptool.ProjectMeta] != "acme" {
		t.Fatalf("the upstream saw _meta %v", seen)
	}
	for want := 1.0; want <= 2; want++ {
		select {
		case got := <-progress:
			if got != want {
				t.Fatalf("progress %v, want %v", got, want)
			}
		case <-time.After(5 * time.Second):
			t.Fatalf("progress %v never reached the host", want)
		}
	}

	// A JSON-RPC error of the upstream's reaches the host as that error;
	// the call was sent, so its effect is uncertain.
	_, err = cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "protocol_error", Arguments: map[string]any{}, Meta: mcp.Meta{RunIDMeta: "host-run"}})
	var wire *jsonrpc.Error
	if !errors.As(err, &wire) || wire.Code != -32001 || wire.Message != "upstream refused at the protocol level" {
		t.Fatalf("protocol error through the gateway: %#v", err)
	}
	rows := ofRun(events(t, pool, "acme"), "host-run")
	var d kernel.ToolFailed
	_ = rows[len(rows)-1].DecodeData(&d)
	if rows[len(rows)-1].Type != kernel.TypeToolFailed || d.OperationID != "op-2" || d.ErrorType != mcptool.ErrorTypeCallFailed || d.Effect != kernel.EffectUncertain {
		t.Fatalf("after a protocol error: %v %+v", summary(rows), d)
	}
}

func TestReservedMetaKey(t *testing.T) {
	t.Parallel()
	for k, want := range map[string]bool{
		"io.modelcontextprotocol/protocolVersion": true, "dev.mcp/x": true, "dev.reckon/run-id": false,
		"progressToken": false, "modelcontextprotocol.io/x": false, "host.example/trace": false,
	} {
		if reservedMetaKey(k) != want {
			t.Errorf("reservedMetaKey(%q) = %v", k, !want)
		}
	}
}

// A kept-alive connection that waits for its next request is closed after
// ConnIdle, token or not: otherwise anyone who can reach the port could
// hold connections, and the process's file descriptors, forever. A wrong
// token of another length is refused as one of the same length is.
func TestHTTPIdleConnectionsAreClosed(t *testing.T) {
	t.Parallel()
	addr := serveBounded(t, Config{Token: "s3cret", ConnIdle: 200 * time.Millisecond})
	var reqs []string
	for _, token := range []string{"s3creX", "a-much-longer-wrong-token"} {
		// Without a body: a refusal of a request whose body is unread
		// closes the connection at once (TestHTTPEarlyRefusalAndTrickles).
		reqs = append(reqs, "GET "+HTTPPath+" HTTP/1.1\r\nHost: gw\r\nAuthorization: Bearer "+token+"\r\n\r\n")
	}
	reckontest.IdleConnectionCloses(t, addr, http.StatusUnauthorized, reqs...)
}
