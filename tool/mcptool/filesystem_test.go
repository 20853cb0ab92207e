package mcptool

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/seed-7bc021c3/reckon/internal/npmtest"
	"github.com/seed-7bc021c3/reckon/kernel"
)

// filesystemServer configures @modelcontextprotocol/server-filesystem (the
// pinned npm package in testdata/npm) rooted at each call's workspace.
func filesystemServer(t *testing.T) ServerConfig {
	t.Helper()
	return ServerConfig{Name: "fs", Command: []string{"node", npmtest.Entry(t, "server-filesystem"), "{workspace}"}}
}

// A real third-party MCP server driven by our client: write_file into the
// run's workspace.
func TestFilesystemServerPeer(t *testing.T) {
	t.Parallel()
	ts, err := New([]ServerConfig{filesystemServer(t)}, Config{})
	if err != nil {
		t.Fatal(err)
	}
	tool, ok := ts.Lookup("mcp__write_file") // discovery via tools/list
	if !ok {
		t.Fatal("server-filesystem offers no write_file")
	}
	ws, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	target := filepath.Join(ws, "notes", "..", "proof.txt")
	call := kernel.ToolCall{Project: "acme", RunID: "run-fs", OperationID: "op-1", Tool: tool.Name(),
		Args: json.RawMessage(`{"path":` + quote(target) + `,"content":"written through MCP\n"}`), Workspace: ws}
	if err := tool.Validate(call); err != nil {
		t.Fatal(err)
	}
	res, err := tool.Execute(context.Background(), call)
	if err != nil {
		t.Fatalf("write_file: %v", err)
	}
	b, err := os.ReadFile(filepath.Join(ws, "proof.txt"))
	if err != nil || string(b) != "written through MCP\n" {
		t.Fatalf("file after write_file: %q %v (result %+v)", b, err, res)
	}

	// Outside the workspace the server refuses with an error result; the
	// kernel cannot know more than "the server said no after the call was
	// sent", so it is uncertain.
	outside := filepath.Join(t.TempDir(), "escape.txt")
	call.OperationID = "op-2"
	call.Args = json.RawMessage(`{"path":` + quote(outside) + `,"content":"x"}`)
	_, err = tool.Execute(context.Background(), call)
	wantClass(t, err, ErrorTypeErrorResult, kernel.EffectUncertain)
	if _, statErr := os.Stat(outside); statErr == nil {
		t.Fatal("server-filesystem wrote outside the workspace")
	}

	// Missing content fails the server's input schema before sending.
	call.OperationID = "op-3"
	call.Args = json.RawMessage(`{"path":` + quote(filepath.Join(ws, "x.txt")) + `}`)
	_, err = tool.Execute(context.Background(), call)
	wantClass(t, err, kernel.ErrorTypeValidation, kernel.EffectNone)
	if _, statErr := os.Stat(filepath.Join(ws, "x.txt")); statErr == nil {
		t.Fatal("a rejected write_file wrote a file")
	}
}

func quote(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}
