package mcptool

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/seed-7bc021c3/reckon/internal/mcpserver"
	"github.com/seed-7bc021c3/reckon/internal/mcptest"
	"github.com/seed-7bc021c3/reckon/kernel"
)

// helperServer configures the test binary itself as a stdio MCP server.
func helperServer(t *testing.T, name, mode string, args ...string) ServerConfig {
	t.Helper()
	return ServerConfig{Name: name, Command: append([]string{os.Args[0]}, args...), Env: map[string]string{helperEnv: mode}}
}

func issuesSet(t *testing.T) (*ToolSet, *mcpserver.Store) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "issues.json")
	ts, err := New([]ServerConfig{helperServer(t, "issues", "issues", "--store", path)}, Config{})
	if err != nil {
		t.Fatal(err)
	}
	st, err := mcpserver.OpenStore(path)
	if err != nil {
		t.Fatal(err)
	}
	return ts, st
}

// wantIssues fails the test unless the store holds n issues; what names
// what they are.
func wantIssues(t *testing.T, st *mcpserver.Store, n int, what string) {
	t.Helper()
	all, err := st.Issues()
	if err != nil {
		t.Fatal(err)
	}
	if len(all) != n {
		t.Fatalf("store holds %d issues, want %d (%s)", len(all), n, what)
	}
}

func lookup(t *testing.T, ts *ToolSet, name string) kernel.Tool {
	t.Helper()
	tool, ok := ts.Lookup(name)
	if !ok {
		t.Fatalf("Lookup(%q) found nothing", name)
	}
	return tool
}

func execute(t *testing.T, tool kernel.Tool, opID string, args string) (kernel.ToolResult, error) {
	t.Helper()
	call := kernel.ToolCall{Project: "acme", RunID: "run-1", OperationID: opID, Tool: tool.Name(), Args: json.RawMessage(args), Workspace: t.TempDir()}
	if err := tool.Validate(call); err != nil {
		return kernel.ToolResult{}, err
	}
	return tool.Execute(context.Background(), call)
}

func wantClass(t *testing.T, err error, errorType, effect string) {
	t.Helper()
	if err == nil {
		t.Fatalf("want %s/%s, got success", errorType, effect)
	}
	et, eff := kernel.Classify(err)
	if et != errorType || eff != effect {
		t.Fatalf("got %s/%s (%v), want %s/%s", et, eff, err, errorType, effect)
	}
}

func issueOf(t *testing.T, res kernel.ToolResult) (id string, replayed bool) {
	t.Helper()
	var out mcpserver.CreateIssueResult
	if err := json.Unmarshal(res.Output, &out); err != nil {
		t.Fatalf("output %s: %v", res.Output, err)
	}
	return out.Issue.ID, out.Replayed
}

func TestMetaKeyMatchesServer(t *testing.T) {
	if IdempotencyKeyMeta != mcpserver.IdempotencyKeyMeta {
		t.Fatalf("client sends %q, server reads %q", IdempotencyKeyMeta, mcpserver.IdempotencyKeyMeta)
	}
}

// The same operation id twice, each call in a new server process: one issue.
// A new operation id creates a new one.
func TestCreateIssueIdempotentAcrossProcesses(t *testing.T) {
	t.Parallel()
	ts, st := issuesSet(t)
	tool := lookup(t, ts, "mcp__create_issue")
	res, err := execute(t, tool, "op-1", `{"title":"Disk full on db-3"}`)
	if err != nil {
		t.Fatal(err)
	}
	id, replayed := issueOf(t, res)
	if id == "" || replayed || !strings.Contains(res.Summary, id) {
		t.Fatalf("first call: %+v", res)
	}
	res, err = execute(t, tool, "op-1", `{"title":"Disk full on db-3"}`)
	if err != nil {
		t.Fatal(err)
	}
	if id2, replayed := issueOf(t, res); id2 != id || !replayed {
		t.Fatalf("retry with the same key: %s replayed=%v, want %s replayed", id2, replayed, id)
	}
	res, err = execute(t, tool, "op-2", `{"title":"Disk full on db-3"}`)
	if err != nil {
		t.Fatal(err)
	}
	if id3, _ := issueOf(t, res); id3 == id {
		t.Fatalf("a new operation id reused issue %s", id)
	}
	wantIssues(t, st, 2, "one per operation id")
}

