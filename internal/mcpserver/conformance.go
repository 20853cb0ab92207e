//lint:file-ignore SA1019 the conformance suite's scenarios exercise sampling and logging, which revision 2026-07-28 deprecates.
package mcpserver

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// ConformanceServer is the "server under test" of the official MCP
// conformance suite (`reckon mcp-test-server --conformance`): the tools,
// resources, prompts and completions its server scenarios call, with the
// answers they expect. `make conformance` serves it behind `reckon
// mcp-gateway --http` and runs the suite against the gateway
// (docs/mcp-gateway.md#conformance).
//
// The tools that need the client (sampling, elicitation) ask in the
// multi-round-trip style: they return input requests and answer once the
// call comes back with the responses. The SDK turns that into
// server-to-client requests for clients of protocol revisions before
// 2026-07-28, so the same tools serve both.
func ConformanceServer() *mcp.Server {
	s := mcp.NewServer(&mcp.Implementation{Name: "reckon-mcp-conformance-server", Version: "1"}, &mcp.ServerOptions{
		Instructions:       "The official MCP conformance suite's server scenarios, for testing what sits in front of it.",
		CompletionHandler:  completeArgument,
		SubscribeHandler:   func(context.Context, *mcp.SubscribeRequest) error { return nil },
		UnsubscribeHandler: func(context.Context, *mcp.UnsubscribeRequest) error { return nil },
	})
	addContentTools(s)
	addNotifyingTools(s)
	addClientTools(s)
	addConformanceResources(s)
	addConformancePrompts(s)
	return s
}

// Minimal media the suite asks for: a 1×1 red PNG and a silent WAV.
const (
	pngBase64 = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8DwHwAFBQIAX8jx0gAAAABJRU5ErkJggg=="
	wavBase64 = "UklGRiYAAABXQVZFZm10IBAAAAABAAEAQB8AAAB9AAACABAAZGF0YQIAAAA="
)

func mustDecode(s string) []byte {
	b, err := base64.StdEncoding.DecodeString(s)
	if err != nil {
		panic(err)
	}
	return b
}

var noArgs = json.RawMessage(`{"type":"object"}`)

// fixed serves a tool without arguments that always answers res.
func fixed(s *mcp.Server, name, desc string, res func() *mcp.CallToolResult) {
	s.AddTool(&mcp.Tool{Name: name, Description: desc, InputSchema: noArgs},
		func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) { return res(), nil })
}

func text(s string) *mcp.CallToolResult {
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: s}}}
}

func addContentTools(s *mcp.Server) {
	png, wav := mustDecode(pngBase64), mustDecode(wavBase64)
	fixed(s, "test_simple_text", "Returns one text content block.", func() *mcp.CallToolResult {
		return text("This is a simple text response for testing.")
	})
	fixed(s, "test_image_content", "Returns one PNG image content block.", func() *mcp.CallToolResult {
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.ImageContent{Data: png, MIMEType: "image/png"}}}
	})
	fixed(s, "test_audio_content", "Returns one WAV audio content block.", func() *mcp.CallToolResult {
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.AudioContent{Data: wav, MIMEType: "audio/wav"}}}
	})
	fixed(s, "test_embedded_resource", "Returns one embedded text resource.", func() *mcp.CallToolResult {
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.EmbeddedResource{Resource: &mcp.ResourceContents{
			URI: "test://embedded-resource", MIMEType: "text/plain", Text: "This is an embedded resource content."}}}}
	})
	fixed(s, "test_multiple_content_types", "Returns text, an image and an embedded resource.", func() *mcp.CallToolResult {
		return &mcp.CallToolResult{Content: []mcp.Content{
			&mcp.TextContent{Text: "Multiple content types test:"},
			&mcp.ImageContent{Data: png, MIMEType: "image/png"},
			&mcp.EmbeddedResource{Resource: &mcp.ResourceContents{
				URI: "test://mixed-content-resource", MIMEType: "application/json", Text: `{"test":"data","value":123}`}},
		}}
	})
	s.AddTool(&mcp.Tool{Name: "test_error_handling", Description: "Always answers with an error result.", InputSchema: noArgs},
		func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: "This tool intentionally returns an error for testing"}}}, nil
		})
	s.AddTool(&mcp.Tool{
		Name:        "json_schema_2020_12_tool",
		Description: "Tool with JSON Schema 2020-12 features",
		InputSchema: json.RawMessage(`{
			"$schema": "https://json-schema.org/draft/2020-12/schema",
			"type": "object",
			"$defs": {"address": {"type": "object", "properties": {"street": {"type": "string"}, "city": {"type": "string"}}}},
			"properties": {"name": {"type": "string"}, "address": {"$ref": "#/$defs/address"}},
			"additionalProperties": false
		}`),
	}, func(_ context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return text("JSON Schema 2020-12 tool called with: " + string(req.Params.Arguments)), nil
	})
}

