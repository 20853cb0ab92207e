package fakeopenai

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"time"
)

// AgentModel is a scripted OpenAI-compatible chat-completions model for
// agent frameworks: it is not a language model. Each answer is the next
// step of a script the test queued for the requested model name — tool
// calls or a final text — so a real agent framework runs a conversation
// the test decided in advance. Every answer says it is scripted (model
// "reckon-scripted-model", system_fingerprint "scripted", header
// X-Reckon-Scripted), and an exhausted script is a 500 naming the model.
//
// Control endpoints (JSON): POST /script {"model", "steps": [AgentStep...]}
// queues steps; GET /requests?model= lists the chat requests the model
// received, in order, as sent.
type AgentModel struct {
	// URL is the base URL to configure (ends in /v1).
	URL string
	srv *httptest.Server
	h   *agentHandler
}

// AgentStep is one scripted answer: tool calls, or else a final text.
type AgentStep struct {
	// ToolCalls are the calls the model asks for; their ids are generated,
	// unique across the server's life, as a real model's are.
	ToolCalls []AgentToolCall `json:"tool_calls,omitempty"`
	// Content is the final answer when ToolCalls is empty.
	Content string `json:"content,omitempty"`
	// DelayMS holds the answer back (a model thinking; a test's window to
	// lose the worker that asked). The step is taken when the request
	// arrives, so a request abandoned meanwhile consumed it.
	DelayMS int `json:"delay_ms,omitempty"`
}

// AgentToolCall is one tool call of a step.
type AgentToolCall struct {
	// ID is the call id to answer with; empty generates one. A script
	// repeats an id to play a model that reuses one.
	ID        string          `json:"id,omitempty"`
	Name      string          `json:"name"`
	Arguments json.RawMessage `json:"arguments"`
}

// NewAgentModel starts a scripted agent model on a test server.
func NewAgentModel() *AgentModel {
	h := NewAgentHandler()
	srv := httptest.NewServer(h)
	return &AgentModel{URL: srv.URL + "/v1", srv: srv, h: h.(*agentHandler)}
}

// Close stops the server.
func (m *AgentModel) Close() { m.srv.Close() }

// Script queues steps for model.
func (m *AgentModel) Script(model string, steps ...AgentStep) { m.h.script(model, steps) }

// Requests are the raw chat requests model received, in order.
func (m *AgentModel) Requests(model string) []json.RawMessage { return m.h.requests(model) }

// NewAgentHandler is the scripted agent model as an http.Handler, for a
// process of its own (internal/fakeopenai/cmd/scripted-model).
func NewAgentHandler() http.Handler {
	return &agentHandler{steps: map[string][]AgentStep{}, reqs: map[string][]json.RawMessage{}}
}

type agentHandler struct {
	mu    sync.Mutex
	steps map[string][]AgentStep
	reqs  map[string][]json.RawMessage
	calls int
}

func (h *agentHandler) script(model string, steps []AgentStep) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.steps[model] = append(h.steps[model], steps...)
}

func (h *agentHandler) requests(model string) []json.RawMessage {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]json.RawMessage(nil), h.reqs[model]...)
}

func (h *agentHandler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	switch {
	case r.Method == http.MethodPost && r.URL.Path == "/script":
		h.serveScript(w, r)
	case r.Method == http.MethodGet && r.URL.Path == "/requests":
		writeAgentJSON(w, http.StatusOK, map[string]any{"requests": h.requests(r.URL.Query().Get("model"))})
	case r.Method == http.MethodPost && strings.HasSuffix(r.URL.Path, "/chat/completions"):
		h.serveChat(w, r)
	default:
		writeError(w, http.StatusNotFound, "not_found", "scripted model: no route "+r.Method+" "+r.URL.Path+" (it serves POST /v1/chat/completions, POST /script, GET /requests)", nil)
	}
}

func (h *agentHandler) serveScript(w http.ResponseWriter, r *http.Request) {
	var body struct {
		Model string      `json:"model"`
		Steps []AgentStep `json:"steps"`
	}
	dec := json.NewDecoder(r.Body)
	dec.DisallowUnknownFields()
	if err := dec.Decode(&body); err != nil || body.Model == "" {
		writeError(w, http.StatusBadRequest, "invalid_request_error", fmt.Sprintf("scripted model: POST /script takes {\"model\", \"steps\"} with a model name (%v)", err), nil)
		return
	}
	h.script(body.Model, body.Steps)
	writeAgentJSON(w, http.StatusOK, map[string]any{"queued": len(body.Steps)})
}

func (h *agentHandler) serveChat(w http.ResponseWriter, r *http.Request) {
	var raw json.RawMessage
	var req struct {
		Model  string `json:"model"`
		Stream bool   `json:"stream"`
	}
	if err := json.NewDecoder(r.Body).Decode(&raw); err != nil || json.Unmarshal(raw, &req) != nil {
		writeError(w, http.StatusBadRequest, "invalid_request_error", "scripted model: the body is not a JSON chat request", nil)
		return
	}
	if req.Stream {
		writeError(w, http.StatusBadRequest, "invalid_request_error", "scripted model: streaming is not scripted; call without stream", nil)
		return
	}
	h.mu.Lock()
	h.reqs[req.Model] = append(h.reqs[req.Model], raw)
	queue := h.steps[req.Model]
	if len(queue) == 0 {
		h.mu.Unlock()
		writeError(w, http.StatusInternalServerError, "server_error", fmt.Sprintf("scripted model: the script of model %q is exhausted (this is a scripted fake, not a language model)", req.Model), nil)
		return
	}
	step := queue[0]
	h.steps[req.Model] = queue[1:]
	first := h.calls
	h.calls += len(step.ToolCalls)
	h.mu.Unlock()
	if step.DelayMS > 0 {
		select {
		case <-time.After(time.Duration(step.DelayMS) * time.Millisecond):
		case <-r.Context().Done():
			return
		}
	}
	w.Header().Set("X-Reckon-Scripted", "true")
	writeAgentJSON(w, http.StatusOK, agentCompletion(step, first))
}

// agentCompletion is a chat.completion answering step; tool call ids are
// numbered from first.
func agentCompletion(step AgentStep, first int) map[string]any {
	msg := map[string]any{"role": "assistant", "content": step.Content}
	finish := "stop"
	if len(step.ToolCalls) > 0 {
		calls := make([]map[string]any, len(step.ToolCalls))
		for i, c := range step.ToolCalls {
			args := string(c.Arguments)
			if args == "" {
				args = "{}"
			}
			id := c.ID
			if id == "" {
				id = fmt.Sprintf("call_scripted_%d", first+i+1)
			}
			calls[i] = map[string]any{
				"id":       id,
				"type":     "function",
				"function": map[string]any{"name": c.Name, "arguments": args},
			}
		}
		msg["content"] = nil
		msg["tool_calls"] = calls
		finish = "tool_calls"
	}
	return map[string]any{
		"id":                 fmt.Sprintf("chatcmpl-scripted-%d", first),
		"object":             "chat.completion",
		"created":            1790000000,
		"model":              "reckon-scripted-model",
		"system_fingerprint": "scripted",
		"choices":            []map[string]any{{"index": 0, "message": msg, "finish_reason": finish}},
		"usage":              map[string]int{"prompt_tokens": 10, "completion_tokens": 10, "total_tokens": 20},
	}
}

func writeAgentJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}
