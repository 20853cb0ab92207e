package probe

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/seed-7bc021c3/reckon/internal/mcpserver"
	"github.com/seed-7bc021c3/reckon/internal/mcptest"
	"github.com/seed-7bc021c3/reckon/internal/pgtest"
	"github.com/seed-7bc021c3/reckon/kernel"
	"github.com/seed-7bc021c3/reckon/kernel/operations"
	"github.com/seed-7bc021c3/reckon/pipeline"
	"github.com/seed-7bc021c3/reckon/tool/mcptool"
)

// fileIssue files an issue titled title under key in store.
func fileIssue(t *testing.T, store *mcpserver.Store, key, title string) {
	t.Helper()
	if _, _, err := store.CreateIssue(key, title, ""); err != nil {
		t.Fatal(err)
	}
}

// serveMCP serves h over HTTP until the test ends and returns the URL of
// its MCP endpoint.
func serveMCP(t *testing.T, h http.Handler) string {
	hs := httptest.NewServer(h)
	t.Cleanup(hs.Close)
	return hs.URL + mcpserver.HTTPPath
}

// issueServer serves `reckon mcp-test-server`'s tools over HTTP, its
// store holding an issue filed under each of keys, and returns the URL of
// its MCP endpoint.
func issueServer(t *testing.T, keys ...string) string {
	t.Helper()
	store := mcptest.Store(t)
	for _, k := range keys {
		fileIssue(t, store, k, "filed")
	}
	return serveMCP(t, mcpserver.Handler(mcpserver.NewServer(store)))
}

// issuesClient asks the one server, "issues", at url.
func issuesClient(url string) MCPClient {
	return MCPClient{Servers: []mcptool.ServerConfig{{Name: "issues", URL: url}}, Timeout: 10 * time.Second}
}

// mcpCall is the kernel's create_issue call id in acme/run-1, in state on
// the wall, started (and its tool.started committed) at t0.
func mcpCall(id, state string) pipeline.WallOperation {
	return pipeline.WallOperation{OperationID: id, Tool: "mcp__create_issue", State: state, StartedAt: t0, JournaledAt: journaled(t0),
		StartedKey: kernel.EventKey{SourceID: kernel.SourceKernel, EventID: "acme/run-1/" + id + "/started"}}
}

func TestMCPLookup(t *testing.T) {
	t.Parallel()
	store := mcptest.Store(t)
	// Another run's op-1 under the bare id must not count (ids repeat
	// across runs); the kernel's qualified key does.
	fileIssue(t, store, "op-2", "bare id of another run")
	fileIssue(t, store, mcptool.IdempotencyKey("acme", "run-1", "op-1"), "Disk full on db-3")
	client := issuesClient(serveMCP(t, mcpserver.Handler(mcpserver.NewServer(store))))
	run := clocked(Run{Project: "acme", RunID: "run-1"})
	// Through the per-wall scope, as the sweep asks.
	wp, done := MCP{Looker: client, Grace: 5 * time.Minute}.ForWall(run)
	defer done()
	p := wp.(MCP)
	op := func(id, state string, started time.Time) pipeline.WallOperation {
		o := mcpCall(id, state)
		o.StartedAt, o.JournaledAt = started, journaled(started)
		return o
	}
	cases := []struct {
		name    string
		op      pipeline.WallOperation
		finding string
	}{
		{"applied", op("op-1", "failed_uncertain", t0), pipeline.FindingOccurred},
		{"never seen, old", op("op-2", "crash_window", t0), pipeline.FindingNone},
		{"never seen, young", op("op-3", "crash_window", now().Add(-time.Minute)), pipeline.FindingInconclusive},
		{"never seen, in flight", op("op-4", "stale_in_flight", t0), pipeline.FindingInconclusive},
	}
	for _, c := range cases {
		ev, ok := p.Probe(context.Background(), run, c.op)
		if !ok || ev.Finding != c.finding || !strings.Contains(string(ev.Provenance), c.op.OperationID) {
			t.Errorf("%s: got ok=%v %s %q %s", c.name, ok, ev.Finding, ev.Detail, ev.Provenance)
		}
	}
	// Only age stands between a young never_seen and a proof: the probe
	// says when to look again. An in-flight call gives no such time.
	young, _ := p.Probe(context.Background(), run, op("op-3", "crash_window", now().Add(-time.Minute)))
	if young.RecheckAfter == nil || !young.RecheckAfter.Equal(now().Add(4*time.Minute)) {
		t.Errorf("young never_seen: recheck after %v, want %v", young.RecheckAfter, now().Add(4*time.Minute))
	}
	if inflight, _ := p.Probe(context.Background(), run, op("op-4", "stale_in_flight", t0)); inflight.RecheckAfter != nil {
		t.Errorf("in-flight never_seen: recheck after %v, want none", inflight.RecheckAfter)
	}
	// Ids with "/" make keys that read alike: op "y" of run "run-1/x" filed
	// an issue under "acme/run-1/x/y", which is also what op "x/y" of run
	// "run-1" would send. Its completed must not prove that operation, nor
	// a never_seen anything: the probe does not ask.
	fileIssue(t, store, mcptool.IdempotencyKey("acme", "run-1/x", "y"), "another run's issue")
	for _, c := range []struct {
		run Run
		op  string
	}{{run, "x/y"}, {clocked(Run{Project: "acme", RunID: "run-1/x"}), "y"}, {clocked(Run{Project: "ac/me", RunID: "run-1"}), "op-9"}} {
		ev, ok := p.Probe(context.Background(), c.run, mcpCall(c.op, "failed_uncertain"))
		checkEvidence(t, fmt.Sprintf("run %s op %s, ambiguous key", c.run.RunID, c.op), ev, ok, pipeline.FindingInconclusive, "not looked up")
	}
	// A tool the server does not offer: the probe does not apply.
	if _, ok := p.Probe(context.Background(), run, pipeline.WallOperation{OperationID: "op-1", Tool: "mcp__delete_repo", StartedAt: t0, JournaledAt: journaled(t0)}); ok {
		t.Error("unsupported tool: the probe must not apply")
	}
}

