package httpapi_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"

	"github.com/seed-7bc021c3/reckon/adapter/auth"
	"github.com/seed-7bc021c3/reckon/adapter/httpapi"
	"github.com/seed-7bc021c3/reckon/internal/reckontest"
	"github.com/seed-7bc021c3/reckon/kernel"
	"github.com/seed-7bc021c3/reckon/kernel/operations"
	"github.com/seed-7bc021c3/reckon/kernel/outbox"
)

const (
	readerTok   = "reader-secret-1"
	operatorTok = "operator-secret-1"
	agentTok    = "agent-secret-1"
	// Tokens limited to projects: an agent of acme, an operator of acme
	// and beta.
	acmeAgentTok    = "acme-agent-secret-1"
	acmeOperatorTok = "acme-operator-secret-1"
)

// t0 is the bundle clock's start; events are placed relative to it.
var t0 = reckontest.T0

func ago(d time.Duration) time.Time { return t0.Add(-d) }

func newEnv(t *testing.T) *reckontest.Bundle {
	t.Helper()
	return reckontest.Setup(t, reckontest.Config{Operations: operations.Config{Window: 168 * time.Hour, StaleAfter: 10 * time.Minute}})
}

// testTokens are the API tokens of these tests: a reader, an operator, an
// agent.
func testTokens(t *testing.T) *auth.Tokens {
	t.Helper()
	toks, err := auth.Parse("rita:reader:" + readerTok + ",ann:operator:" + operatorTok + ",bot:agent:" + agentTok +
		",acme-bot:agent:" + acmeAgentTok + "::acme,acme-ops:operator:" + acmeOperatorTok + "::acme|beta")
	if err != nil {
		t.Fatal(err)
	}
	return toks
}

// newAPI serves the API over the bundle's journal and operations service
// (no runs: RunService is not configured).
func newAPI(t *testing.T, e *reckontest.Bundle) (*httpapi.Server, *httptest.Server) {
	t.Helper()
	srv := httpapi.New(httpapi.Config{
		Tokens: testTokens(t), Log: zerolog.Nop(), Registry: prometheus.NewRegistry(),
		Journal: e.Journal, Owners: operations.Owners{Pool: e.Schema.Pool}, Operations: e.Ops, Verdicts: e.Ops,
	})
	ts := httptest.NewServer(srv)
	t.Cleanup(ts.Close)
	return srv, ts
}

// uncertainOp journals a run whose op-1 failed uncertain and returns the
// tool.started key.
func uncertainOp(e *reckontest.Bundle, project, run, source string) kernel.EventKey {
	b := reckontest.Run{Project: project, RunID: run, Source: source}
	s := b.Started("op-1", "run_command", ago(time.Hour))
	e.Ingest(b.RunStarted(ago(2*time.Hour)), s, b.Failed("op-1", kernel.EffectUncertain, ago(59*time.Minute)), b.RunFailed(ago(58*time.Minute)))
	return s.Key()
}

// newTestServer serves h on 127.0.0.1 for the test and returns its URL.
func newTestServer(t *testing.T, h http.Handler) string {
	t.Helper()
	ts := httptest.NewServer(h)
	t.Cleanup(ts.Close)
	return ts.URL
}

type reply struct {
	status int
	header http.Header
	body   map[string]any
	raw    []byte
}

func call(t *testing.T, method, u, token, body string, hdr ...string) reply {
	t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, u, rd)
	if err != nil {
		t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	r := reply{status: resp.StatusCode, header: resp.Header, raw: raw}
	_ = json.Unmarshal(raw, &r.body)
	return r
}

