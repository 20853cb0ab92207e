//lint:file-ignore SA1019 the test sets the client's log level, which the gateway relays while servers and clients still use it.

package gateway

import (
	"context"
	"strings"
	"sync"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/seed-7bc021c3/reckon/tool/mcptool"
)

// What is not a tools/call passes through unrecorded — a resource read, a
// prompt, a completion — and an upstream's log messages reach the client
// at the level it set: none below it, those at or above it during the call.
func TestResourcesPromptsAndLogsPassThrough(t *testing.T) {
	t.Parallel()
	f := newFixture(t, newSchema(t), Config{Project: "acme", Servers: []mcptool.ServerConfig{stdioConformance("everything")}})
	var mu sync.Mutex
	var logs []string
	cs := f.clientWith(&mcp.ClientOptions{LoggingMessageHandler: func(_ context.Context, req *mcp.LoggingMessageRequest) {
		mu.Lock()
		logs = append(logs, string(req.Params.Level)+" "+req.Params.Data.(string))
		mu.Unlock()
	}})
	ctx := context.Background()

	rr, err := cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: "test://template/7/data"})
	if err != nil || len(rr.Contents) != 1 || !strings.Contains(rr.Contents[0].Text, `"Data for ID: 7"`) {
		t.Fatalf("resources/read through a template: %+v %v", rr, err)
	}
	pr, err := cs.GetPrompt(ctx, &mcp.GetPromptParams{Name: "test_prompt_with_arguments", Arguments: map[string]string{"arg1": "a", "arg2": "b"}})
	if err != nil || len(pr.Messages) != 1 || pr.Messages[0].Content.(*mcp.TextContent).Text != "Prompt with arguments: arg1='a', arg2='b'" {
		t.Fatalf("prompts/get: %+v %v", pr, err)
	}
	cr, err := cs.Complete(ctx, &mcp.CompleteParams{Ref: &mcp.CompleteReference{Type: "ref/prompt", Name: "test_prompt_with_arguments"}, Argument: mcp.CompleteParamsArgument{Name: "arg1", Value: "par"}})
	if err != nil || strings.Join(cr.Completion.Values, ",") != "paris,park,party" {
		t.Fatalf("completion/complete: %+v %v", cr, err)
	}

	if err := cs.SetLoggingLevel(ctx, &mcp.SetLoggingLevelParams{Level: "error"}); err != nil {
		t.Fatal(err)
	}
	callTool(t, cs, "test_tool_with_logging", map[string]any{}, nil)
	if err := cs.SetLoggingLevel(ctx, &mcp.SetLoggingLevelParams{Level: "info"}); err != nil {
		t.Fatal(err)
	}
	callTool(t, cs, "test_tool_with_logging", map[string]any{}, nil)
	waitFor(t, "three log messages", func() bool { mu.Lock(); defer mu.Unlock(); return len(logs) >= 3 })
	mu.Lock()
	got := strings.Join(logs, "; ")
	mu.Unlock()
	if got != "info Tool execution started; info Tool processing data; info Tool execution completed" {
		t.Fatalf("log messages: %s (none while the level was error, three at info)", got)
	}

	if got := strings.Join(summary(events(t, f.pool, "acme")), ", "); got != "run.started, tool.started op-1, tool.completed op-1, tool.started op-2, tool.completed op-2" {
		t.Fatalf("outbox: %s (the reads are not operations)", got)
	}
}
