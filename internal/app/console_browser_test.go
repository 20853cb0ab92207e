//go:build browser

package app

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/seed-7bc021c3/reckon/adapter/auth"
	"github.com/seed-7bc021c3/reckon/internal/pgtest"
	"github.com/seed-7bc021c3/reckon/internal/sandboxtest"
	"github.com/seed-7bc021c3/reckon/kernel"
	"github.com/seed-7bc021c3/reckon/kernel/fault"
	"github.com/seed-7bc021c3/reckon/kernel/outbox"
	"github.com/seed-7bc021c3/reckon/kernel/runner"
)

// The operator console in a real browser (`make test-browser`): a dev stack
// — embedded Temporal, PostgreSQL, the sandbox, a fault after the effect of
// every run's first run_command — with drilled runs, driven through Debian's
// chromium by playwright-core (testdata/browser/console.test.mjs). The
// script presses the console's Triage now in the middle, so that the page
// must pick the verdicts up by itself; over a control endpoint of this
// test's own it changes a token's role.
//
// It is behind the "browser" build tag, so `go test ./...` needs no
// browser; under the tag a missing chromium, node or playwright-core is a
// failure naming the command that installs it, never a skip.

const (
	consoleOperatorTok = "ann-console-secret-1"
	consoleReaderTok   = "rita-console-secret-1"
	consoleAgentTok    = "bot-console-secret-1"
	consoleProject     = "acme"
)

func TestConsoleInBrowser(t *testing.T) {
	chromium := os.Getenv("RECKON_CHROMIUM")
	if chromium == "" {
		chromium = "/usr/bin/chromium"
	}
	if _, err := os.Stat(chromium); err != nil {
		t.Fatalf("the browser tests need Debian's chromium at %s (%v): run `make test-browser`, whose scripts/ensure-browser.sh installs it (apt-get install chromium), or point RECKON_CHROMIUM at a Chromium binary", chromium, err)
	}
	node, err := exec.LookPath("node")
	if err != nil {
		t.Fatalf("the browser tests need Node.js to run playwright-core: apt-get install nodejs npm (%v)", err)
	}
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(root, "testdata", "browser")
	if _, err := os.Stat(filepath.Join(dir, "node_modules", "playwright-core", "package.json")); err != nil {
		t.Fatalf("playwright-core is not installed in %s: run scripts/ensure-browser.sh (npm ci from its lock file)", dir)
	}
	shots := os.Getenv("RECKON_SCREENSHOTS")
	if shots == "" {
		shots = t.TempDir()
	}

	ctx, cancel := context.WithTimeout(context.Background(), 6*time.Minute)
	defer cancel()
	s := pgtest.New(t)
	cfg := testConfig(t, map[string]string{
		"DATABASE_URL": s.URL, "RECKON_DATA_DIR": sandboxtest.Dir(t), "RECKON_HTTP_ADDR": "127.0.0.1:0",
		"RECKON_TOKENS": "ann:operator:" + consoleOperatorTok + ",rita:reader:" + consoleReaderTok + ",bot:agent:" + consoleAgentTok,
		// The schedule is the test's: the script asks for the one sweep
		// (the console's Triage now).
		"RECKON_TRIAGE_SCHEDULE": "@every 1000h",
		// Every workspace manifest is cut at once, as for a workspace too
		// big to walk within its budget: the workspace-diff probe then
		// proves nothing, so deploy-42's effect stays unprovable and lands
		// in the operator's queue (report-7 is still proved by its
		// postcondition).
		"RECKON_MANIFEST_BUDGET": "1ns",
	})
	cfg.LogLevel = "disabled" // the drilled crashes log errors by design
	st, err := StartDev(ctx, cfg, DevConfig{
		Kernel: KernelConfig{InMemory: true, Fault: &fault.Config{AfterEffect: kernel.ToolRunCommand}},
		Outbox: outbox.Config{PollInterval: 20 * time.Millisecond},
	})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	base := "http://" + st.APIAddr
	drillConsoleRuns(ctx, t, st, base)
	seedAgentRun(ctx, t, st)

	control := consoleControl(t, st)
	cmd := exec.CommandContext(ctx, node, "--test", "--test-reporter=spec", "--test-timeout=240000", "console.test.mjs")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(),
		"RECKON_CONSOLE_URL="+base, "RECKON_CONTROL_URL="+control,
		"RECKON_OPERATOR_TOKEN="+consoleOperatorTok, "RECKON_READER_TOKEN="+consoleReaderTok, "RECKON_AGENT_TOKEN="+consoleAgentTok,
		"RECKON_PROJECT="+consoleProject, "RECKON_SCREENSHOTS="+shots, "RECKON_CHROMIUM="+chromium)
	out := &lineLogger{t: t}
	cmd.Stdout, cmd.Stderr = out, out
	err = cmd.Run()
	out.flush()
	if err != nil {
		t.Fatalf("the browser script failed (%v); its output is above", err)
	}
	t.Logf("screenshots in %s", shots)
}