// pause waits d unless ctx ends first.
func pause(ctx context.Context, d time.Duration) error {
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(d):
		return nil
	}
}

func addNotifyingTools(s *mcp.Server) {
	s.AddTool(&mcp.Tool{Name: "test_tool_with_logging", Description: "Sends three info log messages while it runs.", InputSchema: noArgs},
		func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			for i, msg := range []string{"Tool execution started", "Tool processing data", "Tool execution completed"} {
				if i > 0 {
					if err := pause(ctx, 50*time.Millisecond); err != nil {
						return nil, err
					}
				}
				if err := req.Session.Log(ctx, &mcp.LoggingMessageParams{Level: "info", Logger: "conformance", Data: msg}); err != nil {
					return nil, fmt.Errorf("log message: %w", err)
				}
			}
			return text("Tool with logging executed successfully"), nil
		})
	s.AddTool(&mcp.Tool{Name: "test_tool_with_progress", Description: "Reports progress 0, 50 and 100 of 100 to the call's progress token.", InputSchema: noArgs},
		func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			token := req.Params.GetProgressToken()
			for i, p := range []float64{0, 50, 100} {
				if i > 0 {
					if err := pause(ctx, 50*time.Millisecond); err != nil {
						return nil, err
					}
				}
				if token != nil {
					if err := req.Session.NotifyProgress(ctx, &mcp.ProgressNotificationParams{ProgressToken: token, Progress: p, Total: 100}); err != nil {
						return nil, fmt.Errorf("progress: %w", err)
					}
				}
			}
			return text(fmt.Sprint(token)), nil
		})
	s.AddTool(&mcp.Tool{Name: "test_reconnection", Description: "Closes the call's event stream mid-call (SEP-1699), then answers.", InputSchema: noArgs},
		func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			if req.Extra != nil && req.Extra.CloseSSEStream != nil {
				req.Extra.CloseSSEStream(mcp.CloseSSEStreamArgs{RetryAfter: 10 * time.Millisecond})
			}
			if err := pause(ctx, 100*time.Millisecond); err != nil {
				return nil, err
			}
			return text("Reconnection test completed successfully."), nil
		})
}

// askClient returns the client's answer to input request id of this call,
// or, when the call does not carry it yet, the result that asks for it.
func askClient(req *mcp.CallToolRequest, id string, ir mcp.InputRequest) (mcp.InputResponse, *mcp.CallToolResult) {
	if r, ok := req.Params.InputResponses[id]; ok && r != nil {
		return r, nil
	}
	return nil, &mcp.CallToolResult{InputRequests: mcp.InputRequestMap{id: ir}, RequestState: id}
}

func elicitation(req *mcp.CallToolRequest, p *mcp.ElicitParams) (*mcp.ElicitResult, *mcp.CallToolResult, error) {
	r, ask := askClient(req, "elicit", p)
	if ask != nil {
		return nil, ask, nil
	}
	er, ok := r.(*mcp.ElicitResult)
	if !ok {
		return nil, nil, fmt.Errorf("elicitation: the client answered with %T", r)
	}
	return er, nil, nil
}

func elicitationText(er *mcp.ElicitResult) string {
	b, _ := json.Marshal(er.Content)
	return fmt.Sprintf("User response: action=%s, content=%s", er.Action, b)
}

// elicitTool serves a tool that elicits p (message from its "message"
// argument when the schema has one) and answers with the response.
func elicitTool(s *mcp.Server, name, desc string, schema json.RawMessage, p func(args map[string]any) *mcp.ElicitParams) {
	s.AddTool(&mcp.Tool{Name: name, Description: desc, InputSchema: schema},
		func(_ context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			var args map[string]any
			_ = json.Unmarshal(req.Params.Arguments, &args)
			er, ask, err := elicitation(req, p(args))
			if ask != nil || err != nil {
				return ask, err
			}
			return text(elicitationText(er)), nil
		})
}