// MCPClient over streamable HTTP against the real test MCP server; servers
// that do not offer the tool are skipped, unreachable ones are reported.
func TestMCPClientOverHTTP(t *testing.T) {
	t.Parallel()
	store := mcptest.Store(t)
	fileIssue(t, store, "acme/run-1/op-1", "Disk full")
	url := serveMCP(t, mcpserver.Handler(mcpserver.NewServer(store)))
	c := MCPClient{Servers: []mcptool.ServerConfig{
		{Name: "other", URL: url, Tools: []string{"search"}},
		{Name: "issues", URL: url},
	}, Timeout: 10 * time.Second}
	run := clocked(Run{Project: "acme", RunID: "run-1"})
	ans, ok, err := c.LookupOperation(context.Background(), run, "mcp__create_issue", "acme/run-1/op-1")
	if err != nil || !ok || ans.Status != LookupCompleted || ans.Server != "issues" || !strings.Contains(string(ans.Result), "Disk full") {
		t.Fatalf("lookup: %+v %v %v", ans, ok, err)
	}
	ans, ok, err = c.LookupOperation(context.Background(), run, "mcp__issues__create_issue", "acme/run-1/op-2")
	if err != nil || !ok || ans.Status != LookupNeverSeen {
		t.Fatalf("lookup never seen: %+v %v %v", ans, ok, err)
	}
	if _, ok, err := c.LookupOperation(context.Background(), run, "mcp__delete_repo", "op-1"); ok || err != nil {
		t.Fatalf("unsupported tool: ok=%v err=%v", ok, err)
	}
	down := MCPClient{Servers: []mcptool.ServerConfig{{Name: "down", URL: "http://127.0.0.1:1/mcp"}}, Timeout: 2 * time.Second}
	p := MCP{Looker: down}
	ev, applies := p.Probe(context.Background(), run, pipeline.WallOperation{OperationID: "op-1", Tool: "mcp__create_issue", StartedAt: t0, JournaledAt: journaled(t0)})
	if !applies || ev.Finding != pipeline.FindingUnavailable || !strings.Contains(ev.Detail, "could not be asked now") {
		t.Fatalf("unreachable server: %+v", ev)
	}
}

