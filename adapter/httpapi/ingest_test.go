package httpapi_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"

	"github.com/seed-7bc021c3/reckon/adapter/auth"
	"github.com/seed-7bc021c3/reckon/adapter/httpapi"
	"github.com/seed-7bc021c3/reckon/internal/pgtest"
	"github.com/seed-7bc021c3/reckon/internal/reckontest"
	"github.com/seed-7bc021c3/reckon/kernel"
	"github.com/seed-7bc021c3/reckon/kernel/journal"
	"github.com/seed-7bc021c3/reckon/kernel/operations"
)

func newServer(t *testing.T) *httptest.Server {
	t.Helper()
	srv, _ := newServerPool(t)
	return srv
}

func newServerPool(t *testing.T) (*httptest.Server, *pgxpool.Pool) {
	t.Helper()
	return newServerOwners(t, nil)
}

// newServerOwners is newServerPool with owners telling kernel runs (nil:
// kernel_runs, as in production).
func newServerOwners(t *testing.T, owners kernel.RunOwners) (*httptest.Server, *pgxpool.Pool) {
	t.Helper()
	return newServerConfig(t, func(c *httpapi.Config) {
		if owners != nil {
			c.Owners = owners
		}
	})
}

// newServerConfig is the tests' server on a schema of its own, with the
// config changed by with (serveConfig).
func newServerConfig(t *testing.T, with func(*httpapi.Config)) (*httptest.Server, *pgxpool.Pool) {
	t.Helper()
	s := pgtest.New(t)
	return serveConfig(t, s.Pool, with), s.Pool
}

// serveConfig serves the tests' API over pool (their tokens, the journal,
// owners as in production) with the config changed by with, until t ends.
func serveConfig(t *testing.T, pool *pgxpool.Pool, with func(*httpapi.Config)) *httptest.Server {
	t.Helper()
	tokens, err := auth.Parse("bot:agent:agent-secret-1:agent-x,ro:reader:reader-secret-1,op:operator:operator-secret-1:agent-x")
	if err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	cfg := httpapi.Config{Tokens: tokens, Log: zerolog.Nop(), Registry: reg,
		Journal: journal.New(pool, reg), Owners: operations.Owners{Pool: pool}}
	with(&cfg)
	srv := httptest.NewServer(httpapi.New(cfg))
	t.Cleanup(srv.Close)
	return srv
}

