package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/rs/zerolog"

	"github.com/seed-7bc021c3/reckon/internal/mcpserver"
	"github.com/seed-7bc021c3/reckon/internal/npmtest"
	"github.com/seed-7bc021c3/reckon/internal/pgtest"
	"github.com/seed-7bc021c3/reckon/internal/reckontest"
	"github.com/seed-7bc021c3/reckon/kernel"
	"github.com/seed-7bc021c3/reckon/kernel/journal"
	"github.com/seed-7bc021c3/reckon/kernel/operations"
	"github.com/seed-7bc021c3/reckon/kernel/outbox"
	"github.com/seed-7bc021c3/reckon/tool/mcptool"
)

// tsLine is one output line of testdata/npm/mcp-session.mjs.
type tsLine struct {
	Tools  []map[string]any `json:"tools"`
	I      *int             `json:"i"`
	Result *tsResult        `json:"result"`
	Error  string           `json:"error"`
}

type tsResult struct {
	IsError           bool            `json:"isError"`
	StructuredContent json.RawMessage `json:"structuredContent"`
	Content           []struct {
		Type string `json:"type"`
		Text string `json:"text"`
	} `json:"content"`
}

func (r *tsResult) text() string {
	var parts []string
	for _, c := range r.Content {
		parts = append(parts, c.Text)
	}
	return strings.Join(parts, "\n")
}

type tsCall struct {
	Tool string         `json:"tool"`
	Args map[string]any `json:"args"`
	Meta map[string]any `json:"meta,omitempty"`
}

// tsSession starts one TypeScript SDK client session making calls against
// target (["--url", URL] or ["--", argv...]) with env.
func tsSession(ctx context.Context, t *testing.T, npm string, env []string, target []string, calls []tsCall) (*exec.Cmd, *bytes.Buffer, *reckontest.Buffer) {
	t.Helper()
	c, _ := json.Marshal(calls)
	argv := append([]string{filepath.Join(npm, "mcp-session.mjs"), "--calls", string(c)}, target...)
	cmd := exec.CommandContext(ctx, "node", argv...)
	cmd.Dir = npm
	cmd.Env = env
	var out bytes.Buffer
	var stderr reckontest.Buffer
	cmd.Stdout, cmd.Stderr = &out, &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	return cmd, &out, &stderr
}

// tsLines parses the session's output: the tool list, then one line per call.
func tsLines(t *testing.T, out []byte, calls int) ([]map[string]any, []tsLine) {
	t.Helper()
	var tools []map[string]any
	res := make([]tsLine, calls)
	for _, l := range bytes.Split(bytes.TrimSpace(out), []byte("\n")) {
		var ln tsLine
		if err := json.Unmarshal(l, &ln); err != nil {
			t.Fatalf("mcp-session output %q: %v", l, err)
		}
		if ln.I == nil {
			tools = ln.Tools
			continue
		}
		res[*ln.I] = ln
	}
	return tools, res
}

// journalEvent is an event with its journal position.
type journalEvent struct {
	seq int64
	kernel.Event
}

// journalOf is project's journal in event time order, as the listing
// orders it: positions follow delivery, and a row whose delivery was
// retried (the gateway's publisher stopped mid-pass at exit) is journaled
// after rows enqueued later.
func journalOf(t *testing.T, pool *pgxpool.Pool, project string) []journalEvent {
	t.Helper()
	rows, err := pool.Query(context.Background(), `
SELECT seq, source_id, event_id, project, run_id, type, ts, actor, data FROM journal_events WHERE project = $1 ORDER BY ts, seq`, project)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var out []journalEvent
	for rows.Next() {
		var e journalEvent
		if err := rows.Scan(&e.seq, &e.SourceID, &e.EventID, &e.Project, &e.RunID, &e.Type, &e.TS, &e.Actor, &e.Data); err != nil {
			t.Fatal(err)
		}
		out = append(out, e)
	}
	return out
}