func TestHTTPEndpoints(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	_, ts := newAPI(t, e)
	uncertainOp(e, "acme", "run-1", "agent-x")
	list := ts.URL + httpapi.PathOperations + "?project=acme"
	rec := ts.URL + httpapi.PathReconcile
	hist := ts.URL + httpapi.PathHistory + "?" + url.Values{"project": {"acme"}, "run_id": {"run-1"}, "operation_id": {"op-1"}}.Encode()
	good := `{"project":"acme","run_id":"run-1","operation_id":"op-1","effect":"occurred","note":"drill-proof.txt is there","evidence":{"workspace_file":"drill-proof.txt"}}`

	cases := []struct {
		name, method, url, token, body string
		status                         int
		errPart                        string
	}{
		{"list without token", "GET", list, "", "", 401, "bearer"},
		{"list with unknown token", "GET", list, "nope-nope-nope", "", 401, "unknown token"},
		{"list as agent", "GET", list, agentTok, "", 403, "reader"},
		{"list without project", "GET", ts.URL + httpapi.PathOperations, readerTok, "", 400, "project"},
		{"list with bad limit", "GET", list + "&limit=abc", readerTok, "", 400, "limit"},
		{"list with bad cursor", "GET", list + "&cursor=xyz", readerTok, "", 400, "cursor"},
		{"reconcile without token", "POST", rec, "", good, 401, "bearer"},
		{"reconcile as reader", "POST", rec, readerTok, good, 403, "operator"},
		{"reconcile as agent", "POST", rec, agentTok, good, 403, "operator"},
		{"reconcile bad effect", "POST", rec, operatorTok, strings.Replace(good, `"occurred"`, `"uncertain"`, 1), 400, "effect"},
		{"reconcile long note", "POST", rec, operatorTok, strings.Replace(good, "drill-proof.txt is there", strings.Repeat("n", 2001), 1), 400, "note"},
		{"reconcile missing note", "POST", rec, operatorTok, `{"project":"acme","run_id":"run-1","operation_id":"op-1","effect":"none"}`, 400, "note"},
		{"reconcile missing operation_id", "POST", rec, operatorTok, `{"project":"acme","run_id":"run-1","effect":"none","note":"x"}`, 400, "operation_id"},
		{"reconcile sets its own basis", "POST", rec, operatorTok, strings.Replace(good, `"note"`, `"basis":"probe","note"`, 1), 400, "basis"},
		{"reconcile not JSON", "POST", rec, operatorTok, `{`, 400, "JSON"},
		{"reconcile empty body", "POST", rec, operatorTok, ``, 400, "empty"},
		{"reconcile unknown operation", "POST", rec, operatorTok, strings.Replace(good, `"op-1"`, `"op-404"`, 1), 404, "tool.started"},
		{"history without token", "GET", hist, "", "", 401, "bearer"},
		{"history as agent", "GET", hist, agentTok, "", 403, "reader"},
		{"history missing run_id", "GET", ts.URL + httpapi.PathHistory + "?project=acme&operation_id=op-1", readerTok, "", 400, "run_id"},
		{"history unknown operation", "GET", strings.Replace(hist, "op-1", "op-404", 1), readerTok, "", 404, "op-404"},
	}
	for _, c := range cases {
		r := call(t, c.method, c.url, c.token, c.body)
		msg, _ := r.body["error"].(string)
		if r.status != c.status || !strings.Contains(msg, c.errPart) {
			t.Errorf("%s: %d %s, want %d containing %q", c.name, r.status, r.raw, c.status, c.errPart)
		}
	}

	// The listing's shape.
	r := call(t, "GET", list, readerTok, "")
	if r.status != 200 || r.body["degraded"] != false || r.body["next_cursor"] != nil {
		t.Fatalf("listing: %d %s", r.status, r.raw)
	}
	ops := r.body["operations"].([]any)
	if len(ops) != 1 || ops[0].(map[string]any)["state"] != "failed_uncertain" || ops[0].(map[string]any)["started_key"] == nil {
		t.Fatalf("listing: %s", r.raw)
	}
	// An operator may read too.
	if r := call(t, "GET", list, operatorTok, ""); r.status != 200 {
		t.Fatalf("operator listing: %d", r.status)
	}

	// Reconcile, repeat with the same key, and with the same body.
	r1 := call(t, "POST", rec, operatorTok, good, httpapi.IdempotencyKeyHeader, "abc")
	if r1.status != 201 || r1.body["type"] != "operation.reconciled" || r1.body["actor"] != "operator:ann" || r1.body["source_id"] != "kernel" {
		t.Fatalf("reconcile: %d %s", r1.status, r1.raw)
	}
	data := r1.body["data"].(map[string]any)
	if data["basis"] != "operator" || data["effect"] != "occurred" || data["evidence"] == nil {
		t.Fatalf("reconcile data: %s", r1.raw)
	}
	r2 := call(t, "POST", rec, operatorTok, good, httpapi.IdempotencyKeyHeader, "abc")
	c1, _ := json.Marshal(r1.body)
	c2, _ := json.Marshal(r2.body) // maps marshal with sorted keys: a canonical comparison
	if r2.status != 201 || !bytes.Equal(c1, c2) || r2.header.Get(httpapi.ReplayedHeader) != "true" {
		t.Fatalf("keyed repeat: %d %s vs %s", r2.status, r2.raw, r1.raw)
	}
	e.Clock.Set(t0.Add(time.Minute))
	r3 := call(t, "POST", rec, operatorTok, good)
	if r3.status != 201 || r3.body["event_id"] != r1.body["event_id"] || r3.header.Get(httpapi.ReplayedHeader) != "true" {
		t.Fatalf("body repeat: %d %s", r3.status, r3.raw)
	}
	e.Drain()
	if r := call(t, "GET", list, readerTok, ""); len(r.body["operations"].([]any)) != 0 {
		t.Fatalf("listing after reconcile: %s", r.raw)
	}
	h := call(t, "GET", hist, readerTok, "")
	evs := h.body["events"].([]any)
	if h.status != 200 || len(evs) != 3 || evs[2].(map[string]any)["type"] != "operation.reconciled" {
		t.Fatalf("history: %d %s", h.status, h.raw)
	}
}