// post sends body to POST /v1/events with token and returns the status
// and the reply, which must be a JSON object.
func post(t *testing.T, srv *httptest.Server, token, body string) (int, map[string]any) {
	t.Helper()
	r := call(t, http.MethodPost, srv.URL+"/v1/events", token, body)
	if r.body == nil {
		t.Fatalf("response is not a JSON object: %s", r.raw)
	}
	return r.status, r.body
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

// Every provenance rule is a 403 naming the event, the field and the rule,
// and a refused event anywhere in a batch writes nothing of it.
func TestIngestProvenanceRules(t *testing.T) {
	t.Parallel()
	srv, pool := newServerPool(t)
	with := func(field, value string) string {
		var m map[string]any
		if err := json.Unmarshal([]byte(okEvent), &m); err != nil {
			t.Fatal(err)
		}
		m[field] = value
		switch value {
		case "operation.reconciled":
			m["parent_event_id"] = map[string]any{"source_id": "kernel", "event_id": "acme/run-42/op-7/started"}
			m["data"] = map[string]any{"operation_id": "op-7", "effect": "occurred", "note": "forged", "basis": "operator"}
		case "supervisor.verdict":
			m["data"] = map[string]any{"kind": "reconciliation", "needs_attention": false, "causes": []string{}, "remedies": []string{},
				"lesson": "forged", "operation_ids": []string{"op-7"}, "supervisor": "builtin", "model": "-", "prompt_version": "v", "wall_digest": "x"}
		}
		b, _ := json.Marshal(m)
		return string(b)
	}
	cases := []struct {
		name, token, event, field, rule string
	}{
		{"kernel source", "agent-secret-1", with("source_id", "kernel"), "source_id", "can never be granted"},
		{"supervisor source", "agent-secret-1", with("source_id", "supervisor"), "source_id", "can never be granted"},
		{"operator source", "operator-secret-1", with("source_id", "operator:op"), "source_id", "can never be granted"},
		{"another agent's source", "agent-secret-1", with("source_id", "agent-y"), "source_id", "granted: agent-x"},
		{"operator writing another source", "operator-secret-1", with("source_id", "agent-y"), "source_id", "granted: agent-x"},
		{"reconciliation", "agent-secret-1", with("type", "operation.reconciled"), "type", "POST /v1/agent/operations/reconcile"},
		{"verdict", "agent-secret-1", with("type", "supervisor.verdict"), "type", "run.* and tool.*"},
		{"operator actor", "agent-secret-1", with("actor", "operator:alice"), "actor", `must be \"agent\"`},
		{"supervisor actor", "agent-secret-1", with("actor", "supervisor"), "actor", `must be \"agent\"`},
		{"kernel actor", "agent-secret-1", with("actor", "kernel"), "actor", `must be \"agent\"`},
	}
	for _, c := range cases {
		// The refused event is the second of the batch: the first, good
		// one must not be written either.
		good := strings.Replace(okEvent, "op-7/started", "op-8/started", 1)
		code, out := post(t, srv, c.token, `{"events":[`+good+`,`+c.event+`]}`)
		msg, _ := out["error"].(string)
		if code != http.StatusForbidden || !strings.Contains(msg, "events[1]") || !strings.Contains(msg, `field \"`+c.field+`\"`) && !strings.Contains(msg, `field "`+c.field+`"`) {
			t.Errorf("%s: %d %q, want 403 naming events[1] and field %s", c.name, code, msg, c.field)
		}
		if !strings.Contains(msg, strings.ReplaceAll(c.rule, `\"`, `"`)) {
			t.Errorf("%s: %q does not state the rule (%s)", c.name, msg, c.rule)
		}
		// The answer names the refused event for a publisher to deliver
		// the rest of its batch around it (outbox.deliverAround).
		if idx, ok := out["event_index"].(float64); !ok || idx != 1 {
			t.Errorf("%s: event_index %v, want 1", c.name, out["event_index"])
		}
	}
	var n int
	if err := pool.QueryRow(context.Background(), "SELECT count(*) FROM journal_events").Scan(&n); err != nil || n != 0 {
		t.Fatalf("journal holds %d rows after refused batches (%v)", n, err)
	}
	// A granted source is written.
	if code, out := post(t, srv, "agent-secret-1", `{"events":[`+okEvent+`]}`); code != 200 {
		t.Fatalf("granted source: %d %v", code, out)
	}
}

// No caller writes into a kernel run or its children.
func TestIngestRefusesKernelRuns(t *testing.T) {
	t.Parallel()
	srv, pool := newServerPool(t)
	if _, err := pool.Exec(context.Background(),
		`INSERT INTO kernel_runs (project, run_id, plan, plan_digest, workflow_id) VALUES ('acme', 'run-42', '{}', '\x00', 'reckon/acme/run-42')`); err != nil {
		t.Fatal(err)
	}
	for _, run := range []string{"run-42", "run-42.op-1", "run-42.op-1.op-3"} {
		ev := strings.ReplaceAll(okEvent, `"run_id":"run-42"`, `"run_id":"`+run+`"`)
		ev = strings.Replace(ev, "run-42/op-7", run+"/op-7", 1)
		code, out := post(t, srv, "agent-secret-1", `{"events":[`+ev+`]}`)
		if msg, _ := out["error"].(string); code != http.StatusForbidden || !strings.Contains(msg, "kernel run") || !strings.Contains(msg, `"run_id"`) {
			t.Errorf("%s: %d %v", run, code, out)
		}
	}
	// The same run id in another project, and a run whose id merely starts
	// like the kernel run's, are someone else's.
	for _, repl := range []struct{ from, to string }{{`"project":"acme"`, `"project":"other"`}, {`"run_id":"run-42"`, `"run_id":"run-42x.op-1"`}} {
		if code, out := post(t, srv, "agent-secret-1", `{"events":[`+strings.Replace(okEvent, repl.from, repl.to, 1)+`]}`); code != 200 {
			t.Errorf("%s: %d %v", repl.to, code, out)
		}
	}
}

// staleOwners answers as a RunOwners check made just before the run's
// start was recorded would: no kernel runs.
type staleOwners struct{}

func (staleOwners) KernelRuns(context.Context, []kernel.RunKey) (map[kernel.RunKey]bool, error) {
	return map[kernel.RunKey]bool{}, nil
}

func (staleOwners) RunWriters(context.Context, []kernel.RunKey) (map[kernel.RunKey]kernel.RunWriter, error) {
	return map[kernel.RunKey]kernel.RunWriter{}, nil
}

// No caller writes into a run of the MCP gateway or its children: a
// tool.completed posted there would settle an operation whose upstream
// call nobody saw end. The check before the write names the gateway;
// with that check stale, the write's own transaction refuses it.
func TestIngestRefusesGatewayRuns(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name   string
		owners kernel.RunOwners
		want   string
	}{
		{"checked before the write", nil, "is a run of the MCP gateway (reckon mcp-gateway), or a child run of one"},
		{"refused by the write", staleOwners{}, `run "run-42" of project "acme" is a run of the MCP gateway`},
	} {
		srv, pool := newServerOwners(t, c.owners)
		if _, err := pool.Exec(context.Background(),
			`INSERT INTO gateway_runs (project, run_id, source_id, kind) VALUES ('acme', 'run-42', 'mcp-gateway', 'client')`); err != nil {
			t.Fatal(err)
		}
		for _, run := range []string{"run-42", "run-42.op-1"} {
			ev := strings.ReplaceAll(okEvent, `"run_id":"run-42"`, `"run_id":"`+run+`"`)
			ev = strings.Replace(ev, "run-42/op-7", run+"/op-7", 1)
			code, out := post(t, srv, "agent-secret-1", `{"events":[`+ev+`]}`)
			if msg, _ := out["error"].(string); code != http.StatusForbidden || !strings.Contains(msg, c.want) {
				t.Errorf("%s, run %s: %d %v, want 403 saying %q", c.name, run, code, out, c.want)
			}
		}
		var n int
		if err := pool.QueryRow(context.Background(), "SELECT count(*) FROM journal_events").Scan(&n); err != nil || n != 0 {
			t.Fatalf("%s: journal rows after refused batches: %d %v", c.name, n, err)
		}
		// The same run id in another project is someone else's.
		if code, out := post(t, srv, "agent-secret-1", `{"events":[`+strings.Replace(okEvent, `"project":"acme"`, `"project":"other"`, 1)+`]}`); code != http.StatusOK {
			t.Errorf("%s, another project: %d %v", c.name, code, out)
		}
	}
}

