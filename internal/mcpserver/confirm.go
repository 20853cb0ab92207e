package mcpserver

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// addConfirmedCreate serves create_issue_confirmed: create_issue once the
// user has confirmed it (elicitation), the way servers ask a person before
// a consequential action. Declined or canceled, it creates nothing and
// says so in a plain (not error) result. It asks in the multi-round-trip
// style, which the SDK turns into an elicitation/create request for
// clients of earlier protocol revisions.
func addConfirmedCreate(s *mcp.Server, store *Store) {
	s.AddTool(&mcp.Tool{
		Name: "create_issue_confirmed",
		Description: "Ask the user to confirm (elicitation), then create an issue as create_issue does, idempotent by params._meta[\"" +
			IdempotencyKeyMeta + "\"]. Declined: nothing is created.",
		InputSchema: json.RawMessage(`{"type":"object","properties":{"title":{"type":"string","description":"the issue title (non-empty)"},"body":{"type":"string","description":"the issue body"}},"required":["title"]}`),
	}, func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		var in CreateIssueArgs
		if err := json.Unmarshal(req.Params.Arguments, &in); err != nil {
			return nil, fmt.Errorf("arguments: %w", err)
		}
		er, ask, err := elicitation(req, &mcp.ElicitParams{
			Message: fmt.Sprintf("Create issue %q?", in.Title),
			RequestedSchema: map[string]any{"type": "object", "properties": map[string]any{
				"note": map[string]any{"type": "string", "description": "an optional note"},
			}},
		})
		if ask != nil || err != nil {
			return ask, err
		}
		if er.Action != "accept" {
			return text("not created: the user answered " + er.Action), nil
		}
		_, out, err := createIssue(ctx, store, "create_issue_confirmed", req, in.Title, in.Body, 0)
		if err != nil {
			return nil, err
		}
		b, _ := json.Marshal(out)
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: string(b)}}, StructuredContent: out}, nil
	})
}