// history reads an operation's events through the history endpoint, as a
// reader.
func history(t *testing.T, base, project, run, op string) []kernel.Event {
	t.Helper()
	r := call(t, "GET", base+httpapi.PathHistory+"?"+url.Values{"project": {project}, "run_id": {run}, "operation_id": {op}}.Encode(), readerTok, "")
	var h struct {
		Events []kernel.Event `json:"events"`
	}
	if err := json.Unmarshal(r.raw, &h); r.status != 200 || err != nil {
		t.Fatalf("history of %s/%s/%s: %d %s %v", project, run, op, r.status, r.raw, err)
	}
	return h.Events
}

// TestOpenAPIMatchesRoutes checks the served document against the route
// table — every route, whatever services are configured — in both
// directions and with the roles each enforces.
func TestOpenAPIMatchesRoutes(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	srv, ts := newAPI(t, e)
	r := call(t, "GET", ts.URL+"/openapi.json", "", "")
	if r.status != 200 || r.body["openapi"] != "3.1.0" {
		t.Fatalf("/openapi.json: %d", r.status)
	}
	rep, err := checkOpenAPI(r.raw, srv.Routes())
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Undocumented) > 0 {
		t.Fatalf("served but not documented (or with other roles): %v", rep.Undocumented)
	}
	if len(rep.Unserved) > 0 {
		t.Fatalf("documented but not served: %v", rep.Unserved)
	}
	// The checker itself catches drift in both directions.
	bad, err := checkOpenAPI(r.raw, append(srv.Routes(),
		httpapi.Route{Method: "GET", Pattern: "/v1/secret"},
		httpapi.Route{Method: "DELETE", Pattern: httpapi.PathOperations, Roles: []string{auth.RoleOperator}}))
	if err != nil || len(bad.Undocumented) != 2 {
		t.Fatalf("checker missed undocumented routes: %+v %v", bad, err)
	}
	wrongRoles := []httpapi.Route{{Method: "GET", Pattern: httpapi.PathOperations, Roles: []string{auth.RoleOperator}}}
	if bad, _ := checkOpenAPI(r.raw, wrongRoles); len(bad.Undocumented) != 1 || len(bad.Unserved) == 0 {
		t.Fatalf("checker missed a role mismatch or unserved routes: %+v", bad)
	}
}