// A run recorded between the endpoint's check and its write is still
// refused, by the write's own transaction, and nothing is written.
func TestIngestRefusesARunStartedSinceItsCheck(t *testing.T) {
	t.Parallel()
	srv, pool := newServerOwners(t, staleOwners{})
	if _, err := pool.Exec(context.Background(),
		`INSERT INTO kernel_runs (project, run_id, plan, plan_digest, workflow_id) VALUES ('acme', 'run-42', '{}', '\x00', 'reckon/acme/run-42')`); err != nil {
		t.Fatal(err)
	}
	other := strings.ReplaceAll(okEvent, "run-42", "run-43")
	code, out := post(t, srv, "agent-secret-1", `{"events":[`+other+`,`+okEvent+`]}`)
	if msg, _ := out["error"].(string); code != http.StatusForbidden || !strings.Contains(msg, `run "run-42" of project "acme" is a kernel run`) {
		t.Fatalf("%d %v", code, out)
	}
	var n int
	if err := pool.QueryRow(context.Background(), "SELECT count(*) FROM journal_events").Scan(&n); err != nil || n != 0 {
		t.Fatalf("journal rows after a refused batch: %d %v", n, err)
	}
	if code, out := post(t, srv, "agent-secret-1", `{"events":[`+other+`]}`); code != http.StatusOK {
		t.Fatalf("a run that is not the kernel's: %d %v", code, out)
	}
}