// drillConsoleRuns stages what an on-call person meets: three kernel runs
// whose first run_command commits its effect and then "crashes" — one with
// nothing a probe can check (manifests cut, no postcondition: the
// supervisor must leave it unknown), one with
// a postcondition (the workspace probe proves it), one that delegates to a
// child run that crashes the same way — and an external agent's run whose
// own report carries HTML and script in its args and error text.
func drillConsoleRuns(ctx context.Context, t *testing.T, st *Stack, base string) {
	t.Helper()
	report := "quarterly report\n"
	sum := sha256.Sum256([]byte(report))
	cmd := func(c string) json.RawMessage { return mustRaw(t, map[string]any{"command": c, "timeout_s": 30}) }
	plans := map[string][]runner.Step{
		"deploy-42": {{Tool: kernel.ToolRunCommand, Args: cmd("echo v2.4.1 > release.txt")}},
		"report-7": {{Tool: kernel.ToolRunCommand, Args: cmd("printf 'quarterly report\\n' > report.txt"),
			Postcondition: mustRaw(t, map[string]any{"path": "report.txt", "sha256": hex.EncodeToString(sum[:])})}},
		"nightly-3": {{Tool: kernel.DelegateTool, Plan: &runner.Plan{Steps: []runner.Step{
			{Tool: kernel.ToolRunCommand, Args: cmd("echo rotated > keys.txt")}}}}},
	}
	k := st.Kernel
	for _, id := range []string{"deploy-42", "report-7", "nightly-3"} {
		if _, _, err := k.Starter.Start(ctx, runner.StartParams{Project: consoleProject, RunID: id, Plan: runner.Plan{Steps: plans[id]}}); err != nil {
			t.Fatalf("start %s: %v", id, err)
		}
	}
	for _, id := range []string{"deploy-42", "report-7", "nightly-3", "nightly-3.op-1"} {
		if err := k.Conn.Client.GetWorkflow(ctx, kernel.WorkflowID(consoleProject, id), "").Get(ctx, nil); err == nil {
			t.Fatalf("run %s completed; the fault should have stopped it", id)
		}
		if err := outbox.WaitDelivered(ctx, st.Pool, consoleProject, id, 20*time.Millisecond); err != nil {
			t.Fatal(err)
		}
	}
	ts := time.Now().UTC().Format(time.RFC3339Nano)
	ev := func(id, typ string, data map[string]any) map[string]any {
		return map[string]any{"source_id": "bot", "event_id": "agent-7/" + id, "project": consoleProject, "run_id": "agent-7",
			"type": typ, "ts": ts, "actor": "agent", "data": data}
	}
	body := mustRaw(t, map[string]any{"events": []any{
		ev("run/started", "run.started", map[string]any{}),
		ev("op-1/started", "tool.started", map[string]any{"operation_id": "op-1", "tool": "http_post",
			"args": map[string]any{"url": "http://billing.invalid/charge", "body": `<img src=x onerror="window.pwned=1"> charge 42 EUR`}}),
		ev("op-1/failed", "tool.failed", map[string]any{"operation_id": "op-1", "error_type": "timeout", "effect": "uncertain",
			"error": "<script>window.pwned=2</script>upstream timed out after 30s \u202egnirts"}),
		ev("run/failed", "run.failed", map[string]any{"error": "the charge step timed out"}),
	}})
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, base+"/v1/events", strings.NewReader(string(body)))
	req.Header.Set("Authorization", "Bearer "+consoleAgentTok)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || strings.Count(string(raw), `"accepted"`) != 4 {
		t.Fatalf("the agent's events: %d %s", resp.StatusCode, raw)
	}
}