// Operation ids repeat across runs ("op-1" in every run); the key does not,
// so two runs' identical first steps create two issues.
func TestSameOperationIDInTwoRuns(t *testing.T) {
	t.Parallel()
	ts, st := issuesSet(t)
	tool := lookup(t, ts, "mcp__create_issue")
	ids := map[string]bool{}
	for _, run := range []string{"run-a", "run-b"} {
		call := kernel.ToolCall{Project: "acme", RunID: run, OperationID: "op-1", Tool: tool.Name(), Args: json.RawMessage(`{"title":"Disk full"}`), Workspace: t.TempDir()}
		res, err := tool.Execute(context.Background(), call)
		if err != nil {
			t.Fatal(err)
		}
		id, replayed := issueOf(t, res)
		if replayed {
			t.Fatalf("%s/op-1 was deduplicated against another run", run)
		}
		ids[id] = true
	}
	if len(ids) != 2 {
		t.Fatalf("two runs gave issues %v, want two", ids)
	}
	wantIssues(t, st, 2, "one per run")
}

// Same key, different arguments: the server refuses with an error result
// naming the conflict, classified uncertain (an error result after sending).
func TestConflictSameKeyDifferentArgs(t *testing.T) {
	t.Parallel()
	ts, st := issuesSet(t)
	tool := lookup(t, ts, "mcp__create_issue")
	if _, err := execute(t, tool, "op-1", `{"title":"A"}`); err != nil {
		t.Fatal(err)
	}
	_, err := execute(t, tool, "op-1", `{"title":"B"}`)
	wantClass(t, err, ErrorTypeErrorResult, kernel.EffectUncertain)
	if !strings.Contains(err.Error(), "conflict") || !strings.Contains(err.Error(), `"acme/run-1/op-1"`) {
		t.Fatalf("error does not name the conflict: %v", err)
	}
	wantIssues(t, st, 1, "the first call's; the conflicting one made none")
}

func TestLookupOperation(t *testing.T) {
	t.Parallel()
	ts, _ := issuesSet(t)
	res, err := execute(t, lookup(t, ts, "mcp__create_issue"), "op-1", `{"title":"A"}`)
	if err != nil {
		t.Fatal(err)
	}
	id, _ := issueOf(t, res)
	lk := lookup(t, ts, "mcp__issues__lookup_operation") // the server-qualified name
	res, err = execute(t, lk, "probe-1", `{"key":"`+IdempotencyKey("acme", "run-1", "op-1")+`"}`)
	if err != nil {
		t.Fatal(err)
	}
	var out mcpserver.LookupOperationResult
	_ = json.Unmarshal(res.Output, &out)
	if out.Status != "completed" || out.Issue == nil || out.Issue.ID != id || out.Args["title"] != "A" {
		t.Fatalf("lookup_operation op-1: %s", res.Output)
	}
	res, err = execute(t, lk, "probe-2", `{"key":"op-404"}`)
	if err != nil {
		t.Fatal(err)
	}
	_ = json.Unmarshal(res.Output, &out)
	if out.Status != "never_seen" {
		t.Fatalf("lookup_operation op-404: %s", res.Output)
	}
}

// Everything caught before tools/call is sent is effect=none, and the server
// indeed saw nothing.
func TestValidationRejectsBeforeSending(t *testing.T) {
	t.Parallel()
	ts, st := issuesSet(t)
	tool := lookup(t, ts, "mcp__create_issue")
	for _, args := range []string{`[1,2]`, `"title"`, `{"title":`, `{"body":"no title"}`, `{"title":7}`} {
		_, err := execute(t, tool, "op-1", args)
		wantClass(t, err, kernel.ErrorTypeValidation, kernel.EffectNone)
	}
	if _, ok := ts.Lookup("mcp__no_such_tool"); ok {
		t.Fatal("Lookup found a tool the server does not offer")
	}
	if _, ok := ts.Lookup("run_command"); ok {
		t.Fatal("Lookup answered a non-MCP name")
	}
	// A configured tool list that names a tool the server lacks: rejected
	// when the call compares it with the server's tools/list.
	cfg := helperServer(t, "issues", "issues", "--store", filepath.Join(t.TempDir(), "x.json"))
	cfg.Tools = []string{"create_issue", "delete_everything"}
	ts2, err := New([]ServerConfig{cfg}, Config{})
	if err != nil {
		t.Fatal(err)
	}
	_, err = execute(t, lookup(t, ts2, "mcp__delete_everything"), "op-2", `{}`)
	wantClass(t, err, kernel.ErrorTypeValidation, kernel.EffectNone)
	if !strings.Contains(err.Error(), "has no tool") {
		t.Fatalf("message: %v", err)
	}
	if _, _, found, _ := st.Lookup(IdempotencyKey("acme", "run-1", "op-1")); found {
		t.Fatal("a rejected call reached the server")
	}
	wantIssues(t, st, 0, "rejected calls create none")
}