// An agent's run belongs to the source of its first event: another
// source's event there (a tool.completed settling the first agent's
// operation, each under its own source) is refused with a 403 saying the
// run is another source's, without naming it, whether the endpoint's check
// sees the owner (which names the run) or only the write's transaction
// does; a token granted the owner's source still writes it.
func TestIngestAgentRunsBelongToTheirFirstSource(t *testing.T) {
	t.Parallel()
	completed := `{"source_id":"op","event_id":"forged-1","project":"acme","run_id":"run-42",
 "type":"tool.completed","ts":"2026-11-30T10:00:01Z","actor":"agent","data":{"operation_id":"op-7","result_summary":"done"}}`
	for _, c := range []struct {
		name   string
		owners kernel.RunOwners
	}{{"checked before the write", nil}, {"refused by the write", staleOwners{}}} {
		srv, pool := newServerOwners(t, c.owners)
		// The write's own check cannot tell which run it refused.
		foreign := func(run string) string {
			if c.owners == nil {
				return `run "` + run + `" of project "acme" belongs to another source`
			}
			return "belongs to another source"
		}
		if code, out := post(t, srv, "agent-secret-1", `{"events":[`+okEvent+`]}`); code != http.StatusOK {
			t.Fatalf("%s: the first event: %d %v", c.name, code, out)
		}
		code, out := post(t, srv, "operator-secret-1", `{"events":[`+completed+`]}`)
		if msg, _ := out["error"].(string); code != http.StatusForbidden || !strings.Contains(msg, foreign("run-42")) || strings.Contains(msg, "agent-x") {
			t.Errorf("%s: another source's event in agent-x's run: %d %v", c.name, code, out)
		}
		// The operator's token is granted agent-x: under that source it
		// writes into the run.
		if code, out := post(t, srv, "operator-secret-1", `{"events":[`+strings.Replace(completed, `"source_id":"op"`, `"source_id":"agent-x"`, 1)+`]}`); code != http.StatusOK {
			t.Errorf("%s: a granted owner's source: %d %v", c.name, code, out)
		}
		// A batch whose first event of a new run is op's: the run is op's,
		// and the batch's agent-x event in it is refused with the rest.
		mixed := strings.ReplaceAll(completed, "run-42", "run-43") + "," + strings.ReplaceAll(okEvent, "run-42", "run-43")
		code, out = post(t, srv, "operator-secret-1", `{"events":[`+mixed+`]}`)
		if msg, _ := out["error"].(string); code != http.StatusForbidden || !strings.Contains(msg, foreign("run-43")) || strings.Contains(msg, "belongs to source") {
			t.Errorf("%s: a batch of two sources in a new run: %d %v", c.name, code, out)
		}
		var n int
		if err := pool.QueryRow(context.Background(), "SELECT count(*) FROM journal_events WHERE run_id = 'run-43'").Scan(&n); err != nil || n != 0 {
			t.Errorf("%s: run-43 holds %d events after a refused batch (%v)", c.name, n, err)
		}
	}
}

