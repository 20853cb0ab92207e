package mcpserver

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/seed-7bc021c3/reckon/tool/mcptool"
)

func connectInMemory(t *testing.T, store *Store) *mcp.ClientSession {
	t.Helper()
	ctx := context.Background()
	st, ct := mcp.NewInMemoryTransports()
	ss, err := NewServer(store).Connect(ctx, st, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ss.Close() })
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "test"}, nil).Connect(ctx, ct, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cs.Close() })
	return cs
}

func call(t *testing.T, cs *mcp.ClientSession, tool string, args any, key string) (*mcp.CallToolResult, map[string]any) {
	t.Helper()
	p := &mcp.CallToolParams{Name: tool, Arguments: args}
	if key != "" {
		p.Meta = mcp.Meta{IdempotencyKeyMeta: key}
	}
	res, err := cs.CallTool(context.Background(), p)
	if err != nil {
		t.Fatalf("%s: %v", tool, err)
	}
	var out map[string]any
	if res.StructuredContent != nil {
		b, _ := json.Marshal(res.StructuredContent)
		_ = json.Unmarshal(b, &out)
	}
	return res, out
}

func issueID(out map[string]any) string {
	iss, _ := out["issue"].(map[string]any)
	id, _ := iss["id"].(string)
	return id
}

func TestServerTools(t *testing.T) {
	t.Parallel()
	store := newStore(t)
	cs := connectInMemory(t, store)

	res, out := call(t, cs, "create_issue", map[string]any{"title": "Disk full"}, "op-1")
	if res.IsError || issueID(out) == "" || out["replayed"] != false {
		t.Fatalf("create: %s %v", mcptool.ContentText(res.Content), out)
	}
	id := issueID(out)
	res, out = call(t, cs, "create_issue", map[string]any{"title": "Disk full"}, "op-1")
	if res.IsError || issueID(out) != id || out["replayed"] != true {
		t.Fatalf("retry: %s %v", mcptool.ContentText(res.Content), out)
	}
	res, _ = call(t, cs, "create_issue", map[string]any{"title": "Other"}, "op-1")
	if !res.IsError || !strings.Contains(mcptool.ContentText(res.Content), "conflict") || !strings.Contains(mcptool.ContentText(res.Content), "op-1") {
		t.Fatalf("conflict: isError=%v %s", res.IsError, mcptool.ContentText(res.Content))
	}
	res, out = call(t, cs, "get_issue", map[string]any{"id": id}, "")
	if res.IsError || out["title"] != "Disk full" {
		t.Fatalf("get_issue: %s", mcptool.ContentText(res.Content))
	}
	res, _ = call(t, cs, "get_issue", map[string]any{"id": "ISS-404"}, "")
	if !res.IsError {
		t.Fatalf("get_issue of an unknown id must be an error result: %s", mcptool.ContentText(res.Content))
	}
	res, out = call(t, cs, "lookup_operation", map[string]any{"key": "op-1"}, "")
	if res.IsError || out["status"] != "completed" || issueID(out) != id {
		t.Fatalf("lookup_operation: %s", mcptool.ContentText(res.Content))
	}
	res, out = call(t, cs, "lookup_operation", map[string]any{"key": "op-2"}, "")
	if res.IsError || out["status"] != "never_seen" {
		t.Fatalf("lookup_operation unknown: %s", mcptool.ContentText(res.Content))
	}
	res, _ = call(t, cs, "create_issue", map[string]any{"title": "  "}, "op-3")
	if !res.IsError {
		t.Fatalf("blank title accepted: %s", mcptool.ContentText(res.Content))
	}
	res, _ = call(t, cs, "create_issue", map[string]any{"body": "no title"}, "op-4")
	if !res.IsError {
		t.Fatalf("missing title accepted: %s", mcptool.ContentText(res.Content))
	}
	// A non-string key is refused, not silently ignored.
	r, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "create_issue",
		Arguments: map[string]any{"title": "x"}, Meta: mcp.Meta{IdempotencyKeyMeta: 42}})
	if err != nil || !r.IsError || !strings.Contains(mcptool.ContentText(r.Content), IdempotencyKeyMeta) {
		t.Fatalf("numeric key: %v %v", err, r)
	}
	all, _ := store.Issues()
	if len(all) != 1 {
		t.Fatalf("issues = %d, want 1", len(all))
	}
}

