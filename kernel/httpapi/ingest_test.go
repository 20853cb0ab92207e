package httpapi_test

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"

	"github.com/seed-7bc021c3/reckon/internal/pgtest"
	"github.com/seed-7bc021c3/reckon/kernel/auth"
	"github.com/seed-7bc021c3/reckon/kernel/httpapi"
	"github.com/seed-7bc021c3/reckon/kernel/journal"
)

func newServer(t *testing.T) *httptest.Server {
	t.Helper()
	s := pgtest.New(t)
	tokens, err := auth.Parse("bot:agent:agent-secret-1,ro:reader:reader-secret-1,op:operator:operator-secret-1")
	if err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	api := httpapi.New(httpapi.Options{Tokens: tokens, Log: zerolog.Nop(), Registry: reg})
	api.MountIngest(journal.New(s.Pool, reg))
	srv := httptest.NewServer(api)
	t.Cleanup(srv.Close)
	return srv
}

func post(t *testing.T, srv *httptest.Server, token, body string) (int, map[string]any) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, srv.URL+"/v1/events", strings.NewReader(body))
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	var out map[string]any
	if err := json.Unmarshal(raw, &out); err != nil {
		t.Fatalf("response is not a JSON object: %s", raw)
	}
	return resp.StatusCode, out
}

const okEvent = `{"source_id":"agent-x","event_id":"run-42/op-7/started","project":"acme","run_id":"run-42",
 "type":"tool.started","ts":"2026-11-30T10:00:00Z","actor":"agent","parent_event_id":null,
 "data":{"operation_id":"op-7","tool":"mcp__create_issue","args":{"title":"Disk full"}}}`

func TestIngestStatusesOverHTTP(t *testing.T) {
	t.Parallel()
	srv := newServer(t)
	reordered := `{"data":{"args":{"title":"Disk full"},"tool":"mcp__create_issue","operation_id":"op-7"},"actor":"agent",
	 "type":"tool.started","ts":"2026-11-30T11:00:00+01:00","run_id":"run-42","project":"acme","event_id":"run-42/op-7/started","source_id":"agent-x"}`
	changed := strings.Replace(okEvent, "Disk full", "Disk empty", 1)
	code, out := post(t, srv, "agent-secret-1", `{"events":[`+okEvent+`,`+reordered+`,`+changed+`]}`)
	if code != http.StatusOK {
		t.Fatalf("status %d: %v", code, out)
	}
	results := out["results"].([]any)
	want := []string{"accepted", "repeated", "conflict"}
	for i, w := range want {
		r := results[i].(map[string]any)
		if r["status"] != w || r["source_id"] != "agent-x" || r["event_id"] != "run-42/op-7/started" {
			t.Fatalf("result %d = %v, want status %s", i, r, w)
		}
	}
}

func TestIngestRejectsBadEventNamingTheField(t *testing.T) {
	t.Parallel()
	srv := newServer(t)
	bad := strings.Replace(okEvent, `"ts":"2026-11-30T10:00:00Z"`, `"ts":"30/11/2026"`, 1)
	code, out := post(t, srv, "operator-secret-1", `{"events":[`+okEvent+`,`+bad+`]}`)
	if code != http.StatusBadRequest {
		t.Fatalf("status %d, want 400", code)
	}
	msg := out["error"].(string)
	if !strings.Contains(msg, "events[1]") || !strings.Contains(msg, `"ts"`) {
		t.Fatalf("error %q does not name events[1] and ts", msg)
	}
	// Nothing of the batch was written: the good event is still new.
	code, out = post(t, srv, "agent-secret-1", `{"events":[`+okEvent+`]}`)
	if code != 200 || out["results"].([]any)[0].(map[string]any)["status"] != "accepted" {
		t.Fatalf("batch was half-written: %d %v", code, out)
	}
	for _, body := range []string{`{"events": 3}`, `not json`, `{}`, ``} {
		if code, out := post(t, srv, "agent-secret-1", body); code != http.StatusBadRequest || out["error"] == "" {
			t.Fatalf("body %q: %d %v", body, code, out)
		}
	}
}

func TestIngestAuth(t *testing.T) {
	t.Parallel()
	srv := newServer(t)
	body := `{"events":[` + okEvent + `]}`
	if code, out := post(t, srv, "", body); code != http.StatusUnauthorized || !strings.Contains(out["error"].(string), "bearer") {
		t.Fatalf("no token: %d %v", code, out)
	}
	if code, _ := post(t, srv, "nope-nope-nope", body); code != http.StatusUnauthorized {
		t.Fatalf("unknown token: %d", code)
	}
	if code, out := post(t, srv, "reader-secret-1", body); code != http.StatusForbidden || !strings.Contains(out["error"].(string), "reader") {
		t.Fatalf("reader token: %d %v", code, out)
	}
	if code, _ := post(t, srv, "agent-secret-1", body); code != http.StatusOK {
		t.Fatalf("agent token: %d", code)
	}
}

func TestHealthAndMetrics(t *testing.T) {
	t.Parallel()
	srv := newServer(t)
	post(t, srv, "agent-secret-1", `{"events":[`+okEvent+`]}`)
	resp, err := http.Get(srv.URL + "/healthz")
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("healthz: %v %v", resp, err)
	}
	resp, err = http.Get(srv.URL + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := io.ReadAll(resp.Body)
	if !strings.Contains(string(raw), `reckon_journal_ingest_results_total{status="accepted"} 1`) {
		t.Fatalf("metrics lack the ingest counter:\n%s", raw)
	}
}