// GET /v1/whoami answers any known token, an agent's included, with its name
// and role; GET /v1/projects lists every project the journal knows — also
// one whose operations are all settled (its queue may still be full).
func TestWhoamiAndProjects(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	_, ts := newAPI(t, e)
	for tok, want := range map[string]string{agentTok: "bot agent", readerTok: "rita reader", operatorTok: "ann operator"} {
		r := call(t, "GET", ts.URL+httpapi.PathWhoami, tok, "")
		if got := fmt.Sprint(r.body["name"], " ", r.body["role"]); r.status != 200 || got != want {
			t.Errorf("whoami: %d %s, want %s", r.status, r.raw, want)
		}
	}
	if r := call(t, "GET", ts.URL+httpapi.PathWhoami, "nope-nope-nope", ""); r.status != 401 || !strings.Contains(fmt.Sprint(r.body["error"]), "unknown token") {
		t.Errorf("whoami with a bad token: %d %s", r.status, r.raw)
	}
	if r := call(t, "GET", ts.URL+httpapi.PathWhoami, "", ""); r.status != 401 {
		t.Errorf("whoami without a token: %d %s", r.status, r.raw)
	}

	projects := ts.URL + httpapi.PathProjects
	if r := call(t, "GET", projects, readerTok, ""); r.status != 200 || string(r.raw) != "{\"next_cursor\":null,\"projects\":[],\"truncated\":false}\n" {
		t.Fatalf("projects of an empty journal: %d %s", r.status, r.raw)
	}
	uncertainOp(e, "zeta", "run-z", "agent-x")
	uncertainOp(e, "acme", "run-1", "agent-x")
	uncertainOp(e, "acme", "run-2", "agent-x")
	settled := reckontest.Run{Project: "beta", RunID: "run-9", Source: "agent-x"}
	e.Ingest(settled.RunStarted(ago(time.Hour)), settled.Started("op-1", "t", ago(time.Hour)), settled.Completed("op-1", ago(time.Hour)))
	r := call(t, "GET", projects, readerTok, "")
	if r.status != 200 || fmt.Sprint(r.body["projects"]) != "[acme beta zeta]" || r.body["truncated"] != false {
		t.Fatalf("projects: %d %s", r.status, r.raw)
	}
	if r := call(t, "GET", projects, agentTok, ""); r.status != 403 {
		t.Fatalf("projects as an agent: %d %s", r.status, r.raw)
	}
}