// The official TypeScript SDK client, as an MCP host would, starts `reckon
// mcp-gateway` over stdio in front of three real servers — reckon's test
// server, @modelcontextprotocol/server-filesystem and server-memory — and
// calls through it. The host sees the same tools and the same results as
// without the gateway; every call leaves tool.started before the upstream
// acted (the test server's and the filesystem's own records) and one
// terminal event after; the idempotency key reached the test server; the
// session's run completes when the host closes it.
func TestMCPGatewayTypeScriptHostStdio(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	s := pgtest.New(t)
	h := newTSInterop(t)
	env := append(os.Environ(),
		execMainEnv+"=1",
		"DATABASE_URL="+s.URL,
		"RECKON_MCP_SERVERS="+string(h.serversJSON()),
		"RECKON_GATEWAY_PROJECT=interop",
		"RECKON_LOG_LEVEL=warn",
		"RECKON_TOKENS=",
	)
	cmd, out, stderr := tsSession(ctx, t, h.npm, env, []string{"--", os.Args[0], "mcp-gateway"}, h.calls)
	if err := cmd.Wait(); err != nil {
		t.Fatalf("TypeScript host: %v\n%s", err, stderr.String())
	}
	tools, res := tsLines(t, out.Bytes(), len(h.calls))
	h.checkSameTools(ctx, t, tools)
	h.checkResults(ctx, t, res, stderr)

	// The gateway exited when the host closed stdin (or, the host's patience
	// over, was killed: its events wait in the outbox for the next
	// publisher, as here).
	if err := outbox.NewPublisher(s.Pool, journal.New(s.Pool, nil), outbox.Config{}, nil, zerolog.Nop()).Drain(ctx); err != nil {
		t.Fatal(err)
	}
	evs := journalOf(t, s.Pool, "interop")
	if len(evs) == 0 {
		t.Fatalf("nothing journaled\n%s", stderr.String())
	}
	runID := evs[0].RunID
	if evs[0].Type != kernel.TypeRunStarted || evs[len(evs)-1].Type != kernel.TypeRunCompleted {
		var types []string
		for _, e := range evs {
			types = append(types, fmt.Sprintf("%d:%s:%s", e.seq, e.Type, e.EventID))
		}
		t.Fatalf("run events: first %s, last %s\n%s\n%s", evs[0].Type, evs[len(evs)-1].Type, strings.Join(types, "\n"), stderr.String())
	}
	ops := gatewayOps(t, evs, runID)
	h.checkEnds(t, ops)
	h.checkUpstreamRecords(t, runID, ops)
}

// tsInterop is the TypeScript host's session of
// TestMCPGatewayTypeScriptHostStdio: three upstream servers and the calls
// made through the gateway in front of them.
type tsInterop struct {
	npm       string
	servers   []mcptool.ServerConfig
	calls     []tsCall
	storePath string // the test server's store
	memPath   string // server-memory's file
	proof     string // the file write_file writes
}

func newTSInterop(t *testing.T) *tsInterop {
	t.Helper()
	h := &tsInterop{npm: npmtest.Dir(t, "sdk", "server-filesystem", "server-memory")}
	dir := t.TempDir()
	root, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	h.storePath = filepath.Join(dir, "issues.json")
	h.memPath = filepath.Join(dir, "memory.jsonl")
	fsEntry := filepath.Join(h.npm, "node_modules", "@modelcontextprotocol", "server-filesystem", "dist", "index.js")
	memEntry := filepath.Join(h.npm, "node_modules", "@modelcontextprotocol", "server-memory", "dist", "index.js")
	h.servers = []mcptool.ServerConfig{
		{Name: "issues", Command: []string{os.Args[0], "mcp-test-server", "--store", h.storePath}, Env: map[string]string{execMainEnv: "1"}},
		{Name: "fs", Command: []string{"node", fsEntry, root}},
		{Name: "memory", Command: []string{"node", memEntry}, Env: map[string]string{"MEMORY_FILE_PATH": h.memPath}},
	}
	h.proof = filepath.Join(root, "proof.txt")
	h.calls = []tsCall{
		{Tool: "create_issue", Args: map[string]any{"title": "Disk full on db-3", "body": "through the gateway"}},
		{Tool: "write_file", Args: map[string]any{"path": h.proof, "content": "written through the gateway\n"}},
		{Tool: "read_text_file", Args: map[string]any{"path": h.proof}},
		{Tool: "create_entities", Args: map[string]any{"entities": []any{map[string]any{"name": "db-3", "entityType": "host", "observations": []any{"disk full"}}}}},
		{Tool: "add_observations", Args: map[string]any{"observations": []any{map[string]any{"entityName": "db-3", "contents": []any{"cleaned up"}}}}},
		{Tool: "read_graph", Args: map[string]any{}},
		{Tool: "create_issue", Args: map[string]any{"title": "  "}},                                                 // the upstream's error result
		{Tool: "write_file", Args: map[string]any{"path": "/etc/reckon-gw-outside", "content": "x"}},                // refused by the server
		{Tool: "create_issue", Args: map[string]any{"body": "no title"}},                                            // fails the input schema
		{Tool: "get_issue", Args: map[string]any{"id": "ISS-1"}, Meta: map[string]any{"host.example/trace": "t-1"}}, // the host's own _meta
	}
	return h
}