// Main --http serves streamable HTTP; the store is shared with stdio users.
func TestMainHTTP(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(context.Background())
	path := filepath.Join(t.TempDir(), "issues.json")
	pr, pw := io.Pipe()
	done := make(chan error, 1)
	go func() {
		done <- Main(ctx, []string{"--store", path, "--http", "127.0.0.1:0"}, nil, nil, pw)
		pw.Close()
	}()
	line, err := bufio.NewReader(pr).ReadString('\n')
	if err != nil {
		t.Fatalf("no listening line: %v", err)
	}
	go io.Copy(io.Discard, pr)
	url := strings.TrimSpace(strings.TrimPrefix(line, "listening on "))
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "test"}, nil).Connect(ctx, &mcp.StreamableClientTransport{Endpoint: url}, nil)
	if err != nil {
		t.Fatalf("connect %s: %v", url, err)
	}
	_, a := call(t, cs, "create_issue", map[string]any{"title": "via http"}, "op-h")
	cs.Close()
	cs, err = mcp.NewClient(&mcp.Implementation{Name: "test"}, nil).Connect(ctx, &mcp.StreamableClientTransport{Endpoint: url}, nil)
	if err != nil {
		t.Fatal(err)
	}
	_, b := call(t, cs, "create_issue", map[string]any{"title": "via http"}, "op-h")
	cs.Close()
	if issueID(a) == "" || issueID(a) != issueID(b) || b["replayed"] != true {
		t.Fatalf("http retry: %v then %v", a, b)
	}
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("Main: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Main did not stop")
	}
}

func TestHandlerServesHTTP(t *testing.T) {
	t.Parallel()
	hs := httptest.NewServer(Handler(NewServer(newStore(t))))
	defer hs.Close()
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "test"}, nil).Connect(context.Background(), &mcp.StreamableClientTransport{Endpoint: hs.URL + HTTPPath}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	res, out := call(t, cs, "lookup_operation", map[string]any{"key": "nope"}, "")
	if res.IsError || out["status"] != "never_seen" {
		t.Fatalf("%s", mcptool.ContentText(res.Content))
	}
}

func TestMainFlags(t *testing.T) {
	t.Parallel()
	if err := Main(context.Background(), []string{"extra"}, nil, nil, io.Discard); err == nil {
		t.Fatal("extra argument accepted")
	}
	if got := DefaultStorePath(func(string) string { return "/d" }); got != "/d/mcp-test-server/issues.json" {
		t.Fatalf("DefaultStorePath = %s", got)
	}
}

// slow_create_issue stores the issue and its key before its wait: a
// lookup during the wait already answers completed, and a key used with
// slow_create_issue is bound to it.
func TestSlowCreateIssue(t *testing.T) {
	t.Parallel()
	store := newStore(t)
	cs := connectInMemory(t, store)
	done := make(chan map[string]any, 1)
	go func() {
		_, out := call(t, cs, "slow_create_issue", map[string]any{"title": "slow", "delay_ms": 2000}, "k-slow")
		done <- out
	}()
	deadline := time.Now().Add(10 * time.Second)
	for {
		_, out := call(t, cs, "lookup_operation", map[string]any{"key": "k-slow"}, "")
		if out["status"] == "completed" {
			if out["tool"] != "slow_create_issue" {
				t.Fatalf("lookup during the wait: %v", out)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the key was never stored")
		}
		time.Sleep(20 * time.Millisecond)
	}
	select {
	case out := <-done:
		t.Fatalf("answered before its delay: %v", out)
	default:
	}
	if out := <-done; issueID(out) == "" || out["replayed"] != false {
		t.Fatalf("slow_create_issue: %v", out)
	}
	res, _ := call(t, cs, "create_issue", map[string]any{"title": "slow"}, "k-slow")
	if !res.IsError || !strings.Contains(mcptool.ContentText(res.Content), "slow_create_issue") {
		t.Fatalf("key reused by another tool: %s", mcptool.ContentText(res.Content))
	}
	res, _ = call(t, cs, "slow_create_issue", map[string]any{"title": "x", "delay_ms": -1}, "k-neg")
	if !res.IsError {
		t.Fatal("negative delay accepted")
	}
}
