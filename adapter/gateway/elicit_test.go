package gateway

import (
	"context"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/seed-7bc021c3/reckon/internal/mcpserver"
	"github.com/seed-7bc021c3/reckon/kernel"
	"github.com/seed-7bc021c3/reckon/tool/mcptool"
)

// An upstream asks the person to confirm a write before it acts
// (create_issue_confirmed elicits). Through the gateway the client is
// asked within the call. Accepted: one operation, completed, and the issue
// exists once, under the operation's key. Declined: the client gets the
// upstream's own answer, nothing is created, and it is still one operation
// — no second tools/call, no duplicate. The terminal events name what the
// client was asked and answered. Over both upstream links: stdio, where
// the upstream speaks 2026-07-28 and asks in its call result, and HTTP,
// where it stays on 2025-11-25 and sends elicitation/create itself.
func TestElicitedConfirmationBeforeWrite(t *testing.T) {
	t.Parallel()
	for _, link := range []string{"stdio", "http"} {
		t.Run(link, func(t *testing.T) {
			t.Parallel()
			var cfg mcptool.ServerConfig
			var store *mcpserver.Store
			if link == "stdio" {
				path := filepath.Join(t.TempDir(), "issues.json")
				cfg = stdioIssues("issues", path)
				var err error
				if store, err = mcpserver.OpenStore(path); err != nil {
					t.Fatal(err)
				}
			} else {
				up := newHTTPIssues(t)
				cfg, store = up.config("issues"), up.store
			}
			f := newFixture(t, newSchema(t), Config{Project: "acme", Servers: []mcptool.ServerConfig{cfg}})

			var mu sync.Mutex
			answer, asked := "", []string{}
			cs := f.clientWith(&mcp.ClientOptions{ElicitationHandler: func(_ context.Context, req *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
				mu.Lock()
				defer mu.Unlock()
				asked = append(asked, req.Params.Message)
				return &mcp.ElicitResult{Action: answer}, nil
			}})
			answer = "accept"
			res := callTool(t, cs, "create_issue_confirmed", map[string]any{"title": "Rotate keys"}, nil)
			if iss, _ := structured(t, res)["issue"].(map[string]any); res.IsError || iss["title"] != "Rotate keys" {
				t.Fatalf("accepted: %+v", res)
			}
			mu.Lock()
			answer = "decline"
			mu.Unlock()
			res = callTool(t, cs, "create_issue_confirmed", map[string]any{"title": "Drop the table"}, nil)
			if res.IsError || mcptool.ContentText(res.Content) != "not created: the user answered decline" {
				t.Fatalf("declined: the client got %+v, want the upstream's answer", res)
			}
			if want := []string{`Create issue "Rotate keys"?`, `Create issue "Drop the table"?`}; !reflect.DeepEqual(asked, want) {
				t.Fatalf("the client was asked %q, want %q", asked, want)
			}

			rows := events(t, f.pool, "acme")
			if got := strings.Join(summary(rows), ", "); got != "run.started, tool.started op-1, tool.completed op-1, tool.started op-2, tool.completed op-2" {
				t.Fatalf("outbox: %s", got)
			}
			for i, want := range map[int]string{2: "accept", 4: "decline"} {
				var d kernel.ToolCompleted
				if err := rows[i].DecodeData(&d); err != nil {
					t.Fatal(err)
				}
				if exp := []string{"elicitation/create: " + want}; !reflect.DeepEqual(d.ClientRequests, exp) {
					t.Errorf("%s client_requests %+v, want %+v", d.OperationID, d.ClientRequests, exp)
				}
			}
			all, err := store.Issues()
			if err != nil {
				t.Fatal(err)
			}
			key := mcptool.IdempotencyKey("acme", rows[0].RunID, "op-1")
			if len(all) != 1 || all[0].Title != "Rotate keys" || all[0].IdempotencyKey != key {
				t.Fatalf("the upstream holds %+v, want one issue under %s", all, key)
			}
		})
	}
}