// TestIngestForeignRunRefusalKeepsTheOwnerOutOfTheAnswer: an agent that
// writes into another source's run, or a child run of one, learns that
// the run is not its own and nothing about whose it is (a hostile agent
// could otherwise map which sources own which runs); the server's log
// keeps the owner, for whoever sorts out the clash. Both refusals: the
// endpoint's check, and the write's own transaction when that check did
// not see the owner yet.
func TestIngestForeignRunRefusalKeepsTheOwnerOutOfTheAnswer(t *testing.T) {
	t.Parallel()
	const owner = "owner-7f3a91c2"
	tokens, err := auth.Parse("bot:agent:agent-secret-1:agent-x,own:agent:owner-secret-1:" + owner)
	if err != nil {
		t.Fatal(err)
	}
	event := func(src, run, id, typ, data string) string {
		return `{"source_id":"` + src + `","event_id":"` + id + `","project":"acme","run_id":"` + run + `","type":"` + typ +
			`","ts":"2026-11-30T10:00:00Z","actor":"agent","data":` + data + `}`
	}
	started := func(src, run, id string) string {
		return event(src, run, id, "tool.started", `{"operation_id":"op-1","tool":"t","args":{}}`)
	}
	raw := func(srv *httptest.Server, token, body string) (int, string) {
		t.Helper()
		r := call(t, http.MethodPost, srv.URL+"/v1/events", token, body)
		return r.status, string(r.raw)
	}
	for _, c := range []struct {
		name   string
		owners kernel.RunOwners
	}{{"checked before the write", nil}, {"refused by the write", staleOwners{}}} {
		log := &reckontest.Buffer{}
		srv, _ := newServerConfig(t, func(cfg *httpapi.Config) {
			cfg.Tokens, cfg.Log = tokens, zerolog.New(log)
			if c.owners != nil {
				cfg.Owners = c.owners
			}
		})
		if code, body := raw(srv, "owner-secret-1", `{"events":[`+started(owner, "run-9", "own-1")+`]}`); code != http.StatusOK {
			t.Fatalf("%s: the owner's first event: %d %s", c.name, code, body)
		}
		for _, hostile := range []struct{ what, body string }{
			{"a forged completion in the run", `{"events":[` + event("agent-x", "run-9", "x-1", "tool.completed", `{"operation_id":"op-1","result_summary":"done"}`) + `]}`},
			{"an event in its child run", `{"events":[` + started("agent-x", "run-9.op-1", "x-2") + `]}`},
		} {
			code, body := raw(srv, "agent-secret-1", hostile.body)
			if code != http.StatusForbidden || !strings.Contains(body, "belongs to another source") {
				t.Errorf("%s: %s: %d %s, want a 403 saying the run belongs to another source", c.name, hostile.what, code, body)
			}
			if strings.Contains(body, owner) {
				t.Errorf("%s: %s: the 403 names the run's owner: %s", c.name, hostile.what, body)
			}
		}
		if got := strings.Count(log.String(), owner); got < 2 {
			t.Errorf("%s: the server's log names the owner %d times for two refusals:\n%s", c.name, got, log.String())
		}
	}
}