func addClientTools(s *mcp.Server) {
	s.AddTool(&mcp.Tool{
		Name: "test_sampling", Description: "Asks the client's model (sampling/createMessage) and answers with its reply.",
		InputSchema: json.RawMessage(`{"type":"object","properties":{"prompt":{"type":"string","description":"The prompt to send to the LLM"}},"required":["prompt"]}`),
	}, func(_ context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		var in struct {
			Prompt string `json:"prompt"`
		}
		_ = json.Unmarshal(req.Params.Arguments, &in)
		r, ask := askClient(req, "sample", &mcp.CreateMessageParams{
			Messages:  []*mcp.SamplingMessage{{Role: "user", Content: &mcp.TextContent{Text: in.Prompt}}},
			MaxTokens: 100,
		})
		if ask != nil {
			return ask, nil
		}
		var content []mcp.Content
		switch m := r.(type) {
		case *mcp.CreateMessageWithToolsResult:
			content = m.Content
		case *mcp.CreateMessageResult:
			content = []mcp.Content{m.Content}
		default:
			return nil, fmt.Errorf("sampling: the client answered with %T", r)
		}
		reply := "(non-text response)"
		if len(content) > 0 {
			if tc, ok := content[0].(*mcp.TextContent); ok {
				reply = tc.Text
			}
		}
		return text("LLM response: " + reply), nil
	})
	elicitTool(s, "test_elicitation", "Asks the user (elicitation/create) for a username and an email.",
		json.RawMessage(`{"type":"object","properties":{"message":{"type":"string","description":"The message to show the user"}},"required":["message"]}`),
		func(args map[string]any) *mcp.ElicitParams {
			msg, _ := args["message"].(string)
			return &mcp.ElicitParams{Message: msg, RequestedSchema: map[string]any{
				"type": "object",
				"properties": map[string]any{
					"username": map[string]any{"type": "string", "description": "User's response"},
					"email":    map[string]any{"type": "string", "description": "User's email address"},
				},
				"required": []string{"username", "email"},
			}}
		})
	elicitTool(s, "test_elicitation_sep1034_defaults", "Elicits a form whose every primitive field has a default (SEP-1034).", noArgs,
		func(map[string]any) *mcp.ElicitParams {
			return &mcp.ElicitParams{Message: "Test defaults for primitives", RequestedSchema: map[string]any{
				"type": "object",
				"properties": map[string]any{
					"name":     map[string]any{"type": "string", "description": "User name", "default": "John Doe"},
					"age":      map[string]any{"type": "integer", "description": "User age", "default": 30},
					"score":    map[string]any{"type": "number", "description": "User score", "default": 95.5},
					"status":   map[string]any{"type": "string", "description": "User status", "enum": []string{"active", "inactive", "pending"}, "default": "active"},
					"verified": map[string]any{"type": "boolean", "description": "Verification status", "default": true},
				},
			}}
		})
	titled := []map[string]any{{"const": "value1", "title": "First Option"}, {"const": "value2", "title": "Second Option"}, {"const": "value3", "title": "Third Option"}}
	elicitTool(s, "test_elicitation_sep1330_enums", "Elicits a form with the five enum variants of SEP-1330.", noArgs,
		func(map[string]any) *mcp.ElicitParams {
			return &mcp.ElicitParams{Message: "Test enum schemas", RequestedSchema: map[string]any{
				"type": "object",
				"properties": map[string]any{
					"untitledSingle": map[string]any{"type": "string", "enum": []string{"option1", "option2", "option3"}},
					"titledSingle":   map[string]any{"type": "string", "oneOf": titled},
					"legacyEnum":     map[string]any{"type": "string", "enum": []string{"opt1", "opt2", "opt3"}, "enumNames": []string{"Option One", "Option Two", "Option Three"}},
					"untitledMulti":  map[string]any{"type": "array", "minItems": 1, "maxItems": 3, "items": map[string]any{"type": "string", "enum": []string{"option1", "option2", "option3"}}},
					// Titled multi-select items carry no "type": the SDK checks
					// the client's answer against the schema and refuses items
					// that have both.
					"titledMulti": map[string]any{"type": "array", "minItems": 1, "maxItems": 3, "items": map[string]any{"anyOf": titled}},
				},
			}}
		})
}

const watchedResource = "test://watched-resource"

