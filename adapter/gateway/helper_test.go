package gateway

import (
	"context"
	"encoding/json"
	"fmt"
	"github.com/seed-7bc021c3/reckon/internal/reckontest"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/rs/zerolog"

	"github.com/seed-7bc021c3/reckon/internal/mcpserver"
	"github.com/seed-7bc021c3/reckon/internal/mcptest"
	"github.com/seed-7bc021c3/reckon/internal/pgtest"
	"github.com/seed-7bc021c3/reckon/kernel"
	"github.com/seed-7bc021c3/reckon/tool/mcptool"
)

// helperEnv makes the test binary serve `reckon mcp-test-server` when the
// gateway starts it as a stdio upstream.
const helperEnv = "RECKON_GATEWAY_TEST_HELPER"

func TestMain(m *testing.M) {
	if mode := os.Getenv(helperEnv); mode == "issues" || mode == "conformance" {
		if err := mcpserver.Main(context.Background(), os.Args[1:], os.Stdin, os.Stdout, os.Stderr); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	reckontest.Main(m)
}

// stdioIssues configures the test server as a stdio upstream (this test
// binary, one process per upstream session) over store.
func stdioIssues(name, store string) mcptool.ServerConfig {
	return mcptool.ServerConfig{Name: name, Command: []string{os.Args[0], "--store", store}, Env: map[string]string{helperEnv: "issues"}}
}

// stdioConformance is `reckon mcp-test-server --conformance` as a stdio
// upstream.
func stdioConformance(name string) mcptool.ServerConfig {
	return mcptool.ServerConfig{Name: name, Command: []string{os.Args[0], "--conformance"}, Env: map[string]string{helperEnv: "conformance"}}
}

// httpIssues is the test server over streamable HTTP, in process, with
// every Idempotency-Key header it received.
type httpIssues struct {
	srv   *httptest.Server
	mcp   *mcp.Server
	store *mcpserver.Store
	mu    sync.Mutex
	keys  []string
}

func newHTTPIssues(t *testing.T) *httpIssues {
	t.Helper()
	st := mcptest.Store(t)
	h := &httpIssues{store: st, mcp: mcpserver.NewServer(st)}
	inner := mcpserver.Handler(h.mcp)
	h.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if k := r.Header.Get(mcptool.IdempotencyKeyHeader); k != "" {
			h.mu.Lock()
			h.keys = append(h.keys, k)
			h.mu.Unlock()
		}
		inner.ServeHTTP(w, r)
	}))
	t.Cleanup(h.close)
	return h
}

// close stops the upstream: its MCP sessions first, whose readers the
// streamable handler would otherwise keep past the test, then the server.
func (h *httpIssues) close() {
	for ss := range h.mcp.Sessions() {
		_ = ss.Close()
	}
	h.srv.Close()
}

func (h *httpIssues) config(name string) mcptool.ServerConfig {
	return mcptool.ServerConfig{Name: name, URL: h.srv.URL + mcpserver.HTTPPath}
}

func (h *httpIssues) sawKey(k string) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, x := range h.keys {
		if x == k {
			return true
		}
	}
	return false
}

// fixture is a gateway over a fresh schema.
type fixture struct {
	t    *testing.T
	pool *pgxpool.Pool
	g    *Gateway
	url  string // the gateway's streamable HTTP endpoint
}

func newFixture(t *testing.T, pool *pgxpool.Pool, o Config) *fixture {
	t.Helper()
	if os.Getenv("RECKON_TEST_LOG") != "" {
		o.Log = zerolog.New(zerolog.ConsoleWriter{Out: os.Stderr}).With().Timestamp().Logger()
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	g, err := New(ctx, pool, o)
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(g.Handler())
	t.Cleanup(func() { g.Close(); hs.Close() })
	return &fixture{t: t, pool: pool, g: g, url: hs.URL + HTTPPath}
}

func newSchema(t testing.TB) *pgxpool.Pool { return pgtest.New(t).Pool }

// client opens an MCP session with the gateway over streamable HTTP.
func (f *fixture) client() *mcp.ClientSession { return f.clientWith(nil) }

// clientWith is client with opts (handlers, capabilities).
func (f *fixture) clientWith(opts *mcp.ClientOptions) *mcp.ClientSession {
	f.t.Helper()
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "gateway-test", Version: "1"}, opts).
		Connect(context.Background(), &mcp.StreamableClientTransport{Endpoint: f.url, MaxRetries: -1}, nil)
	if err != nil {
		f.t.Fatal(err)
	}
	f.t.Cleanup(func() { _ = cs.Close() })
	return cs
}

// stdioClient serves one stdio session of g over pipes.
func stdioClient(t testing.TB, g *Gateway) (*mcp.ClientSession, <-chan error) {
	t.Helper()
	cr, gw := io.Pipe()
	gr, cw := io.Pipe()
	done := make(chan error, 1)
	go func() { done <- g.ServeStdio(context.Background(), gr, gw) }()
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "gateway-test-stdio", Version: "1"}, nil).
		Connect(context.Background(), &mcp.IOTransport{Reader: cr, Writer: cw}, nil)
	if err != nil {
		t.Fatal(err)
	}
	return cs, done
}

func callTool(t *testing.T, cs *mcp.ClientSession, name string, args any, meta mcp.Meta) *mcp.CallToolResult {
	t.Helper()
	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: name, Arguments: args, Meta: meta})
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	return res
}

func structured(t *testing.T, res *mcp.CallToolResult) map[string]any {
	t.Helper()
	var out map[string]any
	b, _ := json.Marshal(res.StructuredContent)
	_ = json.Unmarshal(b, &out)
	return out
}

// outboxRow is one enqueued event with its outbox position.
type outboxRow struct {
	id int64
	kernel.Event
}

// events returns the outbox's events of project (all runs), in enqueue
// order.
func events(t *testing.T, pool *pgxpool.Pool, project string) []outboxRow {
	t.Helper()
	rows, err := pool.Query(context.Background(), `SELECT id, event FROM kernel_event_outbox WHERE event->>'project' = $1 ORDER BY id`, project)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var out []outboxRow
	for rows.Next() {
		var r outboxRow
		var raw []byte
		if err := rows.Scan(&r.id, &raw); err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal(raw, &r.Event); err != nil {
			t.Fatal(err)
		}
		out = append(out, r)
	}
	return out
}

// ofRun filters rows to one run; summary renders "type op" per row.
func ofRun(rows []outboxRow, runID string) []outboxRow {
	var out []outboxRow
	for _, r := range rows {
		if r.RunID == runID {
			out = append(out, r)
		}
	}
	return out
}

func summary(rows []outboxRow) []string {
	out := make([]string, len(rows))
	for i, r := range rows {
		out[i] = r.Type
		if op := r.OperationID(); op != "" {
			out[i] += " " + op
		}
	}
	return out
}

// waitFor polls cond until it holds or 20s pass.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// assertConnectFailed fails t unless the project acme's last tool.failed
// is mcp_connect_failed with effect none (the call never reached the
// upstream).
func assertConnectFailed(t *testing.T, pool *pgxpool.Pool) {
	t.Helper()
	var d kernel.ToolFailed
	for _, r := range events(t, pool, "acme") {
		if r.Type == kernel.TypeToolFailed {
			_ = r.DecodeData(&d)
		}
	}
	if d.ErrorType != mcptool.ErrorTypeConnectFailed || d.Effect != kernel.EffectNone {
		t.Fatalf("tool.failed %+v, want mcp_connect_failed / none", d)
	}
}