// consoleControl serves POST /role on 127.0.0.1: a token reload.
func consoleControl(t *testing.T, st *Stack) string {
	t.Helper()
	mux := http.NewServeMux()
	// A token reload, as SIGHUP with RECKON_TOKENS_FILE makes it: ann's
	// token takes the role ?ann= names.
	mux.HandleFunc("POST /role", func(w http.ResponseWriter, r *http.Request) {
		role := r.URL.Query().Get("ann")
		if role != "operator" && role != "reader" {
			http.Error(w, "?ann= must be operator or reader", http.StatusBadRequest)
			return
		}
		next := &auth.Tokens{}
		next.Add("ann", role, consoleOperatorTok)
		next.Add("rita", "reader", consoleReaderTok)
		next.Add("bot", "agent", consoleAgentTok)
		st.Tokens.Replace(next)
		w.WriteHeader(http.StatusNoContent)
	})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
	return "http://" + ln.Addr().String()
}

func mustRaw(t *testing.T, v any) json.RawMessage {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// lineLogger writes a child process's output to the test log, a line at a
// time, as it comes.
type lineLogger struct {
	t   *testing.T
	mu  sync.Mutex
	buf []byte
}

func (l *lineLogger) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.buf = append(l.buf, p...)
	for {
		i := strings.IndexByte(string(l.buf), '\n')
		if i < 0 {
			return len(p), nil
		}
		l.t.Log(string(l.buf[:i]))
		l.buf = l.buf[i+1:]
	}
}

func (l *lineLogger) flush() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.buf) > 0 {
		l.t.Log(string(l.buf))
		l.buf = nil
	}
}

// seedAgentRun journals, as the kernel records them, the events of an
// agent run "agent-turns-1": two model turns (the first asks for a call
// that runs and one that is refused), the call, and a final answer that
// carries HTML the page must show as text.
func seedAgentRun(ctx context.Context, t *testing.T, st *Stack) {
	t.Helper()
	const run = "agent-turns-1"
	at := time.Now().UTC().Add(-time.Minute)
	turn1, err := kernel.NewAgentTurn(1, "scripted", []kernel.AgentMessage{{Role: "user", Content: "write NOTES.md"}},
		kernel.AgentAnswer{ToolCalls: []kernel.AgentToolCall{
			{ID: "c1", Name: kernel.ToolRunCommand, Arguments: `{"command":"echo released > NOTES.md"}`, OperationID: "op-1-c1"},
			{ID: "c2", Name: kernel.ToolRunCommand, Arguments: `{"cmd":"x"}`}}},
		[]kernel.AgentRefusal{{ID: "c2", Reason: "arguments of run_command rejected; nothing ran"}})
	if err != nil {
		t.Fatal(err)
	}
	turn2, err := kernel.NewAgentTurn(2, "scripted", []kernel.AgentMessage{{Role: "tool", ToolCallID: "c1", Content: "exit 0"}},
		kernel.AgentAnswer{Content: `done <img src=x onerror="window.pwned=1">`}, nil)
	if err != nil {
		t.Fatal(err)
	}
	events := []struct {
		id, typ string
		data    any
	}{
		{"run/started", kernel.TypeRunStarted, kernel.RunStarted{PlanSummary: "agent: 20 turns at most; tools: run_command"}},
		{"turn/1", kernel.TypeAgentTurn, turn1},
		{"op-1-c1/started", kernel.TypeToolStarted, kernel.ToolStarted{OperationID: "op-1-c1", Tool: kernel.ToolRunCommand}},
		{"op-1-c1/completed", kernel.TypeToolCompleted, kernel.ToolCompleted{OperationID: "op-1-c1", ResultSummary: "exit 0"}},
		{"turn/2", kernel.TypeAgentTurn, turn2},
		{"run/completed", kernel.TypeRunCompleted, kernel.RunCompleted{FinalAnswer: `NOTES.md written <img src=x onerror="window.pwned=1">`, AnswerAuthor: kernel.ActorAgent}},
	}
	for i, e := range events {
		ev, err := kernel.NewEvent(kernel.SourceKernel, kernel.EventID(consoleProject, run, e.id), consoleProject, run, e.typ, kernel.ActorKernel,
			at.Add(time.Duration(i)*time.Millisecond), e.data)
		if err != nil {
			t.Fatal(err)
		}
		if err := outbox.Enqueue(ctx, st.Pool, ev); err != nil {
			t.Fatal(err)
		}
	}
	if err := outbox.WaitDelivered(ctx, st.Pool, consoleProject, run, 20*time.Millisecond); err != nil {
		t.Fatal(err)
	}
}
