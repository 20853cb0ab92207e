package httpapi_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/seed-7bc021c3/reckon/adapter/auth"
	"github.com/seed-7bc021c3/reckon/adapter/httpapi"
	"github.com/seed-7bc021c3/reckon/internal/pgtest"
	"github.com/seed-7bc021c3/reckon/internal/reckontest"
	"github.com/seed-7bc021c3/reckon/kernel"
	"github.com/seed-7bc021c3/reckon/kernel/operations"
)

// event is okEvent with one field's JSON replaced.
func event(field, value string) string {
	m := map[string]json.RawMessage{}
	if err := json.Unmarshal([]byte(okEvent), &m); err != nil {
		panic(err)
	}
	var b strings.Builder
	b.WriteString("{")
	first := true
	for _, k := range []string{"source_id", "event_id", "project", "run_id", "type", "ts", "actor", "parent_event_id", "data"} {
		v := string(m[k])
		if k == field {
			v = value
		}
		if !first {
			b.WriteString(",")
		}
		first = false
		fmt.Fprintf(&b, "%q:%s", k, v)
	}
	b.WriteString("}")
	return b.String()
}

// TestIngestRefusesBadBytesNamingTheField: every byte PostgreSQL would
// refuse (a 500 before) and every one encoding/json would silently
// replace or resolve is a 400 naming where it is, and nothing is written.
func TestIngestRefusesBadBytesNamingTheField(t *testing.T) {
	t.Parallel()
	srv := newServer(t)
	data := `{"operation_id":"op-7","tool":"mcp__create_issue","args":{"title":"Disk full"}}`
	cases := []struct{ name, body, want string }{
		{"NUL in data", `{"events":[` + event("data", strings.Replace(data, "Disk full", `Disk\u0000full`, 1)) + `]}`, `events[0].data.args.title`},
		{"NUL in an id", `{"events":[` + event("event_id", `"u1-\u0000"`) + `]}`, `events[0].event_id`},
		{"invalid UTF-8 in an id", `{"events":[` + event("event_id", "\"u1-\xff\"") + `]}`, `events[0].event_id" is not valid UTF-8`},
		{"lone surrogate", `{"events":[` + event("event_id", `"u1-\udcff"`) + `]}`, `events[0].event_id`},
		{"duplicate key in data", `{"events":[` + event("data", `{"operation_id":"op-7","tool":"a","tool":"b"}`) + `]}`, `events[0].data.tool" appears twice`},
		{"duplicate envelope key", `{"events":[` + strings.Replace(okEvent, `"project":"acme"`, `"project":"acme","project":"other"`, 1) + `]}`, `events[0].project" appears twice`},
		{"year 0000", `{"events":[` + event("ts", `"0000-01-01T00:00:00Z"`) + `]}`, `field "ts" must lie between`},
		{"year 9999", `{"events":[` + event("ts", `"9999-12-31T00:00:00Z"`) + `]}`, `field "ts" must lie between`},
		{"unknown envelope field", `{"events":[` + strings.Replace(okEvent, `"project":"acme"`, `"project":"acme","runId":"x"`, 1) + `]}`, `unknown field "runId"`},
		{"unknown body field", `{"events":[` + okEvent + `],"evnts":[]}`, `unknown field "evnts"`},
	}
	for _, c := range cases {
		code, out := post(t, srv, "agent-secret-1", c.body)
		msg, _ := out["error"].(string)
		if code != http.StatusBadRequest || !strings.Contains(msg, c.want) {
			t.Errorf("%s: %d %q, want 400 containing %q", c.name, code, msg, c.want)
		}
	}
	// u1-\xff and u1-\xfe were one id (both U+FFFD) and the second answered
	// "repeated" for an event never sent; both are refused now.
	for _, id := range []string{"u1-\xff", "u1-\xfe"} {
		if code, out := post(t, srv, "agent-secret-1", `{"events":[`+event("event_id", `"`+id+`"`)+`]}`); code != http.StatusBadRequest {
			t.Errorf("event id %q: %d %v", id, code, out)
		}
	}
	// The same event, valid, still goes in: nothing above was written.
	code, out := post(t, srv, "agent-secret-1", `{"events":[`+okEvent+`]}`)
	if code != http.StatusOK || !strings.Contains(fmt.Sprint(out), "accepted") {
		t.Fatalf("valid event after the refusals: %d %v", code, out)
	}
}