// TestDrillChainFromKernelEvents replays the live drill's journal exactly
// as the kernel writes it — run.started with the workspace, tool.started of
// run_command, the after-effect fault's tool.failed(effect=uncertain),
// run.failed, all under source "kernel" through the outbox and publisher —
// with the effect really on disk. The operator sees failed_uncertain,
// verifies the workspace file, reconciles effect=occurred citing it over
// HTTP; the listing clears and the history shows the chain.
func TestDrillChainFromKernelEvents(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	_, ts := newAPI(t, e)

	const project, run = "acme", "drill-1"
	ws := filepath.Join(t.TempDir(), "workspaces", project, run)
	if err := os.MkdirAll(ws, 0o755); err != nil {
		t.Fatal(err)
	}
	// The effect committed before the injected crash.
	if err := os.WriteFile(filepath.Join(ws, "drill-proof.txt"), []byte("ok\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	k := func(id, typ string, at time.Time, data any) kernel.Event {
		ev, err := kernel.NewEvent(kernel.SourceKernel, run+"/"+id, project, run, typ, "kernel", at, data)
		if err != nil {
			t.Fatal(err)
		}
		return ev
	}
	at := t0.Add(-5 * time.Minute)
	if err := outbox.Enqueue(e.Ctx, e.Schema.Pool,
		k("run/started", kernel.TypeRunStarted, at, map[string]any{"plan_summary": "run_command", "workspace": ws}),
		k("op-1/started", kernel.TypeToolStarted, at.Add(time.Second), map[string]any{
			"operation_id": "op-1", "tool": "run_command", "attempt": 1,
			"args": map[string]any{"command": "echo ok > drill-proof.txt", "timeout_s": 30}}),
		k("op-1/failed", kernel.TypeToolFailed, at.Add(2*time.Second), kernel.ToolFailed{
			OperationID: "op-1", ErrorType: "injected_fault", Error: "worker crashed after the effect (KERNEL_FAULT_AFTER_EFFECT)",
			Effect: kernel.EffectUncertain}),
		k("run/failed", kernel.TypeRunFailed, at.Add(3*time.Second), kernel.RunFailed{Error: "operation op-1 failed with an uncertain effect"}),
	); err != nil {
		t.Fatal(err)
	}
	e.Drain()

	r := call(t, "GET", ts.URL+httpapi.PathOperations+"?project="+project, readerTok, "")
	var page struct {
		Operations []operations.Item `json:"operations"`
	}
	if err := json.Unmarshal(r.raw, &page); err != nil || len(page.Operations) != 1 {
		t.Fatalf("listing: %d %s", r.status, r.raw)
	}
	it := page.Operations[0]
	if it.State != operations.StateFailedUncertain || it.OperationID != "op-1" || it.Tool != "run_command" ||
		it.Failure == nil || it.Failure.ErrorType != "injected_fault" || it.StartedKey.SourceID != kernel.SourceKernel {
		t.Fatalf("drill item: %+v", it)
	}

	// The operator checks the workspace and cites the file.
	proof, err := os.ReadFile(filepath.Join(ws, "drill-proof.txt"))
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(proof)
	body, _ := json.Marshal(map[string]any{
		"project": project, "run_id": run, "operation_id": "op-1", "effect": "occurred",
		"note":     "drill-proof.txt exists in the run's workspace with the command's output",
		"evidence": map[string]any{"workspace_file": filepath.Join(ws, "drill-proof.txt"), "sha256": hex.EncodeToString(sum[:])},
	})
	r = call(t, "POST", ts.URL+httpapi.PathReconcile, operatorTok, string(body))
	if r.status != 201 {
		t.Fatalf("reconcile: %d %s", r.status, r.raw)
	}
	e.Drain()
	r = call(t, "GET", ts.URL+httpapi.PathOperations+"?project="+project, readerTok, "")
	if !strings.Contains(string(r.raw), `"operations":[]`) {
		t.Fatalf("listing after the verdict: %s", r.raw)
	}
	hist := history(t, ts.URL, project, run, "op-1")
	var chain []string
	for _, ev := range hist {
		chain = append(chain, ev.Type+"@"+ev.Actor)
	}
	if strings.Join(chain, " ") != "tool.started@kernel tool.failed@kernel operation.reconciled@operator:ann" {
		t.Fatalf("history chain: %v", chain)
	}
	var d kernel.Reconciliation
	if err := hist[2].DecodeData(&d); err != nil {
		t.Fatal(err)
	}
	if d.Effect != kernel.EffectOccurred || d.Basis != kernel.BasisOperator || !strings.Contains(string(d.Evidence), "drill-proof.txt") ||
		*hist[2].ParentEventID != it.StartedKey {
		t.Fatalf("verdict: %+v parent %v", d, hist[2].ParentEventID)
	}
}

// TestMetricsThroughAPI drives listings and reconciles through the HTTP API
// and reads the figures back from GET /metrics, as a dashboard would.
func TestMetricsThroughAPI(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	reg := prometheus.NewRegistry()
	svc := operations.New(e.Schema.Pool, operations.Config{
		Window: 168 * time.Hour, StaleAfter: 10 * time.Minute, Now: e.Clock.Now,
		Metrics: operations.NewMetrics(reg),
		// A liveness that always fails: listings that need it answer degraded.
		Liveness: failingLiveness{},
	})
	srv := httpapi.New(httpapi.Config{Tokens: testTokens(t), Log: zerolog.Nop(), Registry: reg, Operations: svc})
	url := newTestServer(t, srv)

	uncertainOp(e, "acme", "run-1", "kernel")
	// A kernel run still going, whose liveness the listing must ask.
	b := reckontest.Run{Project: "acme", RunID: "run-2", Source: "kernel"}
	e.Ingest(b.RunStarted(ago(time.Hour)), b.Started("op-1", "run_command", ago(30*time.Minute)))
	list := url + httpapi.PathOperations + "?project=acme"
	for range 2 {
		if r := call(t, "GET", list, readerTok, ""); r.status != 200 {
			t.Fatalf("list: %d %s", r.status, r.raw)
		}
	}
	if r := call(t, "GET", url+httpapi.PathOperations, readerTok, ""); r.status != 400 {
		t.Fatalf("list without project: %d", r.status)
	}
	rec := url + httpapi.PathReconcile
	good := `{"project":"acme","run_id":"run-1","operation_id":"op-1","effect":"occurred","note":"checked by hand"}`
	for i, want := range []int{201, 201, 404, 400} {
		body := good
		switch i {
		case 2:
			body = strings.Replace(good, `"op-1"`, `"op-404"`, 1)
		case 3:
			body = strings.Replace(good, `"occurred"`, `"maybe"`, 1)
		}
		if r := call(t, "POST", rec, operatorTok, body); r.status != want {
			t.Fatalf("reconcile %d: %d %s, want %d", i, r.status, r.raw, want)
		}
	}

	m := string(call(t, "GET", url+"/metrics", readerTok, "").raw)
	for _, want := range []string{
		`reckon_operations_list_seconds_count{outcome="ok"} 2`,
		`reckon_operations_listed_total{state="failed_uncertain"} 2`,
		`reckon_operations_degraded_listings_total 2`,
		`reckon_operations_reconciles_total{basis="operator",result="recorded"} 1`,
		`reckon_operations_reconciles_total{basis="operator",result="repeated"} 1`,
		`reckon_operations_reconciles_total{basis="operator",result="rejected"} 2`,
	} {
		if !strings.Contains(m, want) {
			t.Errorf("metrics lack %q", want)
		}
	}
	if strings.Contains(m, `outcome="error"`) {
		t.Errorf("a malformed listing was counted as a listing:\n%s", m)
	}
}

// failingLiveness is a Temporal that never answers.
type failingLiveness struct{}

func (failingLiveness) Running(context.Context, string, string) (bool, error) {
	return false, errors.New("temporal unavailable")
}

// GET /v1/supervisor/verdicts: the shape, the parameters and the roles (what
// a sweep's verdicts resolve to is tested in pipeline/triage).
func TestVerdictsRoute(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	_, ts := newAPI(t, e)
	b := reckontest.Run{Project: "acme", RunID: "run-1", Source: kernel.SourceKernel}
	s := b.Started("op-1", "run_command", ago(time.Hour))
	v := b.Event("verdict/1", kernel.TypeSupervisorVerdict, ago(time.Minute), kernel.Verdict{
		Kind: kernel.VerdictKindReconciliation, OperationIDs: []string{"op-1"}, Supervisor: "builtin", Causes: []string{}, Remedies: []string{}})
	v.Actor = kernel.ActorSupervisor
	e.Ingest(b.RunStarted(ago(2*time.Hour)), s, v)
	u := ts.URL + httpapi.PathVerdicts
	r := call(t, "GET", u+"?project=acme", readerTok, "")
	var page operations.VerdictPage
	if err := json.Unmarshal(r.raw, &page); r.status != 200 || err != nil || len(page.Verdicts) != 1 || len(page.Resolutions) != 1 ||
		page.Resolutions[0].Verdict != v.Key() || page.Resolutions[0].DecidedByOperator == nil {
		t.Fatalf("verdicts: %d %s %v", r.status, r.raw, err)
	}
	if r := call(t, "GET", u+"?project=nobody", readerTok, ""); r.status != 200 || !strings.Contains(string(r.raw), `"verdicts":[]`) {
		t.Fatalf("empty: %d %s", r.status, r.raw)
	}
	for _, c := range []struct {
		query, token string
		status       int
	}{
		{"", readerTok, 400},
		{"?project=acme&limit=0", readerTok, 400},
		{"?project=acme&since=yesterday", readerTok, 400},
		{"?project=acme", "", 401},
		{"?project=acme", agentTok, 403},
	} {
		if r := call(t, "GET", u+c.query, c.token, ""); r.status != c.status {
			t.Errorf("verdicts%s with %q: %d %s, want %d", c.query, c.token, r.status, r.raw, c.status)
		}
	}
}

// TestAgentCannotHideItsOperationWithAnAncientCopy: through POST
// /v1/events an agent re-reports its unsettled operation's tool.started
// dated at the epoch; the operation stays in the listing.
func TestAgentCannotHideItsOperationWithAnAncientCopy(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	_, ts := newAPI(t, e)
	ev := func(id, typ, at, data string) string {
		return `{"source_id":"bot","event_id":"` + id + `","project":"acme","run_id":"bot-run","type":"` + typ +
			`","ts":"` + at + `","actor":"agent","data":` + data + `}`
	}
	at := ago(time.Hour).Format(time.RFC3339)
	post := func(evs ...string) {
		t.Helper()
		if r := call(t, "POST", ts.URL+httpapi.PathEvents, agentTok, `{"events":[`+strings.Join(evs, ",")+`]}`); r.status != 200 {
			t.Fatalf("ingest: %d %s", r.status, r.raw)
		}
	}
	post(ev("s", "run.started", at, `{}`),
		ev("op-1/started", "tool.started", at, `{"operation_id":"op-1","tool":"run_command"}`),
		ev("op-1/failed", "tool.failed", at, `{"operation_id":"op-1","error_type":"activity_failed","error":"worker lost","effect":"uncertain"}`))
	list := ts.URL + httpapi.PathOperations + "?project=acme"
	if r := call(t, "GET", list, readerTok, ""); len(r.body["operations"].([]any)) != 1 {
		t.Fatalf("listing before: %s", r.raw)
	}
	post(ev("op-1/started-1970", "tool.started", "1970-01-01T00:00:01Z", `{"operation_id":"op-1","tool":"run_command"}`))
	r := call(t, "GET", list, readerTok, "")
	ops, _ := r.body["operations"].([]any)
	if len(ops) != 1 || ops[0].(map[string]any)["state"] != "failed_uncertain" {
		t.Fatalf("listing after an epoch-dated copy of op-1's tool.started: %s", r.raw)
	}
}
