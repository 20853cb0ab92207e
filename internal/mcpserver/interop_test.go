package mcpserver

import (
	"bufio"
	"context"
	"encoding/json"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/seed-7bc021c3/reckon/internal/npmtest"
)

// buildReckon builds the reckon binary so the test talks to the real
// `reckon mcp-test-server` subcommand.
func buildReckon(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "reckon")
	cmd := exec.Command("go", "build", "-o", bin, "../../cmd/reckon")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build ./cmd/reckon: %v\n%s", err, out)
	}
	return bin
}

type tsCallOutput struct {
	Server struct {
		Name string `json:"name"`
	} `json:"server"`
	Tools  []string `json:"tools"`
	Result struct {
		IsError           bool           `json:"isError"`
		StructuredContent map[string]any `json:"structuredContent"`
		Content           []struct {
			Text string `json:"text"`
		} `json:"content"`
	} `json:"result"`
}

// tsCall runs testdata/npm/mcp-call.mjs: one tools/call by the official
// TypeScript SDK client.
func tsCall(t *testing.T, npm string, target []string, tool string, args, meta map[string]any) tsCallOutput {
	t.Helper()
	a, _ := json.Marshal(args)
	argv := []string{filepath.Join(npm, "mcp-call.mjs"), "--tool", tool, "--args", string(a)}
	if meta != nil {
		m, _ := json.Marshal(meta)
		argv = append(argv, "--meta", string(m))
	}
	argv = append(argv, target...)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, "node", argv...)
	cmd.Dir = npm
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("node mcp-call.mjs %s: %v\nstderr: %s", tool, err, stderr.String())
	}
	var res tsCallOutput
	if err := json.Unmarshal(out, &res); err != nil {
		t.Fatalf("mcp-call output %q: %v", out, err)
	}
	return res
}

// The official TypeScript SDK client calls create_issue twice with the same
// _meta key; each call starts its own `reckon mcp-test-server` process, and
// a third call goes over streamable HTTP to yet another process. One issue.
func TestInteropTypeScriptClient(t *testing.T) {
	t.Parallel()
	npm := npmtest.Dir(t, "sdk")
	bin := buildReckon(t)
	store := filepath.Join(t.TempDir(), "issues.json")
	stdio := []string{"--", bin, "mcp-test-server", "--store", store}
	meta := map[string]any{IdempotencyKeyMeta: "run-ts/op-1"}
	args := map[string]any{"title": "Disk full on db-3", "body": "from the TypeScript SDK"}

	first := tsCall(t, npm, stdio, "create_issue", args, meta)
	if first.Server.Name != "reckon-mcp-test-server" || len(first.Tools) != 5 {
		t.Fatalf("server/tools as seen by the TS client: %+v", first)
	}
	if first.Result.IsError || first.Result.StructuredContent["replayed"] != false {
		t.Fatalf("first create_issue: %+v", first.Result)
	}
	id := issueID(first.Result.StructuredContent)
	second := tsCall(t, npm, stdio, "create_issue", args, meta)
	if second.Result.IsError || issueID(second.Result.StructuredContent) != id || second.Result.StructuredContent["replayed"] != true {
		t.Fatalf("retry with the same key in a new server process: %+v, want issue %s replayed", second.Result, id)
	}

	// Same key, different arguments: an error result naming the conflict.
	conflict := tsCall(t, npm, stdio, "create_issue", map[string]any{"title": "something else"}, meta)
	if !conflict.Result.IsError || len(conflict.Result.Content) == 0 || !strings.Contains(conflict.Result.Content[0].Text, "conflict") {
		t.Fatalf("conflict: %+v", conflict.Result)
	}

	// Streamable HTTP, a third server process over the same store.
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	srv := exec.CommandContext(ctx, bin, "mcp-test-server", "--store", store, "--http", "127.0.0.1:0")
	errPipe, err := srv.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { cancel(); _ = srv.Wait() }()
	line, err := bufio.NewReader(errPipe).ReadString('\n')
	if err != nil || !strings.HasPrefix(line, "listening on ") {
		t.Fatalf("HTTP server start: %q %v", line, err)
	}
	url := strings.TrimSpace(strings.TrimPrefix(line, "listening on "))
	third := tsCall(t, npm, []string{"--url", url}, "create_issue", args, meta)
	if third.Result.IsError || issueID(third.Result.StructuredContent) != id {
		t.Fatalf("HTTP retry: %+v", third.Result)
	}
	got := tsCall(t, npm, []string{"--url", url}, "get_issue", map[string]any{"id": id}, nil)
	if got.Result.IsError || got.Result.StructuredContent["title"] != "Disk full on db-3" {
		t.Fatalf("get_issue: %+v", got.Result)
	}

	st, err := OpenStore(store)
	if err != nil {
		t.Fatal(err)
	}
	all, err := st.Issues()
	if err != nil || len(all) != 1 || all[0].ID != id {
		t.Fatalf("store holds %v (%v), want exactly issue %s", all, err, id)
	}
}