// The MCP gateway records which upstream it sent a call to (tool.started's
// server and upstream_tool); the probe asks that server. Asking the first
// configured server offering the tool instead, another server that has
// never seen the key would answer never_seen, and the probe would prove
// "none" of an issue that exists: an unsafe-none.
func TestMCPLookupAsksTheServerTheGatewayCalled(t *testing.T) {
	t.Parallel()
	db := pgtest.New(t)
	gatewayRun(t, db.Pool, "acme", "gw-1")
	client := MCPClient{Servers: []mcptool.ServerConfig{
		{Name: "a", URL: issueServer(t)}, {Name: "b", URL: issueServer(t, mcptool.IdempotencyKey("acme", "gw-1", "op-1"))}}, Timeout: 10 * time.Second}
	run := clocked(Run{Project: "acme", RunID: "gw-1"})
	wp, done := MCP{Looker: client, Grace: 5 * time.Minute, Owners: operations.Owners{Pool: db.Pool}}.ForWall(run)
	defer done()
	p := wp.(MCP)
	op := func(server string) pipeline.WallOperation {
		o := mcpCall("op-1", "crash_window")
		o.Server, o.UpstreamTool, o.StartedKey.SourceID = server, "create_issue", kernel.RecorderGateway
		return o
	}
	if ev, ok := p.Probe(context.Background(), run, op("b")); !ok || ev.Finding != pipeline.FindingOccurred {
		t.Errorf("call the gateway sent to b: got ok=%v %s %q, want occurred (b has the key)", ok, ev.Finding, ev.Detail)
	}
	// A server this configuration does not know: nothing is asked, so
	// nothing is proven.
	if ev, ok := p.Probe(context.Background(), run, op("c")); ok && ev.Finding == pipeline.FindingNone {
		t.Errorf("call the gateway sent to an unconfigured server: got %s %q, want no proof", ev.Finding, ev.Detail)
	}
}

// never_seen proves none only of a call reckon made, which carried the
// key: the kernel's or the MCP gateway's. An agent that reports its own
// call (POST /v1/events) made it with a client of its own that need not
// have sent reckon's key, so the server's never having seen the key says
// nothing of whether the issue was filed. completed still proves the
// call: the key names that very operation.
func TestMCPNeverSeenProvesOnlyReckonsCalls(t *testing.T) {
	t.Parallel()
	db := pgtest.New(t)
	gatewayRun(t, db.Pool, "acme", "gw-1")
	client := issuesClient(issueServer(t, mcptool.IdempotencyKey("acme", "agent-run", "op-2")))
	p := MCP{Looker: client, Grace: 5 * time.Minute, Owners: operations.Owners{Pool: db.Pool}}
	op := func(id, source string) pipeline.WallOperation {
		o := mcpCall(id, "crash_window")
		o.StartedKey.SourceID, o.AgentReported = source, source != kernel.SourceKernel
		return o
	}
	cases := []struct {
		name    string
		run     string
		op      pipeline.WallOperation
		finding string
	}{
		{"an agent's own call, never seen", "agent-run", op("op-1", "agent-7"), pipeline.FindingInconclusive},
		{"an agent's own call, applied under reckon's key", "agent-run", op("op-2", "agent-7"), pipeline.FindingOccurred},
		{"the gateway's call, never seen", "gw-1", op("op-1", "mcp-gateway"), pipeline.FindingNone},
		{"an agent's call under the gateway's source name, in its own run", "agent-run", op("op-1", "mcp-gateway"), pipeline.FindingInconclusive},
	}
	for _, c := range cases {
		ev, ok := p.Probe(context.Background(), clocked(Run{Project: "acme", RunID: c.run}), c.op)
		if !ok || ev.Finding != c.finding {
			t.Errorf("%s: got ok=%v %s %q", c.name, ok, ev.Finding, ev.Detail)
		}
	}
	// Without Owners, only the kernel's calls are told apart.
	p.Owners = nil
	if ev, _ := p.Probe(context.Background(), clocked(Run{Project: "acme", RunID: "gw-1"}), op("op-1", "mcp-gateway")); ev.Finding != pipeline.FindingInconclusive {
		t.Errorf("no owners: the gateway's never_seen gave %s, want inconclusive", ev.Finding)
	}
}

// neverSeen is a Looker whose server has never seen any key.
type neverSeen struct{}

func (neverSeen) LookupOperation(context.Context, Run, string, string) (LookupAnswer, bool, error) {
	return LookupAnswer{Server: "issues", Status: LookupNeverSeen}, true, nil
}

// countingOwners answers RunWriters from runs and counts the calls.
type countingOwners struct {
	runs  map[kernel.RunKey]kernel.RunWriter
	calls int
}

func (o *countingOwners) KernelRuns(context.Context, []kernel.RunKey) (map[kernel.RunKey]bool, error) {
	return nil, nil
}