func (h *tsInterop) serversJSON() []byte {
	b, _ := json.Marshal(h.servers)
	return b
}

// checkSameTools: the tools and their definitions are the upstreams',
// unchanged.
func (h *tsInterop) checkSameTools(ctx context.Context, t *testing.T, tools []map[string]any) {
	t.Helper()
	var direct []map[string]any
	for _, sc := range h.servers {
		target := append([]string{"--"}, sc.Command...)
		denv := os.Environ()
		for k, v := range sc.Env {
			denv = append(denv, k+"="+v)
		}
		dc, dout, derr := tsSession(ctx, t, h.npm, denv, target, nil)
		if err := dc.Wait(); err != nil {
			t.Fatalf("direct session with %s: %v\n%s", sc.Name, err, derr.String())
		}
		dt, _ := tsLines(t, dout.Bytes(), 0)
		direct = append(direct, dt...)
	}
	byName := func(ts []map[string]any) map[string]map[string]any {
		m := map[string]map[string]any{}
		for _, x := range ts {
			m[x["name"].(string)] = x
		}
		return m
	}
	gw, dr := byName(tools), byName(direct)
	if len(gw) != len(dr) || len(gw) != 5+14+9 {
		t.Fatalf("gateway serves %d tools, the upstreams offer %d", len(gw), len(dr))
	}
	for n, d := range dr {
		// Annotation hints the upstream left out are spelled out at their
		// default (false) by the Go SDK, and fields it does not model
		// (execution, of the experimental tasks feature) are not served:
		// the meaning is the same.
		d = maps.Clone(d)
		delete(d, "execution")
		if a, ok := d["annotations"].(map[string]any); ok {
			a = maps.Clone(a)
			for _, hint := range []string{"readOnlyHint", "idempotentHint"} {
				if _, ok := a[hint]; !ok {
					a[hint] = false
				}
			}
			d["annotations"] = a
		}
		if !reflect.DeepEqual(gw[n], d) {
			a, _ := json.Marshal(gw[n])
			b, _ := json.Marshal(d)
			t.Errorf("tool %s through the gateway %s\ndirect %s", n, a, b)
		}
	}
}

