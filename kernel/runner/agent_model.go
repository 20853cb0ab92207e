package runner

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"slices"
	"strings"
	"sync"

	openai "github.com/sashabaranov/go-openai"
	"go.temporal.io/sdk/temporal"

	"github.com/seed-7bc021c3/reckon/kernel"
	"github.com/seed-7bc021c3/reckon/kernel/plan"
)

// AgentModel is the OpenAI-compatible chat-completions endpoint a worker
// asks for agent runs' model turns (RECKON_AGENT_BASE_URL,
// RECKON_AGENT_API_KEY; RECKON_AGENT_MODEL is the starter's default model
// name, carried in each run's input).
type AgentModel struct {
	BaseURL string
	APIKey  string
	// HTTPClient, when set, makes the requests (tests).
	HTTPClient *http.Client

	once   sync.Once
	client *openai.Client
}

func (m *AgentModel) openai() *openai.Client {
	m.once.Do(func() {
		c := openai.DefaultConfig(m.APIKey)
		c.BaseURL = strings.TrimRight(m.BaseURL, "/")
		if m.HTTPClient != nil {
			c.HTTPClient = m.HTTPClient
		}
		m.client = openai.NewClientWithConfig(c)
	})
	return m.client
}

// Chat roles of an agent's conversation.
const (
	roleSystem    = "system"
	roleUser      = "user"
	roleAssistant = "assistant"
	roleTool      = "tool"
)

// ChatMessage is one message of an agent's conversation as the workflow
// keeps it (its JSON is part of recorded histories).
type ChatMessage struct {
	Role       string      `json:"role"`
	Content    string      `json:"content,omitempty"`
	ToolCallID string      `json:"tool_call_id,omitempty"`
	ToolCalls  []ModelCall `json:"tool_calls,omitempty"`
}

// ModelCall is one tool call a model asked for.
type ModelCall struct {
	ID        string `json:"id"`
	Name      string `json:"name"`
	Arguments string `json:"arguments"`
}

// TurnInput is one model turn of an agent run.
type TurnInput struct {
	Project string `json:"project"`
	RunID   string `json:"run_id"`
	Turn    int    `json:"turn"`
	Model   string `json:"model"`
	// Workspace is where the arguments of workspace tools are judged.
	Workspace string        `json:"workspace"`
	Tools     []string      `json:"tools"`
	Messages  []ChatMessage `json:"messages"`
}

// TurnOutput is the model's answer to a turn: a text, or tool calls, each
// with the reason it must not start ("" for a call whose tool is offered
// and whose arguments its tool accepts), judged here, before any
// tool.started.
type TurnOutput struct {
	Model   string      `json:"model,omitempty"`
	Content string      `json:"content,omitempty"`
	Calls   []ModelCall `json:"calls,omitempty"`
	Invalid []string    `json:"invalid,omitempty"`
}

// errTypeModel is the error type of a model turn the endpoint refused
// (a 4xx other than 429): asking again gets the same answer.
const errTypeModel = "model_refused"

// delegateSpec is delegate as a kernel agent's model is offered it: a
// child agent run with its own instructions and input, the same tools.
var delegateSpec = kernel.ToolSpec{
	Description: "Delegate a sub-task to a child agent run with its own instructions and input; the answer is the child's final answer.",
	Parameters: json.RawMessage(`{"type":"object","properties":{` +
		`"instructions":{"type":"string","description":"the child's instructions"},` +
		`"input":{"type":"string","description":"the child's task"}},` +
		`"required":["input"],"additionalProperties":false}`),
}

// DelegateArgs are the arguments of an agent's delegate call.
type DelegateArgs struct {
	Instructions string `json:"instructions,omitempty"`
	Input        string `json:"input"`
}