func (o *countingOwners) RunWriters(_ context.Context, rks []kernel.RunKey) (map[kernel.RunKey]kernel.RunWriter, error) {
	o.calls++
	out := map[kernel.RunKey]kernel.RunWriter{}
	for _, rk := range rks {
		if w, ok := o.runs[rk]; ok {
			out[rk] = w
		}
	}
	return out, nil
}

// Every operation of a wall is of one run: whether it is the gateway's is
// asked once per wall, however many of its calls the server never saw.
func TestMCPAsksOncePerWallWhoseRunItIs(t *testing.T) {
	t.Parallel()
	owners := &countingOwners{runs: map[kernel.RunKey]kernel.RunWriter{{Project: "acme", RunID: "gw-1"}: {Recorder: kernel.RecorderGateway}}}
	run := clocked(Run{Project: "acme", RunID: "gw-1"})
	wp, done := Set{MCP{Looker: neverSeen{}, Grace: time.Minute, Owners: owners}}.ForWall(run)
	defer done()
	for _, id := range []string{"op-1", "op-2", "op-3"} {
		op := mcpCall(id, "crash_window")
		op.StartedKey.SourceID = "mcp-gateway"
		evs := wp.Probe(context.Background(), run, op)
		if len(evs) != 1 || evs[0].Finding != pipeline.FindingNone {
			t.Fatalf("%s: %+v, want the gateway's never_seen to prove none", id, evs)
		}
	}
	if owners.calls != 1 {
		t.Fatalf("asked who writes the run %d times for one wall, want 1", owners.calls)
	}
}

// A kernel call of a bare mcp__<tool> names no server: the worker called
// the first configured server offering the tool that it could reach then,
// which need not be the first the probe reaches. Were the probe to take
// the first server that answers lookup_operation, it would prove none of
// an issue another server had filed.
func TestMCPBareToolAsksEveryServerOfferingIt(t *testing.T) {
	t.Parallel()
	key := mcptool.IdempotencyKey("acme", "run-1", "op-1")
	issues := func(keys ...string) mcptool.ServerConfig {
		return mcptool.ServerConfig{URL: issueServer(t, keys...)}
	}
	// plain offers create_issue and nothing to ask it with.
	plain := func() mcptool.ServerConfig {
		s := mcp.NewServer(&mcp.Implementation{Name: "plain", Version: "1"}, nil)
		type none struct{}
		mcp.AddTool(s, &mcp.Tool{Name: "create_issue"}, func(context.Context, *mcp.CallToolRequest, none) (*mcp.CallToolResult, any, error) {
			return &mcp.CallToolResult{}, nil, nil
		})
		hs := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s }, nil))
		t.Cleanup(hs.Close)
		return mcptool.ServerConfig{URL: hs.URL}
	}
	named := func(name string, sc mcptool.ServerConfig) mcptool.ServerConfig { sc.Name = name; return sc }
	down := mcptool.ServerConfig{URL: "http://127.0.0.1:1/mcp"}
	run := clocked(Run{Project: "acme", RunID: "run-1"})
	op := mcpCall("op-1", "crash_window")
	cases := []struct {
		name    string
		servers []mcptool.ServerConfig
		finding string
		detail  string
	}{
		{"the second server filed it", []mcptool.ServerConfig{named("a", issues()), named("b", issues(key))}, pipeline.FindingOccurred, "server b has key"},
		{"every server never saw it", []mcptool.ServerConfig{named("a", issues()), named("b", issues())}, pipeline.FindingNone, "server a, b has never seen"},
		{"the first server cannot be asked", []mcptool.ServerConfig{named("a", plain()), named("b", issues())}, pipeline.FindingInconclusive, "a also offer create_issue without lookup_operation"},
		// A server the probe cannot reach leaves the evidence unavailable:
		// the sweep takes the operation up again later.
		{"the first server is down", []mcptool.ServerConfig{named("a", down), named("b", issues())}, pipeline.FindingUnavailable, "server a:"},
		{"two servers without lookup_operation", []mcptool.ServerConfig{named("a", plain()), named("b", plain())}, pipeline.FindingInconclusive, "servers a, b all offer create_issue"},
	}
	for _, c := range cases {
		p := MCP{Looker: MCPClient{Servers: c.servers, Timeout: 5 * time.Second}, Grace: 5 * time.Minute}
		wp, done := p.ForWall(run)
		ev, ok := wp.Probe(context.Background(), run, op)
		done()
		checkEvidence(t, c.name, ev, ok, c.finding, c.detail)
	}
}