// checkResults: each call's result is an error exactly where the upstream
// or the gateway refuses it, and reads give what the same host gets from
// the servers directly.
func (h *tsInterop) checkResults(ctx context.Context, t *testing.T, res []tsLine, stderr *reckontest.Buffer) {
	t.Helper()
	for i, want := range []bool{false, false, false, false, false, false, true, true, true, false} {
		r := res[i]
		if r.Result == nil || r.Result.IsError != want {
			t.Fatalf("call %d (%s): %+v, want isError=%v\n%s", i, h.calls[i].Tool, r, want, stderr.String())
		}
	}
	if got := res[2].Result.text(); got != "written through the gateway\n" {
		t.Errorf("read_text_file through the gateway: %q", got)
	}
	if got := res[6].Result.text(); got != "title: must not be empty" {
		t.Errorf("the upstream's error result changed: %q", got)
	}
	for _, i := range []int{2, 5} {
		sc := h.servers[1]
		if h.calls[i].Tool == "read_graph" {
			sc = h.servers[2]
		}
		denv := append(os.Environ(), "MEMORY_FILE_PATH="+h.memPath)
		dc, dout, derr := tsSession(ctx, t, h.npm, denv, append([]string{"--"}, sc.Command...), []tsCall{h.calls[i]})
		if err := dc.Wait(); err != nil {
			t.Fatalf("direct %s: %v\n%s", h.calls[i].Tool, err, derr.String())
		}
		_, dres := tsLines(t, dout.Bytes(), 1)
		// Compared as JSON values: object keys have no order.
		var a, b any
		ra, _ := json.Marshal(res[i].Result)
		rb, _ := json.Marshal(dres[0].Result)
		_ = json.Unmarshal(ra, &a)
		_ = json.Unmarshal(rb, &b)
		if !reflect.DeepEqual(a, b) {
			t.Errorf("%s through the gateway %s\ndirect %s", h.calls[i].Tool, ra, rb)
		}
	}
}

// opEvents are one operation's tool.started and its terminal events.
type opEvents struct {
	started, end *journalEvent
	ends         int
}

// gatewayOps groups the session run's events by operation, each written
// by the gateway as the agent's, tool.started first.
func gatewayOps(t *testing.T, evs []journalEvent, runID string) map[string]*opEvents {
	t.Helper()
	ops := map[string]*opEvents{}
	for i := range evs {
		e := &evs[i]
		if e.SourceID != "mcp-gateway" || e.Actor != "agent" || e.RunID != runID {
			t.Fatalf("event %s: source %s actor %s run %s", e.EventID, e.SourceID, e.Actor, e.RunID)
		}
		op := e.OperationID()
		if op == "" {
			continue
		}
		if ops[op] == nil {
			ops[op] = &opEvents{}
		}
		switch e.Type {
		case kernel.TypeToolStarted:
			ops[op].started = e
		default:
			if ops[op].started == nil {
				t.Fatalf("%s: %s before tool.started", op, e.Type)
			}
			ops[op].end = e
			ops[op].ends++
		}
	}
	return ops
}

// checkEnds: one operation per call, each with exactly one terminal event,
// the one its result calls for.
func (h *tsInterop) checkEnds(t *testing.T, ops map[string]*opEvents) {
	t.Helper()
	if len(ops) != len(h.calls) {
		t.Fatalf("%d operations journaled for %d calls", len(ops), len(h.calls))
	}
	wantEnd := []string{"completed", "completed", "completed", "completed", "completed", "completed",
		"failed mcp_error_result uncertain", "failed mcp_error_result uncertain", "failed argument_validation none", "completed"}
	for i := range h.calls {
		op := fmt.Sprintf("op-%d", i+1)
		o := ops[op]
		if o == nil || o.ends != 1 {
			t.Fatalf("%s: want tool.started and exactly one terminal event, got %+v", op, o)
		}
		var sd struct {
			Tool string `json:"tool"`
		}
		_ = o.started.DecodeData(&sd)
		got := strings.TrimPrefix(o.end.Type, "tool.")
		if o.end.Type == kernel.TypeToolFailed {
			var f kernel.ToolFailed
			_ = o.end.DecodeData(&f)
			got += " " + f.ErrorType + " " + f.Effect
		}
		if sd.Tool != "mcp__"+h.calls[i].Tool || got != wantEnd[i] {
			t.Errorf("%s (%s): tool %s, end %q, want %q", op, h.calls[i].Tool, sd.Tool, got, wantEnd[i])
		}
	}
}