// The child runs of an agent's run are its owner's: for agent-x's run-42,
// run-42.op-1 (kernel.ChildRunID, the child of a delegate operation op-1)
// and the runs beneath it take only agent-x's events, so another source
// cannot make up what the listing counts of agent-x's delegation. The
// refusal never names the owning source; the endpoint's check names the
// event, the field and the owning run, the write's transaction (when only
// it sees the owner) says only that the run is another source's. A run
// whose ancestors nobody owns is claimed as before.
func TestIngestAgentChildRunsBelongToTheirOwner(t *testing.T) {
	t.Parallel()
	in := func(src, run, id string) string {
		return `{"source_id":"` + src + `","event_id":"` + id + `","project":"acme","run_id":"` + run + `",
 "type":"tool.started","ts":"2026-11-30T10:00:00Z","actor":"agent","data":{"operation_id":"op-1","tool":"t","args":{}}}`
	}
	for _, c := range []struct {
		name    string
		owners  kernel.RunOwners
		indexed bool
	}{{"checked before the write", nil, true}, {"refused by the write", staleOwners{}, false}} {
		srv, pool := newServerOwners(t, c.owners)
		if code, out := post(t, srv, "agent-secret-1", `{"events":[`+okEvent+`]}`); code != http.StatusOK {
			t.Fatalf("%s: agent-x's run: %d %v", c.name, code, out)
		}
		refused := func(what, body string, index float64, want string) {
			t.Helper()
			code, out := post(t, srv, "operator-secret-1", body)
			msg, _ := out["error"].(string)
			if !c.indexed {
				want = "belongs to another source"
			}
			if code != http.StatusForbidden || !strings.Contains(msg, want) || strings.Contains(msg, "agent-x") {
				t.Errorf("%s: %s: %d %v, want 403 saying %q, not naming agent-x", c.name, what, code, out, want)
			}
			if got, ok := out["event_index"]; c.indexed && (!ok || got != index) {
				t.Errorf("%s: %s: event_index %v, want %v", c.name, what, got, index)
			}
		}
		child := `run "run-42.op-1" of project "acme" is a child run of run "run-42", which belongs to another source`
		grandchild := `run "run-42.op-1.op-3" of project "acme" is a child run of run "run-42", which belongs to another source`
		refused("op in agent-x's child run", `{"events":[`+in("op", "run-50", "a")+`,`+in("op", "run-42.op-1", "b")+`]}`, 1, child)
		refused("op in a child of agent-x's child run", `{"events":[`+in("op", "run-42.op-1.op-3", "c")+`]}`, 0, grandchild)
		if c.indexed {
			var msg string
			_, out := post(t, srv, "operator-secret-1", `{"events":[`+in("op", "run-42.op-1", "b")+`]}`)
			msg, _ = out["error"].(string)
			if !strings.Contains(msg, `events[0]: field "source_id"`) {
				t.Errorf("%s: the refusal names no event and field: %q", c.name, msg)
			}
		}
		// agent-x writes its child runs, under a granted token too.
		if code, out := post(t, srv, "agent-secret-1", `{"events":[`+in("agent-x", "run-42.op-1", "d")+`,`+in("agent-x", "run-42.op-1.op-3", "e")+`]}`); code != http.StatusOK {
			t.Errorf("%s: agent-x in its own child runs: %d %v", c.name, code, out)
		}
		if code, out := post(t, srv, "operator-secret-1", `{"events":[`+in("agent-x", "run-42.op-2", "f")+`]}`); code != http.StatusOK {
			t.Errorf("%s: agent-x's granted token in its child run: %d %v", c.name, code, out)
		}
		// Written into by its owner, the child run is still refused to op.
		refused("op in agent-x's written child run", `{"events":[`+in("op", "run-42.op-1", "g")+`]}`, 0, `run "run-42.op-1" of project "acme"`)
		// A batch whose first event claims a new run for agent-x: op's
		// event in that run's child is refused with the rest.
		refused("op in the child of a run the batch claims", `{"events":[`+in("agent-x", "run-60", "h")+`,`+in("op", "run-60.op-1", "i")+`]}`, 1,
			`run "run-60.op-1" of project "acme" is a child run of run "run-60", which belongs to another source`)
		var n int
		if err := pool.QueryRow(context.Background(), "SELECT count(*) FROM journal_events WHERE source_id = 'op' OR run_id LIKE 'run-60%'").Scan(&n); err != nil || n != 0 {
			t.Errorf("%s: %d events of refused batches were written (%v)", c.name, n, err)
		}
		// The child of a run nobody owns is claimed by its first source,
		// as any run nobody owns.
		if code, out := post(t, srv, "operator-secret-1", `{"events":[`+in("op", "run-77.op-1", "j")+`]}`); code != http.StatusOK {
			t.Errorf("%s: op in a child run of a run nobody owns: %d %v", c.name, code, out)
		}
	}
}

// A run journaled before runs had owners belongs to the source of its
// earliest event: the first guarded write after the upgrade claims it for
// that source, not for the writer.
func TestIngestOlderRunsBelongToTheirEarliestSource(t *testing.T) {
	t.Parallel()
	srv, pool := newServerPool(t)
	older := kernel.Event{SourceID: "agent-x", EventID: "old-1", Project: "acme", RunID: "run-old", Type: kernel.TypeToolStarted,
		TS: time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC), Actor: "agent", Data: []byte(`{"operation_id":"op-1","tool":"t","args":{}}`)}
	if _, err := journal.New(pool, nil).Ingest(context.Background(), []kernel.Event{older}); err != nil {
		t.Fatal(err)
	}
	forged := `{"source_id":"op","event_id":"forged-1","project":"acme","run_id":"run-old",
 "type":"tool.completed","ts":"2026-11-30T10:00:01Z","actor":"agent","data":{"operation_id":"op-1","result_summary":"done"}}`
	code, out := post(t, srv, "operator-secret-1", `{"events":[`+forged+`]}`)
	if msg, _ := out["error"].(string); code != http.StatusForbidden || !strings.Contains(msg, `belongs to another source`) || strings.Contains(msg, "agent-x") {
		t.Fatalf("another source's event in an older run of agent-x: %d %v", code, out)
	}
	var owner string
	if err := pool.QueryRow(context.Background(), "SELECT source_id FROM agent_runs WHERE run_id = 'run-old'").Scan(&owner); err == nil {
		t.Fatalf("a refused write left a claim for %q", owner)
	}
	// Its child runs are agent-x's too (migration 00032), though no row
	// names its owner yet: the write's transaction refuses another source.
	code, out = post(t, srv, "operator-secret-1", `{"events":[`+strings.ReplaceAll(forged, `"run-old"`, `"run-old.op-1"`)+`]}`)
	if msg, _ := out["error"].(string); code != http.StatusForbidden || !strings.Contains(msg, `belongs to another source`) || strings.Contains(msg, "agent-x") {
		t.Fatalf("another source's event in a child run of an older run of agent-x: %d %v", code, out)
	}
}