// ModelTurn asks the model for its next answer. It has no side effect
// beyond cost, so Temporal retries it; a 4xx other than 429 is not
// retried. The arguments of each tool call are judged against its tool
// (the tool's own Validate, which checks its schema) before anything
// starts.
func (a *Activities) ModelTurn(ctx context.Context, in TurnInput) (TurnOutput, error) {
	if a.Model == nil || a.Model.BaseURL == "" {
		return TurnOutput{}, temporal.NewNonRetryableApplicationError(
			"this worker has no agent model (RECKON_AGENT_BASE_URL is unset)", errTypeModel, nil)
	}
	// A model may think for minutes: the heartbeat, not the start-to-close
	// bound, notices a lost worker, and the turn is asked again elsewhere.
	defer heartbeat(ctx)()
	req := openai.ChatCompletionRequest{Model: in.Model, Messages: toOpenAI(in.Messages)}
	for _, name := range in.Tools {
		spec := a.toolSpec(name)
		req.Tools = append(req.Tools, openai.Tool{Type: openai.ToolTypeFunction, Function: &openai.FunctionDefinition{
			Name: name, Description: spec.Description, Parameters: spec.Parameters,
		}})
	}
	resp, err := a.Model.openai().CreateChatCompletion(ctx, req)
	if err != nil {
		var apiErr *openai.APIError
		if errors.As(err, &apiErr) && apiErr.HTTPStatusCode >= 400 && apiErr.HTTPStatusCode < 500 && apiErr.HTTPStatusCode != 429 {
			return TurnOutput{}, temporal.NewNonRetryableApplicationError(fmt.Sprintf("model %s refused turn %d: %v", in.Model, in.Turn, err), errTypeModel, err)
		}
		return TurnOutput{}, fmt.Errorf("model %s, turn %d: %w", in.Model, in.Turn, err)
	}
	if len(resp.Choices) == 0 {
		return TurnOutput{}, fmt.Errorf("model %s, turn %d: an answer without choices", in.Model, in.Turn)
	}
	msg := resp.Choices[0].Message
	out := TurnOutput{Model: resp.Model, Content: msg.Content}
	for i, c := range msg.ToolCalls {
		out.Calls = append(out.Calls, ModelCall{ID: callID(in.Turn, i, c.ID), Name: c.Function.Name, Arguments: c.Function.Arguments})
		out.Invalid = append(out.Invalid, a.judgeCall(in, c.Function.Name, c.Function.Arguments))
	}
	return out, nil
}

// callID is the id of call i of turn's answer: the model's own, or, from
// a server that sends none, one of the turn and the call's place, so that
// two calls without an id are never taken for the same call.
func callID(turn, i int, id string) string {
	if id != "" {
		return id
	}
	return fmt.Sprintf("reckon_t%d_%d", turn, i+1)
}

// toolSpec is how tool name is offered to the model.
func (a *Activities) toolSpec(name string) kernel.ToolSpec {
	if name == kernel.DelegateTool {
		return delegateSpec
	}
	open := kernel.ToolSpec{Parameters: json.RawMessage(`{"type":"object"}`)}
	t, ok := a.Tools.Lookup(name)
	if !ok {
		return open
	}
	if d, ok := t.(kernel.Described); ok {
		return d.Describe()
	}
	return open
}

// judgeCall is why a tool call of the model must not start, "" when it
// may: the tool must be one the run offers, its arguments a JSON object
// its tool's Validate accepts (no side effect by contract).
func (a *Activities) judgeCall(in TurnInput, name, args string) string {
	if !slices.Contains(in.Tools, name) {
		return fmt.Sprintf("tool %q is not offered to this agent (offered: %s); nothing ran", name, strings.Join(in.Tools, ", "))
	}
	var obj map[string]json.RawMessage
	if err := json.Unmarshal([]byte(args), &obj); err != nil || obj == nil {
		return fmt.Sprintf("arguments of %s must be a JSON object, got %s; nothing ran", name, kernel.Abbreviate(args, 200))
	}
	if name == kernel.DelegateTool {
		var d DelegateArgs
		if err := decodeStrict([]byte(args), &d); err != nil || strings.TrimSpace(d.Input) == "" {
			return "arguments of delegate must be {\"input\": <the child's task>, \"instructions\"?: ...}; nothing ran"
		}
		return ""
	}
	t, ok := a.Tools.Lookup(name)
	if !ok {
		return fmt.Sprintf("tool %q is not available on this worker; nothing ran", name)
	}
	ws := in.Workspace
	if err := os.MkdirAll(ws, 0o755); err != nil {
		ws = os.TempDir()
	}
	call := kernel.ToolCall{Project: in.Project, RunID: in.RunID, OperationID: "validate", Tool: name, Args: json.RawMessage(args), Workspace: ws}
	if err := t.Validate(call); err != nil {
		return fmt.Sprintf("arguments of %s rejected: %s; nothing ran", name, plan.ToolMessage(err))
	}
	return ""
}

// toOpenAI converts the conversation to go-openai's messages.
func toOpenAI(msgs []ChatMessage) []openai.ChatCompletionMessage {
	out := make([]openai.ChatCompletionMessage, len(msgs))
	for i, m := range msgs {
		om := openai.ChatCompletionMessage{Role: m.Role, Content: m.Content, ToolCallID: m.ToolCallID}
		for _, c := range m.ToolCalls {
			om.ToolCalls = append(om.ToolCalls, openai.ToolCall{ID: c.ID, Type: openai.ToolTypeFunction,
				Function: openai.FunctionCall{Name: c.Name, Arguments: c.Arguments}})
		}
		out[i] = om
	}
	return out
}