// A server that cannot be reached never got tools/call: effect=none.
func TestConnectFailureIsEffectNone(t *testing.T) {
	t.Parallel()
	cases := []ServerConfig{
		{Name: "missing", Command: []string{"/nonexistent/mcp-server"}, Tools: []string{"create_issue"}},
		{Name: "crash", Command: []string{os.Args[0]}, Env: map[string]string{helperEnv: "crash"}, Tools: []string{"create_issue"}},
		{Name: "silent", Command: []string{os.Args[0]}, Env: map[string]string{helperEnv: "silent"}, Tools: []string{"create_issue"}, Timeout: "500ms"},
		{Name: "http", URL: "http://127.0.0.1:1/mcp", Tools: []string{"create_issue"}},
	}
	for _, c := range cases {
		ts, err := New([]ServerConfig{c}, Config{})
		if err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		_, err = execute(t, lookup(t, ts, "mcp__create_issue"), "op-1", `{"title":"x"}`)
		wantClass(t, err, ErrorTypeConnectFailed, kernel.EffectNone)
		if c.Name == "crash" && !strings.Contains(err.Error(), "refusing to start") {
			t.Errorf("crash: server stderr missing from %v", err)
		}
		if d := time.Since(start); d > 5*time.Second {
			t.Errorf("%s: took %s", c.Name, d)
		}
	}
}

// A tool that never answers: after the per-call timeout the call is
// mcp_timeout with effect=uncertain (the request was sent and may have run).
func TestHangingServerTimesOutUncertain(t *testing.T) {
	t.Parallel()
	mark := filepath.Join(t.TempDir(), "mark")
	cfg := helperServer(t, "peer", "peer")
	cfg.Env["PEER_MARK"] = mark
	// The timeout bounds the whole call, the server's start included; 700ms
	// was too short for starting this test binary as the server on a loaded
	// machine (the connect timed out, tools/call never sent), so 2s.
	cfg.Timeout = "2s"
	ts, err := New([]ServerConfig{cfg}, Config{})
	if err != nil {
		t.Fatal(err)
	}
	tool := lookup(t, ts, "mcp__hang")
	start := time.Now()
	_, err = execute(t, tool, "op-1", `{}`)
	wantClass(t, err, ErrorTypeTimeout, kernel.EffectUncertain)
	if d := time.Since(start); d < 2*time.Second || d > 8*time.Second {
		t.Fatalf("timed out after %s, want ~2s (+ process stop)", d)
	}
	if _, err := os.Stat(mark); err != nil {
		t.Fatal("the hanging tool was never reached: the test does not prove what it claims")
	}
}

func TestErrorResultIsUncertain(t *testing.T) {
	t.Parallel()
	ts, err := New([]ServerConfig{helperServer(t, "peer", "peer")}, Config{})
	if err != nil {
		t.Fatal(err)
	}
	_, err = execute(t, lookup(t, ts, "mcp__fail"), "op-1", `{}`)
	wantClass(t, err, ErrorTypeErrorResult, kernel.EffectUncertain)
	if !strings.Contains(err.Error(), "failed on purpose") {
		t.Fatalf("message: %v", err)
	}
}

// The _meta keys, and the per-call placeholders in command, env and dir.
func TestMetaAndPlaceholders(t *testing.T) {
	t.Parallel()
	cfg := helperServer(t, "peer", "peer", "--root={workspace}", "{project}/{run_id}")
	cfg.Env["PEER_VAR"] = "ws={workspace}"
	cfg.Dir = "{workspace}"
	ts, err := New([]ServerConfig{cfg}, Config{})
	if err != nil {
		t.Fatal(err)
	}
	tool := lookup(t, ts, "mcp__peer__echo")
	ws := t.TempDir()
	call := kernel.ToolCall{Project: "acme", RunID: "run-7", OperationID: "op-3", Tool: tool.Name(), Args: json.RawMessage(`{"x":1}`), Workspace: ws}
	res, err := tool.Execute(context.Background(), call)
	if err != nil {
		t.Fatal(err)
	}
	var got struct {
		Meta map[string]any `json:"meta"`
		Argv []string       `json:"argv"`
		Cwd  string         `json:"cwd"`
		Env  string         `json:"env"`
	}
	var out struct {
		Content []struct {
			Text string `json:"text"`
		} `json:"content"`
	}
	if err := json.Unmarshal(res.Output, &out); err != nil || len(out.Content) != 1 {
		t.Fatalf("output %s: %v", res.Output, err)
	}
	if err := json.Unmarshal([]byte(out.Content[0].Text), &got); err != nil {
		t.Fatalf("echo %q: %v", out.Content[0].Text, err)
	}
	want := map[string]string{IdempotencyKeyMeta: "acme/run-7/op-3", OperationIDMeta: "op-3", RunIDMeta: "run-7", ProjectMeta: "acme"}
	for k, v := range want {
		if got.Meta[k] != v {
			t.Errorf("_meta[%q] = %v, want %q (all: %v)", k, got.Meta[k], v, got.Meta)
		}
	}
	if strings.Join(got.Argv[1:], " ") != "--root="+ws+" acme/run-7" || got.Env != "ws="+ws || got.Cwd != ws {
		t.Fatalf("placeholders: argv=%v env=%q cwd=%q, workspace %s", got.Argv, got.Env, got.Cwd, ws)
	}
	// Without a workspace the call is refused before anything starts.
	call.Workspace = ""
	wantClass(t, tool.Validate(call), kernel.ErrorTypeValidation, kernel.EffectNone)
}