// TestIngestRequiresToolFailedError: docs/design.md lists tool.failed's
// data as {operation_id, error_type, error, effect?, ...}, error required
// like run.failed's. A new write through POST /v1/events without it is a
// 400 naming data.error, while the journal itself
// (the outbox's delivery, events recorded by earlier versions) still
// takes one, so stored failures keep loading.
func TestIngestRequiresToolFailedError(t *testing.T) {
	t.Parallel()
	srv, pool := newServerPool(t)
	failed := func(id, data string) string {
		return `{"source_id":"agent-x","event_id":"` + id + `","project":"acme","run_id":"run-43","type":"tool.failed",
		 "ts":"2026-01-30T10:00:00Z","actor":"agent","data":` + data + `}`
	}
	for _, data := range []string{
		`{"operation_id":"op-1","error_type":"timeout","effect":"uncertain"}`,
		`{"operation_id":"op-1","error_type":"timeout","error":null}`,
		`{"operation_id":"op-1","error_type":"timeout","error":""}`,
	} {
		code, out := post(t, srv, "agent-secret-1", `{"events":[`+failed("f-1", data)+`]}`)
		if msg, _ := out["error"].(string); code != http.StatusBadRequest || !strings.Contains(msg, `"data.error"`) || !strings.Contains(msg, "events[0]") {
			t.Errorf("tool.failed %s: %d %v, want 400 naming events[0] and data.error", data, code, out)
		}
	}
	code, out := post(t, srv, "agent-secret-1", `{"events":[`+failed("f-2", `{"operation_id":"op-1","error_type":"timeout","error":"upstream timed out"}`)+`]}`)
	if code != http.StatusOK || out["results"].([]any)[0].(map[string]any)["status"] != "accepted" {
		t.Fatalf("tool.failed with an error: %d %v", code, out)
	}
	legacy, err := kernel.DecodeEvent([]byte(failed("f-3", `{"operation_id":"op-2","error_type":"activity_failed"}`)))
	if err != nil {
		t.Fatalf("a stored failure without error no longer decodes: %v", err)
	}
	res, err := journal.New(pool, nil).Ingest(context.Background(), []kernel.Event{legacy})
	if err != nil || res[0].Status != kernel.StatusAccepted {
		t.Fatalf("the journal refuses a stored failure without error: %v %v", res, err)
	}
}

