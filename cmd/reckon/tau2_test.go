package main

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/seed-7bc021c3/reckon/kernel"
	"github.com/seed-7bc021c3/reckon/tool/mcptool"
)

// TestTau2ServerOverStdio: `reckon tau2-server` started per call, as
// reckon's MCP client starts a stdio server, keeps one database across
// calls in --db, copied from --init at the first.
func TestTau2ServerOverStdio(t *testing.T) {
	t.Parallel()
	db := filepath.Join(t.TempDir(), "db.json")
	ts, err := mcptool.New([]mcptool.ServerConfig{{Name: "retail", Command: []string{os.Args[0], "tau2-server", "--db", db,
		"--init", filepath.Join("..", "..", "testdata", "tau2", "db.json")}, Env: map[string]string{execMainEnv: "1"}}}, mcptool.Config{})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	call := func(tool string, args map[string]any) string {
		t.Helper()
		tl, ok := ts.Lookup("mcp__" + tool)
		if !ok {
			t.Fatalf("no tool %s", tool)
		}
		raw, _ := json.Marshal(args)
		res, err := tl.Execute(ctx, kernel.ToolCall{Project: "p", RunID: "r", OperationID: tool, Tool: "mcp__" + tool, Args: raw, Workspace: t.TempDir()})
		if err != nil {
			t.Fatalf("%s: %v", tool, err)
		}
		return res.Summary
	}
	call("cancel_pending_order", map[string]any{"order_id": "#W0000001", "reason": "no longer needed"})
	if got := call("get_order_details", map[string]any{"order_id": "#W0000001"}); !strings.Contains(got, `"cancel_reason":"no longer needed"`) {
		t.Fatalf("the next process does not see the cancel: %s", got)
	}
	if _, err := os.Stat(db); err != nil {
		t.Fatalf("--db not written: %v", err)
	}
}