// Streamable HTTP: the same semantics, plus the Idempotency-Key header.
func TestHTTPTransport(t *testing.T) {
	t.Parallel()
	st := mcptest.Store(t)
	var mu sync.Mutex
	seen := map[string]bool{}
	h := mcpserver.Handler(mcpserver.NewServer(st))
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		seen[r.Header.Get(IdempotencyKeyHeader)+"|"+r.Header.Get("X-Team")] = true
		mu.Unlock()
		h.ServeHTTP(w, r)
	}))
	defer hs.Close()
	ts, err := New([]ServerConfig{{Name: "remote", URL: hs.URL + mcpserver.HTTPPath, Headers: map[string]string{"X-Team": "{project}"}}}, Config{})
	if err != nil {
		t.Fatal(err)
	}
	tool := lookup(t, ts, "mcp__create_issue")
	r1, err := execute(t, tool, "op-1", `{"title":"over http"}`)
	if err != nil {
		t.Fatal(err)
	}
	r2, err := execute(t, tool, "op-1", `{"title":"over http"}`)
	if err != nil {
		t.Fatal(err)
	}
	id1, _ := issueOf(t, r1)
	id2, replayed := issueOf(t, r2)
	if id1 == "" || id1 != id2 || !replayed {
		t.Fatalf("http: %s then %s (replayed=%v)", id1, id2, replayed)
	}
	mu.Lock()
	ok := seen["acme/run-1/op-1|acme"]
	mu.Unlock()
	if !ok {
		t.Fatalf("no request carried Idempotency-Key acme/run-1/op-1 and X-Team acme: %v", seen)
	}
	_, err = execute(t, tool, "op-1", `{"title":"changed"}`)
	wantClass(t, err, ErrorTypeErrorResult, kernel.EffectUncertain)
}

func TestParseConfig(t *testing.T) {
	t.Parallel()
	got, err := ParseConfig(`[{"name":"issues","command":["reckon","mcp-test-server"]},{"name":"x","url":"http://127.0.0.1:9000/mcp","timeout":"5s"}]`)
	if err != nil || len(got) != 2 || got[1].timeout(time.Minute) != 5*time.Second || got[0].timeout(time.Minute) != time.Minute {
		t.Fatalf("%+v %v", got, err)
	}
	if got, err := ParseConfig("  "); err != nil || got != nil {
		t.Fatalf("empty: %v %v", got, err)
	}
	bad := map[string]string{
		`{"name":"x"}`:        "not a JSON array",
		`[{"command":["a"]}]`: "[0].name",
		`[{"name":"a"}]`:      "[0].command",
		`[{"name":"a","command":["x"],"url":"http://h"}]`:             "[0].url",
		`[{"name":"a","url":"ftp://h"}]`:                              "[0].url",
		`[{"name":"a","command":["x"],"timeout":"soon"}]`:             "[0].timeout",
		`[{"name":"a","command":["x"]},{"name":"a","command":["y"]}]`: "[1].name",
		`[{"name":"a__b","command":["x"]}]`:                           "[0].name",
		`[{"name":"a","command":["x"],"colour":"red"}]`:               "colour",
		`[{"name":"a","url":"http://h","env":{"A":"b"}}]`:             "[0].env",
	}
	for in, want := range bad {
		_, err := ParseConfig(in)
		if err == nil || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), "RECKON_MCP_SERVERS") {
			t.Errorf("ParseConfig(%s) = %v, want an error naming RECKON_MCP_SERVERS and %q", in, err, want)
		}
	}
	if _, err := FromConfig(`[{"name":"a","command":[""]}]`, "", Config{}); err == nil {
		t.Error("empty program accepted")
	}
}