// TestIngestRefusesAToolStartedBeforeTheOperationsWindow: the listing
// reads the open operations of RECKON_OPERATIONS_WINDOW by their ts, so a
// tool.started an agent dates before the window would be stored and
// never listed, triaged or shown. It is refused, naming the event, the
// field and the window, and nothing of its batch is written. A
// tool.started inside the window, and old settling or lifecycle events
// (a late completion, a backfill), are taken.
func TestIngestRefusesAToolStartedBeforeTheOperationsWindow(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	srv, pool := newServerConfig(t, func(c *httpapi.Config) {
		c.OperationsWindow, c.Now = 168*time.Hour, func() time.Time { return now }
	})

	ev := func(run, op, typ string, ts time.Time) string {
		data := fmt.Sprintf(`{"operation_id":%q,"tool":"t","args":{}}`, op)
		if typ == "tool.completed" {
			data = fmt.Sprintf(`{"operation_id":%q,"result_summary":"done"}`, op)
		}
		return fmt.Sprintf(`{"source_id":"agent-x","event_id":"%s/%s/%s","project":"acme","run_id":%q,"type":%q,"ts":%q,"actor":"agent","data":%s}`,
			run, op, typ, run, typ, ts.Format(time.RFC3339Nano), data)
	}
	rows := func() int {
		var n int
		if err := pool.QueryRow(ctx, "SELECT count(*) FROM journal_events").Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}

	before := now.Add(-168*time.Hour - time.Second)
	code, out := post(t, srv, "agent-secret-1", `{"events":[`+ev("r1", "op-1", "tool.started", now.Add(-time.Hour))+","+ev("r1", "op-2", "tool.started", before)+`]}`)
	msg := fmt.Sprint(out["error"])
	if code != http.StatusBadRequest || out["event_index"] != float64(1) ||
		!strings.Contains(msg, `events[1]`) || !strings.Contains(msg, `field "ts"`) || !strings.Contains(msg, "RECKON_OPERATIONS_WINDOW=168h0m0s") {
		t.Fatalf("tool.started before the window: %d %v", code, out)
	}
	if n := rows(); n != 0 {
		t.Fatalf("a refused batch wrote %d rows", n)
	}

	// Inside the window, at its very start; an old completion; an old
	// run.started.
	code, out = post(t, srv, "agent-secret-1", `{"events":[`+
		ev("r2", "op-1", "tool.started", now.Add(-168*time.Hour))+","+
		ev("r2", "op-0", "tool.completed", now.AddDate(-1, 0, 0))+","+
		strings.Replace(ev("r2", "run", "run.started", now.AddDate(-1, 0, 0)), `"data":{"operation_id":"run","tool":"t","args":{}}`, `"data":{}`, 1)+`]}`)
	if code != http.StatusOK {
		t.Fatalf("events the window does not hide: %d %v", code, out)
	}
	if n := rows(); n != 3 {
		t.Fatalf("journal has %d rows, want 3", n)
	}
}

// TestAToolStartedAtTheWindowsEdgeStaysListed: end to end, what an agent
// can do at the edge of RECKON_OPERATIONS_WINDOW. POST /v1/events takes a
// tool.started dated two seconds inside the window (the earliest it
// takes); an hour later its ts is outside the window, and the listing and
// Projects still show it by when the journal took it, so an agent cannot
// hide an operation from the operator by dating it at the edge. Listed
// at a later time through operations.Service with the same window, as the
// API's own listing is.
func TestAToolStartedAtTheWindowsEdgeStaysListed(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	const window = 168 * time.Hour
	now := time.Now().UTC()
	srv, pool := newServerConfig(t, func(c *httpapi.Config) {
		c.OperationsWindow, c.Now = window, func() time.Time { return now }
	})
	edge := now.Add(-window + 2*time.Second)
	ev := fmt.Sprintf(`{"source_id":"agent-x","event_id":"edge/op-1/started","project":"acme","run_id":"edge",
 "type":"tool.started","ts":%q,"actor":"agent","data":{"operation_id":"op-1","tool":"mcp__create_issue","args":{}}}`,
		edge.Format(time.RFC3339Nano))
	if code, out := post(t, srv, "agent-secret-1", `{"events":[`+ev+`]}`); code != http.StatusOK {
		t.Fatalf("the edge tool.started was refused: %d %v", code, out)
	}
	later := now.Add(time.Hour)
	ops := operations.New(pool, operations.Config{Window: window, Now: func() time.Time { return later }})
	page, err := ops.List(ctx, operations.ListParams{Project: "acme"})
	if err != nil {
		t.Fatal(err)
	}
	if len(page.Operations) != 1 || page.Operations[0].OperationID != "op-1" || page.Operations[0].State != operations.StateStaleInFlight {
		t.Fatalf("an hour later, with its ts outside the window: listed %+v; want op-1 stale_in_flight", page.Operations)
	}
	if projects, err := ops.Projects(ctx); err != nil || len(projects) != 1 || projects[0] != "acme" {
		t.Fatalf("projects %v %v; want [acme]", projects, err)
	}
	// A window later the journal's time is outside too: not listed.
	gone := operations.New(pool, operations.Config{Window: window, Now: func() time.Time { return now.Add(window + time.Hour) }})
	if page, err := gone.List(ctx, operations.ListParams{Project: "acme"}); err != nil || len(page.Operations) != 0 {
		t.Fatalf("a window after it was taken: listed %+v %v; want nothing", page.Operations, err)
	}
}