// TestQueryAndPathBytesAre400: %00 and %ff in a query parameter or a path
// id are a 400 naming it, not PostgreSQL's 500.
func TestQueryAndPathBytesAre400(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	_, ts := newAPI(t, e)
	for _, c := range []struct{ path, want string }{
		{"/v1/agent/operations?project=%00", `query parameter "project"`},
		{"/v1/agent/operations?project=%ff", `query parameter "project" is not valid UTF-8`},
		{"/v1/agent/operations/history?project=p&run_id=r&operation_id=%00", `query parameter "operation_id"`},
		{"/v1/agent/operations/attention?project=a&cursor=%ff", `query parameter "cursor"`},
		{"/v1/supervisor/verdicts?project=%00", `query parameter "project"`},
		{"/v1/runs/r%00?project=p", `path`},
		{"/v1/runs/r%ff?project=p", `path`},
		{"/v1/agent/operations?project=%zz", `query string does not parse`},
	} {
		r := call(t, http.MethodGet, ts.URL+c.path, readerTok, "")
		msg, _ := r.body["error"].(string)
		if r.status != http.StatusBadRequest || !strings.Contains(msg, c.want) {
			t.Errorf("%s: %d %q, want 400 naming %s", c.path, r.status, msg, c.want)
		}
	}
}

// TestReconcileRefusesBadBytes: NUL in note or evidence, a duplicate key,
// invalid UTF-8: 400 naming the field.
func TestReconcileRefusesBadBytes(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	_, ts := newAPI(t, e)
	base := `{"project":"acme","run_id":"r1","operation_id":"op-1","effect":"occurred","note":%s,"evidence":%s}`
	for _, c := range []struct{ note, evidence, want string }{
		{`"a\u0000b"`, `{}`, `field "note" contains a NUL`},
		{`"ok"`, `{"path":"a\u0000"}`, `field "evidence.path" contains a NUL`},
		{"\"\xff\"", `{}`, `field "note" is not valid UTF-8`},
		{`"ok"`, `{"a":1,"a":2}`, `field "evidence.a" appears twice`},
	} {
		r := call(t, http.MethodPost, ts.URL+"/v1/agent/operations/reconcile", operatorTok, fmt.Sprintf(base, c.note, c.evidence))
		msg, _ := r.body["error"].(string)
		if r.status != http.StatusBadRequest || !strings.Contains(msg, c.want) {
			t.Errorf("note %s evidence %s: %d %q, want 400 naming %s", c.note, c.evidence, r.status, msg, c.want)
		}
	}
}

// TestHTTPConventions: a lowercase bearer scheme, 405 with Allow, HEAD
// where GET is served, X-Request-Id kept or generated and echoed, one
// access-log line per request with the token's name and never its secret.
func TestHTTPConventions(t *testing.T) {
	t.Parallel()
	var logs reckontest.Buffer
	srv, _ := newServerConfig(t, func(c *httpapi.Config) { c.Log = zerolog.New(&logs) })

	req, _ := http.NewRequest(http.MethodGet, srv.URL+"/v1/whoami", nil)
	req.Header.Set("Authorization", "bearer reader-secret-1")
	req.Header.Set("X-Request-Id", "client-id-1")
	resp := do(t, req)
	if resp.StatusCode != http.StatusOK || resp.Header.Get("X-Request-Id") != "client-id-1" {
		t.Fatalf("lowercase bearer: %d, request id %q", resp.StatusCode, resp.Header.Get("X-Request-Id"))
	}
	req, _ = http.NewRequest(http.MethodDelete, srv.URL+"/v1/events", nil)
	resp = do(t, req)
	if resp.StatusCode != http.StatusMethodNotAllowed || resp.Header.Get("Allow") != "POST" {
		t.Fatalf("405: %d Allow=%q", resp.StatusCode, resp.Header.Get("Allow"))
	}
	if id := resp.Header.Get("X-Request-Id"); len(id) < 16 {
		t.Fatalf("generated request id %q", id)
	}
	req, _ = http.NewRequest(http.MethodPost, srv.URL+"/healthz", nil)
	if resp = do(t, req); resp.Header.Get("Allow") != "GET, HEAD" {
		t.Fatalf("405 on /healthz: Allow=%q", resp.Header.Get("Allow"))
	}
	for _, p := range []string{"/healthz", "/openapi.json", "/metrics"} {
		req, _ = http.NewRequest(http.MethodHead, srv.URL+p, nil)
		if resp = do(t, req); resp.StatusCode != http.StatusOK {
			t.Fatalf("HEAD %s: %d", p, resp.StatusCode)
		}
	}
	lines := logs.Lines()
	var access []map[string]any
	for _, l := range lines {
		var m map[string]any
		if err := json.Unmarshal([]byte(l), &m); err != nil {
			t.Fatalf("log line is not JSON: %s", l)
		}
		if m["message"] == "http request" {
			access = append(access, m)
		}
		if strings.Contains(l, "reader-secret-1") {
			t.Fatalf("a log line carries the secret: %s", l)
		}
	}
	if len(access) != 6 {
		t.Fatalf("%d access-log lines for 6 requests: %v", len(access), lines)
	}
	first := access[0]
	for k, want := range map[string]any{"method": "GET", "route": "GET /v1/whoami", "status": float64(200), "request_id": "client-id-1", "token": "ro"} {
		if first[k] != want {
			t.Errorf("access log %s = %v, want %v (%v)", k, first[k], want, first)
		}
	}
	for _, k := range []string{"bytes", "duration_ms"} {
		if _, ok := first[k].(float64); !ok {
			t.Errorf("access log lacks %s: %v", k, first)
		}
	}
}