func TestClassifiedErrorsUnwrap(t *testing.T) {
	t.Parallel()
	_, err := decodeArgs(json.RawMessage(`[]`))
	var te *kernel.ToolError
	if !errors.As(err, &te) || te.Effect != kernel.EffectNone {
		t.Fatalf("%v", err)
	}
}

// A server's answer is the server's to choose, NUL bytes included (a
// filesystem server reading a file a sandboxed command wrote), and reckon
// stores no NUL: the summary and the error result's message carry it as
// U+FFFD, so the gateway's tool.completed or tool.failed can be journaled.
func TestResultTextWithNULIsStorable(t *testing.T) {
	t.Parallel()
	res := &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "a\x00b\xff"}}}
	if got := ResultSummary(res); got != "a\uFFFDb\uFFFD" {
		t.Fatalf("ResultSummary = %q", got)
	}
	if err := kernel.CheckText("error", ResultError("fs", "read_file", res).Error()); err != nil {
		t.Fatalf("ResultError: %v", err)
	}
}

// A stdio server is third-party code, often one that runs what the agent
// asks (a shell, an interpreter) or that drops privileges first: it must
// not inherit the worker's secrets (database, tokens, model key), only
// what a program needs to run and what its entry's env gives it.
func TestStdioServerGetsNoWorkerSecrets(t *testing.T) {
	secrets := map[string]string{
		"DATABASE_URL":              "postgres://reckon:pw@db/reckon",
		"PGPASSWORD":                "pw",
		"RECKON_TOKENS":             "ops:operator:s3cret",
		"RECKON_SUPERVISOR_API_KEY": "sk-secret",
		"RECKON_GATEWAY_TOKEN":      "gw-secret",
		"AWS_SECRET_ACCESS_KEY":     "aws-secret",
	}
	for k, v := range secrets {
		t.Setenv(k, v)
	}
	t.Setenv("LC_ALL", "C.UTF-8")
	cfg := helperServer(t, "peer", "peer")
	cfg.Env["PEER_VAR"] = "given"
	ts, err := New([]ServerConfig{cfg}, Config{})
	if err != nil {
		t.Fatal(err)
	}
	res, err := execute(t, lookup(t, ts, "mcp__peer__echo"), "op-1", `{}`)
	if err != nil {
		t.Fatal(err)
	}
	var got struct {
		Env     string   `json:"env"`
		Environ []string `json:"environ"`
	}
	decodeEcho(t, res.Output, &got)
	seen := map[string]bool{}
	for _, kv := range got.Environ {
		k, v, _ := strings.Cut(kv, "=")
		seen[k] = true
		if _, secret := secrets[k]; secret || strings.Contains(v, "s3cret") {
			t.Errorf("the server inherited %s", kv)
		}
	}
	if got.Env != "given" || !seen["PATH"] || !seen["LC_ALL"] || !seen[helperEnv] {
		t.Errorf("the server's environment lacks its entry's env or PATH/locale: %q", got.Environ)
	}
}

// A descriptor the worker inherited without close-on-exec (a wrapper's
// connection, a supervisor's pipe) does not reach a stdio server.
func TestStdioServerInheritsNoDescriptor(t *testing.T) {
	secret := filepath.Join(t.TempDir(), "inherited-secret")
	if err := os.WriteFile(secret, []byte("secret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	fd, err := syscall.Open(secret, syscall.O_RDONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer syscall.Close(fd)
	ts, err := New([]ServerConfig{helperServer(t, "peer", "peer")}, Config{})
	if err != nil {
		t.Fatal(err)
	}
	res, err := execute(t, lookup(t, ts, "mcp__peer__echo"), "op-1", `{}`)
	if err != nil {
		t.Fatal(err)
	}
	var got struct {
		Open []string `json:"open"`
	}
	if decodeEcho(t, res.Output, &got); len(got.Open) == 0 {
		t.Fatalf("echo %s lists no open descriptor", res.Output)
	}
	for _, target := range got.Open {
		if target == secret {
			t.Fatalf("the server inherited the worker's descriptor of %s: %q", secret, got.Open)
		}
	}
}

// decodeEcho decodes the peer's echo answer (the one text content of the
// tool's output) into v.
func decodeEcho(t *testing.T, output json.RawMessage, v any) {
	t.Helper()
	var out struct {
		Content []struct {
			Text string `json:"text"`
		} `json:"content"`
	}
	if err := json.Unmarshal(output, &out); err != nil || len(out.Content) != 1 {
		t.Fatalf("output %s: %v", output, err)
	}
	if err := json.Unmarshal([]byte(out.Content[0].Text), v); err != nil {
		t.Fatalf("echo %q: %v", out.Content[0].Text, err)
	}
}