// A lookup_operation answer names the key it is about. A server that
// matches keys loosely (here: by prefix, so op-1 finds op-10's record)
// answered "completed" about another key, and the probe proved occurred
// for a call that never reached it.
func TestMCPLookupRefusesAnAnswerAboutAnotherKey(t *testing.T) {
	t.Parallel()
	type lookupArgs struct {
		Key string `json:"key"`
	}
	type lookupResult struct {
		Key    string `json:"key"`
		Status string `json:"status"`
	}
	srv := mcp.NewServer(&mcp.Implementation{Name: "loose", Version: "1"}, nil)
	mcp.AddTool(srv, &mcp.Tool{Name: "create_issue"}, func(ctx context.Context, req *mcp.CallToolRequest, in lookupArgs) (*mcp.CallToolResult, lookupResult, error) {
		return nil, lookupResult{}, nil
	})
	mcp.AddTool(srv, &mcp.Tool{Name: "lookup_operation"}, func(ctx context.Context, req *mcp.CallToolRequest, in lookupArgs) (*mcp.CallToolResult, lookupResult, error) {
		if stored := "acme/run-1/op-10"; strings.HasPrefix(stored, in.Key) {
			return nil, lookupResult{Key: stored, Status: "completed"}, nil
		}
		return nil, lookupResult{Key: in.Key, Status: "never_seen"}, nil
	})
	run := clocked(Run{Project: "acme", RunID: "run-1"})
	wp, done := MCP{Looker: MCPClient{Servers: []mcptool.ServerConfig{{Name: "loose", URL: serveMCP(t, mcpserver.Handler(srv))}}, Timeout: 5 * time.Second},
		Grace: 5 * time.Minute}.ForWall(run)
	defer done()
	ev, ok := wp.Probe(context.Background(), run, mcpCall("op-1", "crash_window"))
	checkEvidence(t, "answer about another key", ev, ok, pipeline.FindingInconclusive, "not the key asked about")
	ev, ok = wp.Probe(context.Background(), run, mcpCall("op-10", "crash_window"))
	checkEvidence(t, "answer about the key asked", ev, ok, pipeline.FindingOccurred, "")
}

// Servers are configured by name, and the probes' "issues" need not be
// the worker's: a staging store there has never seen the key, and its
// never_seen proved "none" of an issue filed on the store the call went
// to (an unsafe-none). The call's tool.started records its server's
// endpoint identity; a server of that name configured here with another
// is not asked, and neither its never_seen nor its completed counts.
// Events without server_endpoint are looked up by name, as before.
func TestMCPLookupSkipsAServerConfiguredElsewhere(t *testing.T) {
	t.Parallel()
	key := mcptool.IdempotencyKey("acme", "run-1", "op-1")
	production := mcptool.ServerConfig{Name: "issues", URL: "http://issues.prod.example:9000/mcp"}
	staging := mcptool.ServerConfig{Name: "issues", URL: issueServer(t)}
	stagingWithKey := mcptool.ServerConfig{Name: "issues", URL: issueServer(t, key)}
	run := clocked(Run{Project: "acme", RunID: "run-1"})
	client := func(c mcptool.ServerConfig) Looker {
		return MCPClient{Servers: []mcptool.ServerConfig{c}, Timeout: 10 * time.Second}
	}
	op := func(endpoint string) pipeline.WallOperation {
		o := mcpCall("op-1", "crash_window")
		o.Server, o.UpstreamTool, o.ServerEndpoint = "issues", "create_issue", endpoint
		return o
	}
	cases := []struct {
		name    string
		looker  Looker
		op      pipeline.WallOperation
		finding string
		detail  string
	}{
		{"call went to production, staging configured here, never seen there", client(staging),
			op(production.Endpoint()), pipeline.FindingInconclusive,
			`server "issues" is configured here as endpoint ` + staging.Endpoint() + `, the call went to endpoint ` + production.Endpoint() + `: not asked`},
		{"call went to production, a staging store holding the key configured here", client(stagingWithKey),
			op(production.Endpoint()), pipeline.FindingInconclusive, "not asked"},
		{"same endpoint as the call's", client(staging),
			op(staging.Endpoint()), pipeline.FindingNone, "has never seen key"},
		{"same endpoint, holding the key", client(stagingWithKey),
			op(stagingWithKey.Endpoint()), pipeline.FindingOccurred, "stored result"},
		{"an event from before server_endpoint", client(staging),
			op(""), pipeline.FindingNone, "has never seen key"},
		{"a looker that cannot tell its endpoints", neverSeen{},
			op(production.Endpoint()), pipeline.FindingInconclusive, "cannot tell which endpoint"},
		{"a looker that cannot tell its endpoints, an event from before server_endpoint", neverSeen{},
			op(""), pipeline.FindingNone, "has never seen key"},
	}
	for _, c := range cases {
		wp, done := MCP{Looker: c.looker, Grace: 5 * time.Minute}.ForWall(run)
		ev, ok := wp.Probe(context.Background(), run, c.op)
		done()
		checkEvidence(t, c.name, ev, ok, c.finding, c.detail)
	}
}

