package fakeopenai_test

import (
	"bytes"
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/seed-7bc021c3/reckon/internal/fakeopenai"
)

// TestAgentModelFollowsItsScript: each model name answers its own queue in
// order, tool call ids are unique, every answer says it is scripted, and an
// exhausted script is a 500 naming the model.
func TestAgentModelFollowsItsScript(t *testing.T) {
	t.Parallel()
	m := fakeopenai.NewAgentModel()
	defer m.Close()
	m.Script("a",
		fakeopenai.AgentStep{ToolCalls: []fakeopenai.AgentToolCall{{Name: "refund", Arguments: json.RawMessage(`{"order":"5521"}`)}}},
		fakeopenai.AgentStep{Content: "done"})
	m.Script("b", fakeopenai.AgentStep{ToolCalls: []fakeopenai.AgentToolCall{{Name: "refund"}}})

	chat := func(model string) (int, map[string]any, http.Header) {
		t.Helper()
		res, err := http.Post(m.URL+"/chat/completions", "application/json", strings.NewReader(`{"model":"`+model+`","messages":[{"role":"user","content":"go"}]}`))
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		var body map[string]any
		if err := json.NewDecoder(res.Body).Decode(&body); err != nil {
			t.Fatal(err)
		}
		return res.StatusCode, body, res.Header
	}
	callID := func(body map[string]any) string {
		msg := body["choices"].([]any)[0].(map[string]any)["message"].(map[string]any)
		return msg["tool_calls"].([]any)[0].(map[string]any)["id"].(string)
	}

	status, a1, h := chat("a")
	if status != 200 || h.Get("X-Reckon-Scripted") != "true" || a1["model"] != "reckon-scripted-model" {
		t.Fatalf("first answer: %d %v %v", status, a1, h)
	}
	_, b1, _ := chat("b")
	if callID(a1) == callID(b1) {
		t.Fatalf("call ids repeat across models: %s", callID(a1))
	}
	_, a2, _ := chat("a")
	if got := a2["choices"].([]any)[0].(map[string]any)["message"].(map[string]any)["content"]; got != "done" {
		t.Fatalf("second answer of a: %v", got)
	}
	status, a3, _ := chat("a")
	if status != 500 || !strings.Contains(a3["error"].(map[string]any)["message"].(string), `"a" is exhausted`) {
		t.Fatalf("exhausted script: %d %v", status, a3)
	}
	if got := len(m.Requests("a")); got != 3 {
		t.Fatalf("requests of a: %d, want 3", got)
	}
}

// TestAgentModelScriptOverHTTP: a test in another language queues steps
// with POST /script; a body without a model is a 400.
func TestAgentModelScriptOverHTTP(t *testing.T) {
	t.Parallel()
	m := fakeopenai.NewAgentModel()
	defer m.Close()
	base := strings.TrimSuffix(m.URL, "/v1")
	res, err := http.Post(base+"/script", "application/json", bytes.NewReader([]byte(`{"model":"x","steps":[{"content":"hi"}]}`)))
	if err != nil || res.StatusCode != 200 {
		t.Fatalf("POST /script: %v %v", res, err)
	}
	res.Body.Close()
	res, err = http.Post(base+"/script", "application/json", strings.NewReader(`{"steps":[]}`))
	if err != nil || res.StatusCode != 400 {
		t.Fatalf("POST /script without a model: %v %v", res, err)
	}
	res.Body.Close()
}
