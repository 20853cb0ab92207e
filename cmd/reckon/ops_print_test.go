package main

import (
	"bytes"
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/seed-7bc021c3/reckon/adapter/httpapi"
	"github.com/seed-7bc021c3/reckon/kernel"
)

// TestOpsTablesQuoteControlCharacters: run ids, operation ids, tools and
// sources are written by agents; in `reckon ops list` and `reckon ops
// history` tables a newline in one must not forge a row and an escape
// sequence must not reach the operator's terminal (the attention and
// verdicts tables already quote them with kernel.Printable).
func TestOpsTablesQuoteControlCharacters(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	const (
		run  = "run-1\nFORGED  op-9  run_command  completed"
		op   = "op-1\x1b[2J"
		tool = "mcp__x\x1b]0;pwned\x07"
	)
	ts := time.Date(2026, 11, 30, 10, 0, 0, 0, time.UTC)
	started, _ := kernel.NewEvent("agent\x1b[31m", "e1", "acme", run, kernel.TypeToolStarted, kernel.ActorAgent, ts,
		kernel.ToolStarted{OperationID: op, Tool: tool})
	mux := http.NewServeMux()
	mux.HandleFunc(httpapi.PathOperations, func(w http.ResponseWriter, r *http.Request) {
		httpapi.WriteJSON(w, http.StatusOK, map[string]any{"operations": []map[string]any{{
			"project": "acme", "run_id": run, "operation_id": op, "tool": tool, "state": "crash_window",
			"started_at": ts, "started_key": map[string]string{"source_id": "agent-x", "event_id": "e1"},
		}}, "next_cursor": nil, "degraded": false})
	})
	mux.HandleFunc(httpapi.PathHistory, func(w http.ResponseWriter, r *http.Request) {
		httpapi.WriteJSON(w, http.StatusOK, map[string]any{"events": []kernel.Event{started}})
	})
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	env := func(k string) string {
		return map[string]string{"RECKON_URL": srv.URL, "RECKON_TOKEN": "reader-secret"}[k]
	}
	for _, args := range [][]string{
		{"list", "--project", "acme"},
		{"history", "--project", "acme", "--run", "run-1", "--op", "op-1"},
	} {
		var stdout, stderr bytes.Buffer
		if err := opsMain(ctx, args, &stdout, &stderr, env); err != nil {
			t.Fatalf("reckon ops %q: %v", args, err)
		}
		out := stdout.String()
		if strings.ContainsAny(out, "\x1b\x07") {
			t.Errorf("reckon ops %s: an escape sequence reached the terminal:\n%q", args[0], out)
		}
		for _, line := range strings.Split(out, "\n") {
			if strings.HasPrefix(line, "FORGED") {
				t.Errorf("reckon ops %s: a run id's newline forged a row:\n%s", args[0], out)
			}
		}
	}
}