// checkUpstreamRecords: the upstreams' own records. The test server stored
// the key of op-1 between its tool.started and its terminal event; the
// file was written in that window too.
func (h *tsInterop) checkUpstreamRecords(t *testing.T, runID string, ops map[string]*opEvents) {
	t.Helper()
	st, err := mcpserver.OpenStore(h.storePath)
	if err != nil {
		t.Fatal(err)
	}
	key := mcptool.IdempotencyKey("interop", runID, "op-1")
	rec, iss, found, err := st.Lookup(key)
	if err != nil || !found || iss.Title != "Disk full on db-3" {
		t.Fatalf("the test server has no record of key %s: %v %v", key, found, err)
	}
	if o := ops["op-1"]; rec.CreatedAt.Before(o.started.TS) || o.end.TS.Before(rec.CreatedAt) {
		t.Errorf("op-1: tool.started %s, the server acted %s, tool.completed %s", o.started.TS, rec.CreatedAt, o.end.TS)
	}
	fi, err := os.Stat(h.proof)
	if err != nil {
		t.Fatal(err)
	}
	// Linux stamps a file with its coarse clock, which lags the clock
	// time.Now reads by up to a scheduler tick (10 ms at HZ=100), so a
	// file written just after tool.started can carry an mtime just before
	// it. The slack only widens the start side, the one the coarse clock
	// can cross.
	const mtimeSlack = 20 * time.Millisecond
	if o := ops["op-2"]; fi.ModTime().Before(o.started.TS.Add(-mtimeSlack)) || o.end.TS.Before(fi.ModTime()) {
		t.Errorf("op-2: tool.started %s, file written %s, tool.completed %s", o.started.TS, fi.ModTime(), o.end.TS)
	}
	if all, _ := st.Issues(); len(all) != 1 {
		t.Errorf("the test server holds %d issues, want 1 (the blank title and the schema violation create none)", len(all))
	}
	if b, err := os.ReadFile(h.memPath); err != nil || !strings.Contains(string(b), "cleaned up") {
		t.Errorf("server-memory's file: %q %v", b, err)
	}
}