// TestDatabaseOutageIs503: with PostgreSQL unreachable, ingest and reads
// answer 503 with Retry-After, not 500.
func TestDatabaseOutageIs503(t *testing.T) {
	t.Parallel()
	pool := pgtest.DeadPool(t)
	srv := serveConfig(t, pool, func(c *httpapi.Config) { c.Operations = operations.New(pool, operations.Config{}) })
	code, out := post(t, srv, "agent-secret-1", `{"events":[`+okEvent+`]}`)
	if code != http.StatusServiceUnavailable {
		t.Fatalf("ingest with the database down: %d %v", code, out)
	}
	r := call(t, http.MethodGet, srv.URL+"/v1/projects", "reader-secret-1", "")
	if r.status != http.StatusServiceUnavailable || r.header.Get("Retry-After") == "" {
		t.Fatalf("projects with the database down: %d Retry-After=%q %s", r.status, r.header.Get("Retry-After"), r.raw)
	}
}

// TestSlowBodyTimesOut: a body that trickles is cut off at the server's
// body deadline with a 408; a request without a token never gets its body
// read (401 at once).
func TestSlowBodyTimesOut(t *testing.T) {
	t.Parallel()
	tokens, _ := auth.Parse("bot:agent:agent-secret-1:agent-x")
	api := httpapi.New(httpapi.Config{Tokens: tokens, Log: zerolog.Nop(), BodyTimeout: 300 * time.Millisecond,
		Journal: nopJournal{}})
	srv := httptest.NewServer(api)
	t.Cleanup(srv.Close)
	for _, c := range []struct {
		auth string
		want int
	}{{"Authorization: Bearer agent-secret-1\r\n", 408}, {"", 401}} {
		conn, err := net.Dial("tcp", srv.Listener.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(conn, "POST /v1/events HTTP/1.1\r\nHost: x\r\n%sContent-Length: 1000\r\n\r\n{\"events\":", c.auth)
		start := time.Now()
		_ = conn.SetReadDeadline(time.Now().Add(10 * time.Second))
		first, err := io.ReadAll(io.LimitReader(conn, 12))
		conn.Close()
		if err != nil || !bytes.HasPrefix(first, []byte(fmt.Sprintf("HTTP/1.1 %d", c.want))) {
			t.Fatalf("slow body (%q): %q %v after %s, want %d", c.auth, first, err, time.Since(start), c.want)
		}
	}
}

// do sends req and drains and closes its answer.
func do(t *testing.T, req *http.Request) *http.Response {
	t.Helper()
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp
}

// nopJournal accepts nothing; the slow-body test never reaches it.
type nopJournal struct{}

func (nopJournal) Ingest(context.Context, []kernel.Event) ([]kernel.IngestResult, error) {
	return nil, nil
}

// TestAuthBeforeQueryCheck: docs/design.md answers a missing or unknown
// token with 401 and a known token with too small a role with 403, even
// for a query with a NUL or invalid UTF-8 (never 400 before the token is
// looked at).
func TestAuthBeforeQueryCheck(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	_, ts := newAPI(t, e)
	u := ts.URL + "/v1/agent/operations?project=%00"
	for _, c := range []struct {
		token  string
		status int
	}{{"", http.StatusUnauthorized}, {"nope-nope-nope", http.StatusUnauthorized}, {agentTok, http.StatusForbidden}, {readerTok, http.StatusBadRequest}} {
		if r := call(t, http.MethodGet, u, c.token, ""); r.status != c.status {
			t.Errorf("token %q: %d %s, want %d", c.token, r.status, r.raw, c.status)
		}
	}
}