// countInit counts MCP initialize requests, i.e. new sessions.
func countInit(h http.Handler, n *atomic.Int32) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost {
			body, _ := io.ReadAll(r.Body)
			if bytes.Contains(body, []byte(`"method":"initialize"`)) {
				n.Add(1)
			}
			r.Body = io.NopCloser(bytes.NewReader(body))
		}
		h.ServeHTTP(w, r)
	})
}

// A wall's MCP lookups share one session per server; the unscoped Looker
// opens one per lookup; an unreachable server is dialled once per wall.
func TestMCPProbeOneSessionPerWall(t *testing.T) {
	t.Parallel()
	store := mcptest.Store(t)
	fileIssue(t, store, mcptool.IdempotencyKey("acme", "run-1", "op-1"), "Disk full")
	var inits atomic.Int32
	client := issuesClient(serveMCP(t, countInit(mcpserver.Handler(mcpserver.NewServer(store)), &inits)))
	run := clocked(Run{Project: "acme", RunID: "run-1"})
	set := Set{MCP{Looker: client}}
	op := func(id string) pipeline.WallOperation { return mcpCall(id, "failed_uncertain") }

	wall, done := set.ForWall(run)
	want := map[string]string{"op-1": pipeline.FindingOccurred, "op-2": pipeline.FindingNone, "op-3": pipeline.FindingNone}
	for _, id := range []string{"op-1", "op-2", "op-3"} {
		evs := wall.Probe(context.Background(), run, op(id))
		if len(evs) != 1 || evs[0].Finding != want[id] {
			t.Fatalf("%s: %+v, want %s", id, evs, want[id])
		}
	}
	done()
	if n := inits.Load(); n != 1 {
		t.Fatalf("a wall of 3 MCP operations opened %d sessions, want 1", n)
	}
	// After done, the scope's session is closed: the next wall opens its own.
	wall, done = set.ForWall(run)
	wall.Probe(context.Background(), run, op("op-1"))
	done()
	if n := inits.Load(); n != 2 {
		t.Fatalf("second wall: %d sessions in all, want 2", n)
	}
	// Unscoped, every lookup connects.
	for range 2 {
		set.Probe(context.Background(), run, op("op-1"))
	}
	if n := inits.Load(); n != 4 {
		t.Fatalf("unscoped lookups: %d sessions in all, want 4", n)
	}

	// A server that refuses connections: every operation of the wall gets
	// the failure as unavailable evidence, from one dial.
	var dials atomic.Int32
	refuse := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		dials.Add(1)
		http.Error(w, "down for maintenance", http.StatusServiceUnavailable)
	}))
	defer refuse.Close()
	down := Set{MCP{Looker: MCPClient{Servers: []mcptool.ServerConfig{{Name: "down", URL: refuse.URL}}, Timeout: 2 * time.Second}}}
	wall, done = down.ForWall(run)
	defer done()
	var afterFirst int32
	for i, id := range []string{"op-1", "op-2", "op-3"} {
		evs := wall.Probe(context.Background(), run, op(id))
		if len(evs) != 1 || evs[0].Finding != pipeline.FindingUnavailable || !strings.Contains(evs[0].Detail, "server down") {
			t.Fatalf("%s against a refusing server: %+v", id, evs)
		}
		if i == 0 {
			afterFirst = dials.Load() // one connection attempt (the SDK may send more than one request)
		}
	}
	if afterFirst == 0 || dials.Load() != afterFirst {
		t.Fatalf("refusing server: %d requests for the first operation, %d after three; later operations must not dial again", afterFirst, dials.Load())
	}
}