// A gateway killed with SIGKILL while the upstream's slow_create_issue is
// in flight (the issue is stored; the answer never comes) leaves both
// operations listed — the session run's in the crash window once the next
// gateway has ended it (lease), the client-named run's stale in flight —
// and one `reckon triage` settles both from the test server's
// lookup_operation, basis probe.
func TestMCPGatewaySIGKILLMidCall(t *testing.T) {
	t.Parallel()
	npm := npmtest.Dir(t, "sdk", "server-filesystem", "server-memory")
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	s := pgtest.New(t)
	storePath := filepath.Join(t.TempDir(), "issues.json")
	servers, _ := json.Marshal([]mcptool.ServerConfig{{Name: "issues", Command: []string{os.Args[0], "mcp-test-server", "--store", storePath}, Env: map[string]string{execMainEnv: "1"}}})
	env := append(os.Environ(),
		execMainEnv+"=1",
		"DATABASE_URL="+s.URL,
		"RECKON_MCP_SERVERS="+string(servers),
		"RECKON_GATEWAY_PROJECT=crash",
		"RECKON_LOG_LEVEL=warn",
		"RECKON_TOKENS=",
		"RECKON_DATA_DIR="+t.TempDir(),
		"RECKON_STALE_AFTER=2s",
	)
	var logs reckontest.Buffer
	defer func() {
		if t.Failed() {
			t.Logf("process output:\n%s", logs.String())
		}
	}()
	startGateway := func() (*exec.Cmd, string) { return startGatewayProcess(ctx, t, env, &logs) }

	gw, url := startGateway()
	slow := func(title string, meta map[string]any) []tsCall {
		return []tsCall{{Tool: "slow_create_issue", Args: map[string]any{"title": title, "delay_ms": 60000}, Meta: meta}}
	}
	hostA, _, _ := tsSession(ctx, t, npm, os.Environ(), []string{"--url", url}, slow("crash A", nil))
	hostB, _, _ := tsSession(ctx, t, npm, os.Environ(), []string{"--url", url}, slow("crash B", map[string]any{"dev.reckon/run-id": "host-run-b"}))

	// Kill once the upstream has stored both issues: their effects landed,
	// their answers will never reach the gateway.
	st, err := mcpserver.OpenStore(storePath)
	if err != nil {
		t.Fatal(err)
	}
	keys := map[string]string{}
	for len(keys) < 2 {
		all, _ := st.Issues()
		for _, iss := range all {
			keys[iss.Title] = iss.IdempotencyKey
		}
		if ctx.Err() != nil {
			t.Fatalf("the upstream never stored both issues: %v", keys)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err := gw.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = gw.Wait()
	_ = hostA.Wait()
	_ = hostB.Wait()

	parts := strings.Split(keys["crash A"], "/")
	if len(parts) != 3 || parts[0] != "crash" || keys["crash B"] != "crash/host-run-b/op-1" {
		t.Fatalf("keys the upstream got: %v", keys)
	}
	runA := parts[1]

	// The next gateway delivers the dead one's outbox rows and, its lease
	// over, ends the session run it held.
	gw2, _ := startGateway()
	defer func() { _ = gw2.Process.Signal(syscall.SIGTERM); _ = gw2.Wait() }()
	deadline := time.Now().Add(30 * time.Second)
	for {
		var n int
		_ = s.Pool.QueryRow(ctx, `SELECT count(*) FROM journal_events WHERE project = 'crash' AND run_id = $1 AND type = 'run.failed'`, runA).Scan(&n)
		if n == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the dead gateway's session run was never ended")
		}
		time.Sleep(50 * time.Millisecond)
	}
	time.Sleep(2 * time.Second) // RECKON_STALE_AFTER for host-run-b's operation

	svc := operations.New(s.Pool, operations.Config{StaleAfter: 2 * time.Second})
	page, err := svc.List(ctx, operations.ListParams{Project: "crash"})
	if err != nil {
		t.Fatal(err)
	}
	listed := map[string]string{}
	for _, it := range page.Operations {
		listed[it.RunID+"/"+it.OperationID] = it.State + " " + it.Tool
	}
	want := map[string]string{runA + "/op-1": "crash_window mcp__slow_create_issue", "host-run-b/op-1": "stale_in_flight mcp__slow_create_issue"}
	if !reflect.DeepEqual(listed, want) {
		t.Fatalf("listing %v, want %v", listed, want)
	}

	triage := exec.CommandContext(ctx, os.Args[0], "triage", "--project", "crash", "--json")
	triage.Env = env
	var tout bytes.Buffer
	triage.Stdout, triage.Stderr = &tout, &logs
	if err := triage.Run(); err != nil {
		t.Fatalf("reckon triage: %v\n%s", err, tout.String())
	}
	var verdicts []string
	for _, e := range journalOf(t, s.Pool, "crash") {
		if e.Type != kernel.TypeOperationReconciled {
			continue
		}
		var r kernel.Reconciliation
		_ = e.DecodeData(&r)
		verdicts = append(verdicts, e.RunID+"/"+r.OperationID+" "+r.Effect+" "+r.Basis)
	}
	sort.Strings(verdicts)
	wantV := []string{runA + "/op-1 occurred probe", "host-run-b/op-1 occurred probe"}
	sort.Strings(wantV)
	if !reflect.DeepEqual(verdicts, wantV) {
		t.Fatalf("verdicts %v, want %v\ntriage: %s", verdicts, wantV, tout.String())
	}
	page, err = svc.List(ctx, operations.ListParams{Project: "crash"})
	if err != nil || len(page.Operations) != 0 {
		t.Fatalf("after triage the listing holds %+v (%v)", page.Operations, err)
	}
}

// startGatewayProcess starts `reckon mcp-gateway --http 127.0.0.1:0 --lease
// 1s` (this test binary) with env, its stderr copied to logs, and returns it
// with the URL it listens on.
func startGatewayProcess(ctx context.Context, t *testing.T, env []string, logs *reckontest.Buffer) (*exec.Cmd, string) {
	t.Helper()
	cmd := exec.CommandContext(ctx, os.Args[0], "mcp-gateway", "--http", "127.0.0.1:0", "--lease", "1s")
	cmd.Env = env
	pr, pw := io.Pipe()
	cmd.Stderr = pw
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	// The log reader below ends when the pipe does (goleak found it
	// running on after the test).
	t.Cleanup(func() { _ = pw.Close() })
	sc := bufio.NewScanner(pr)
	for sc.Scan() {
		logs.Write(append(sc.Bytes(), '\n'))
		if _, rest, ok := strings.Cut(sc.Text(), "listening on "); ok {
			go func() {
				for sc.Scan() {
					logs.Write(append(sc.Bytes(), '\n'))
				}
			}()
			return cmd, strings.Fields(rest)[0]
		}
	}
	t.Fatalf("the gateway did not start:\n%s", logs.String())
	return nil, ""
}

// A gateway killed while its client is still answering an upstream's
// elicitation (create_issue_confirmed asks before it writes) leaves the
// call's operation open — tool.started, no terminal event — and, once the
// next gateway has ended the dead one's session run, listed as unresolved
// (crash_window). The upstream wrote nothing: it was still waiting for the
// answer.
func TestMCPGatewaySIGKILLWhileClientAnswers(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	s := pgtest.New(t)
	storePath := filepath.Join(t.TempDir(), "issues.json")
	servers, _ := json.Marshal([]mcptool.ServerConfig{{Name: "issues", Command: []string{os.Args[0], "mcp-test-server", "--store", storePath}, Env: map[string]string{execMainEnv: "1"}}})
	env := append(os.Environ(), execMainEnv+"=1", "DATABASE_URL="+s.URL, "RECKON_MCP_SERVERS="+string(servers),
		"RECKON_GATEWAY_PROJECT=asking", "RECKON_LOG_LEVEL=warn", "RECKON_DATA_DIR="+t.TempDir())
	var logs reckontest.Buffer
	defer func() {
		if t.Failed() {
			t.Logf("process output:\n%s", logs.String())
		}
	}()
	gw, url := startGatewayProcess(ctx, t, env, &logs)

	asked := make(chan string, 1)
	client := mcp.NewClient(&mcp.Implementation{Name: "asking-host", Version: "1"}, &mcp.ClientOptions{
		ElicitationHandler: func(ctx context.Context, req *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
			asked <- req.Params.Message
			<-ctx.Done() // the person never answers
			return nil, ctx.Err()
		},
	})
	cs, err := client.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: url, MaxRetries: -1}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	callDone := make(chan error, 1)
	go func() {
		_, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "create_issue_confirmed", Arguments: map[string]any{"title": "Wipe staging"}})
		callDone <- err
	}()
	select {
	case msg := <-asked:
		if msg != `Create issue "Wipe staging"?` {
			t.Fatalf("the client was asked %q", msg)
		}
	case <-ctx.Done():
		t.Fatal("the client was never asked")
	}
	if err := gw.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = gw.Wait()
	if err := <-callDone; err == nil {
		t.Fatal("the call answered although its gateway was killed")
	}

	gw2, _ := startGatewayProcess(ctx, t, env, &logs)
	defer func() { _ = gw2.Process.Signal(syscall.SIGTERM); _ = gw2.Wait() }()
	var listed map[string]string
	deadline := time.Now().Add(30 * time.Second)
	for {
		page, err := operations.New(s.Pool, operations.Config{}).List(ctx, operations.ListParams{Project: "asking"})
		if err != nil {
			t.Fatal(err)
		}
		listed = map[string]string{}
		for _, it := range page.Operations {
			listed[it.OperationID] = it.State + " " + it.Tool
		}
		if listed["op-1"] == "crash_window mcp__create_issue_confirmed" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("listing %v, want op-1 crash_window mcp__create_issue_confirmed", listed)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if len(listed) != 1 {
		t.Fatalf("listing %v, want the one call", listed)
	}
	st, err := mcpserver.OpenStore(storePath)
	if err != nil {
		t.Fatal(err)
	}
	if all, _ := st.Issues(); len(all) != 0 {
		t.Fatalf("the upstream wrote %+v while it waited for the answer", all)
	}
}