func addConformanceResources(s *mcp.Server) {
	png := mustDecode(pngBase64)
	static := func(uri, name, desc, mime string, c *mcp.ResourceContents) {
		s.AddResource(&mcp.Resource{URI: uri, Name: name, Description: desc, MIMEType: mime},
			func(context.Context, *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
				cc := *c
				cc.URI, cc.MIMEType = uri, mime
				return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{&cc}}, nil
			})
	}
	static("test://static-text", "static-text", "A static text resource", "text/plain",
		&mcp.ResourceContents{Text: "This is the content of the static text resource."})
	static("test://static-binary", "static-binary", "A static binary resource (a PNG image)", "image/png",
		&mcp.ResourceContents{Blob: png})
	static(watchedResource, "watched-resource", "A resource clients may subscribe to", "text/plain",
		&mcp.ResourceContents{Text: "Watched resource content"})
	s.AddResourceTemplate(&mcp.ResourceTemplate{
		URITemplate: "test://template/{id}/data", Name: "template", Description: "Data of one id", MIMEType: "application/json",
	}, func(_ context.Context, req *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
		id := strings.TrimSuffix(strings.TrimPrefix(req.Params.URI, "test://template/"), "/data")
		b, _ := json.Marshal(map[string]any{"id": id, "templateTest": true, "data": "Data for ID: " + id})
		return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{{URI: req.Params.URI, MIMEType: "application/json", Text: string(b)}}}, nil
	})
}

func addConformancePrompts(s *mcp.Server) {
	s.AddPrompt(&mcp.Prompt{Name: "test_simple_prompt", Description: "A prompt without arguments"},
		func(context.Context, *mcp.GetPromptRequest) (*mcp.GetPromptResult, error) {
			return &mcp.GetPromptResult{Messages: []*mcp.PromptMessage{{Role: "user", Content: &mcp.TextContent{Text: "This is a simple prompt for testing."}}}}, nil
		})
	s.AddPrompt(&mcp.Prompt{Name: "test_prompt_with_arguments", Description: "A prompt with two required arguments",
		Arguments: []*mcp.PromptArgument{{Name: "arg1", Description: "First test argument", Required: true}, {Name: "arg2", Description: "Second test argument", Required: true}}},
		func(_ context.Context, req *mcp.GetPromptRequest) (*mcp.GetPromptResult, error) {
			a := req.Params.Arguments
			return &mcp.GetPromptResult{Messages: []*mcp.PromptMessage{{Role: "user", Content: &mcp.TextContent{
				Text: fmt.Sprintf("Prompt with arguments: arg1='%s', arg2='%s'", a["arg1"], a["arg2"])}}}}, nil
		})
	s.AddPrompt(&mcp.Prompt{Name: "test_prompt_with_embedded_resource", Description: "A prompt embedding a resource",
		Arguments: []*mcp.PromptArgument{{Name: "resourceUri", Description: "URI of the resource to embed", Required: true}}},
		func(_ context.Context, req *mcp.GetPromptRequest) (*mcp.GetPromptResult, error) {
			return &mcp.GetPromptResult{Messages: []*mcp.PromptMessage{
				{Role: "user", Content: &mcp.EmbeddedResource{Resource: &mcp.ResourceContents{
					URI: req.Params.Arguments["resourceUri"], MIMEType: "text/plain", Text: "Embedded resource content for testing."}}},
				{Role: "user", Content: &mcp.TextContent{Text: "Please process the embedded resource above."}},
			}}, nil
		})
	s.AddPrompt(&mcp.Prompt{Name: "test_prompt_with_image", Description: "A prompt with an image"},
		func(context.Context, *mcp.GetPromptRequest) (*mcp.GetPromptResult, error) {
			return &mcp.GetPromptResult{Messages: []*mcp.PromptMessage{
				{Role: "user", Content: &mcp.ImageContent{Data: mustDecode(pngBase64), MIMEType: "image/png"}},
				{Role: "user", Content: &mcp.TextContent{Text: "Please analyze the image above."}},
			}}, nil
		})
}

// completeArgument suggests values of test_prompt_with_arguments' arguments
// that start with what the client typed.
func completeArgument(_ context.Context, req *mcp.CompleteRequest) (*mcp.CompleteResult, error) {
	if req.Params.Ref == nil || req.Params.Ref.Type != "ref/prompt" || req.Params.Ref.Name != "test_prompt_with_arguments" {
		return nil, errors.New("completions are offered for the arguments of prompt test_prompt_with_arguments only")
	}
	var values []string
	for _, v := range []string{"paris", "park", "party", "test", "testValue1"} {
		if strings.HasPrefix(v, req.Params.Argument.Value) {
			values = append(values, v)
		}
	}
	if values == nil {
		values = []string{}
	}
	return &mcp.CompleteResult{Completion: mcp.CompletionResultDetails{Values: values, Total: len(values)}}, nil
}
