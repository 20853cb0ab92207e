package runner

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/seed-7bc021c3/reckon/kernel"
	"github.com/seed-7bc021c3/reckon/kernel/auth"
	"github.com/seed-7bc021c3/reckon/kernel/httpapi"
	"github.com/seed-7bc021c3/reckon/kernel/sandbox"
)

func TestRunsAPI(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOpts{})
	tokens := &auth.Tokens{}
	tokens.Add("op", auth.RoleOperator, "op-secret")
	tokens.Add("rd", auth.RoleReader, "rd-secret")
	srv := httpapi.New(httpapi.Options{Tokens: tokens, Log: zerolog.Nop()})
	Mount(srv, e.starter)
	ts := httptest.NewServer(srv)
	defer ts.Close()

	call := func(method, path, token, body string) (int, map[string]any) {
		t.Helper()
		req, _ := http.NewRequest(method, ts.URL+path, bytes.NewBufferString(body))
		req.Header.Set("Authorization", "Bearer "+token)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var m map[string]any
		_ = json.NewDecoder(resp.Body).Decode(&m)
		return resp.StatusCode, m
	}
	plan := `{"steps": [{"tool": "run_command", "args": {"command": "echo ok > proof.txt", "timeout_s": 30},
	          "postcondition": {"path": "proof.txt"}}]}`
	body := `{"project": "` + e.project + `", "run_id": "api-1", "plan": ` + plan + `}`

	if code, m := call("POST", "/v1/runs", "rd-secret", body); code != http.StatusForbidden {
		t.Fatalf("reader may start runs: %d %v", code, m)
	}
	code, m := call("POST", "/v1/runs", "op-secret", body)
	if code != http.StatusCreated || m["run_id"] != "api-1" {
		t.Fatalf("start: %d %v", code, m)
	}
	// Same plan, different key order and whitespace: the existing run.
	same := `{"project": "` + e.project + `", "run_id": "api-1", "plan": {"steps": [{"postcondition": {"path": "proof.txt"},
	          "args": {"timeout_s": 30, "command": "echo ok > proof.txt"}, "tool": "run_command"}]}}`
	if code, m := call("POST", "/v1/runs", "op-secret", same); code != http.StatusOK || m["run_id"] != "api-1" {
		t.Fatalf("idempotent start: %d %v", code, m)
	}
	diff := strings.Replace(body, "echo ok", "echo other", 1)
	if code, m := call("POST", "/v1/runs", "op-secret", diff); code != http.StatusConflict {
		t.Fatalf("different plan: %d %v", code, m)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := e.wait(ctx, "api-1"); err != nil {
		t.Fatal(err)
	}
	e.events("api-1") // delivered
	code, m = call("GET", "/v1/runs/api-1?project="+e.project, "rd-secret", "")
	if code != http.StatusOK || m["status"] != "completed" || m["run_id"] != "api-1" || m["project"] != e.project {
		t.Fatalf("get: %d %v", code, m)
	}
	evs, _ := m["events"].([]any)
	if len(evs) != 4 {
		t.Fatalf("get: %d events, want 4: %v", len(evs), m)
	}
	first := evs[0].(map[string]any)
	if first["type"] != "run.started" || first["source_id"] != "kernel" || first["event_id"] != e.project+"/api-1/run/started" {
		t.Fatalf("first event = %v", first)
	}

	// A generated run id when none is chosen.
	code, m = call("POST", "/v1/runs", "op-secret", `{"project": "`+e.project+`", "plan": `+plan+`}`)
	if id, _ := m["run_id"].(string); code != http.StatusCreated || !strings.HasPrefix(id, "run-") {
		t.Fatalf("generated id: %d %v", code, m)
	}

	for _, c := range []struct{ body, field string }{
		{`{"project": "x", "plan": {"steps": [{"tool": "nope"}]}}`, "plan.steps[0].tool"},
		{`{"project": "x", "plan": {"steps": [{"tool": "run_command", "args": {"timeout_s": 3}}]}}`, "plan.steps[0].args.command"},
		{`{"project": "x", "plan": {"steps": []}}`, "plan.steps"},
		{`{"project": "x"}`, "plan"},
		{`{"plan": ` + plan + `}`, "project"},
		{`{"project": "x", "run_id": "../etc", "plan": ` + plan + `}`, "run_id"},
		{`{"project": "x", "plan": {"steps": [{"tool": "run_command", "args": {"command": "true"}, "on_uncertian": "reissue"}]}}`, "on_uncertian"},
		{`{"project": "x", "plan": {"steps": [{"tool": "run_command", "args": {"command": "true"}, "on_uncertain": "retry"}]}}`, "plan.steps[0].on_uncertain"},
		{`{"project": "x", "plan": {"steps": [{"tool": "delegate", "plan": {"steps": [{"tool": "run_command", "args": {}}]}}]}}`, "plan.steps[0].plan.steps[0].args.command"},
		{`{"project": "x", "plan": {"steps": [{"tool": "delegate"}]}}`, "plan.steps[0].plan"},
		// A client cannot take the id of a child run a delegation would start.
		{`{"project": "x", "run_id": "parent1.op-1", "plan": ` + plan + `}`, "run_id: must not contain \".\", which the kernel reserves for child runs"},
		{`{"project": "x", "plan": {"steps": [{"tool": "run_command", "args": {"command": "true"}, "postcondition": {"path": "/root/.bashrc"}}]}}`, "plan.steps[0].postcondition.path: must be relative"},
		{`{"project": "x", "plan": {"steps": [{"tool": "run_command", "args": {"command": "true"}, "postcondition": {"path": "../run-2/proof.txt"}}]}}`, "plan.steps[0].postcondition.path: must name a file inside the workspace"},
		{`{"project": "x", "plan": {"steps": [{"tool": "delegate", "plan": {"steps": [{"tool": "run_command", "args": {"command": "true"}, "postcondition": {"path": "a/../../b"}}]}}]}}`, "plan.steps[0].plan.steps[0].postcondition.path"},
		{`{"project": "x", "plan": {"steps": [{"tool": "run_command", "args": {"command": "true"}, "postcondition": {"path": "p.txt", "sha256": "abc"}}]}}`, "plan.steps[0].postcondition.sha256"},
		{`{"project": "x", "plan": {"steps": [{"tool": "run_command", "args": {"command": "true"}, "postcondition": "p.txt"}]}}`, "plan.steps[0].postcondition: must be a JSON object"},
	} {
		code, m := call("POST", "/v1/runs", "op-secret", c.body)
		msg, _ := m["error"].(string)
		if code != http.StatusBadRequest || !strings.Contains(msg, c.field) {
			t.Errorf("%s: %d %q, want 400 naming %s", c.body, code, msg, c.field)
		}
	}
	if code, _ := call("GET", "/v1/runs/api-1", "rd-secret", ""); code != http.StatusBadRequest {
		t.Fatalf("GET without project: %d", code)
	}
	if code, _ := call("GET", "/v1/runs/nope?project="+e.project, "rd-secret", ""); code != http.StatusNotFound {
		t.Fatalf("GET unknown run: %d", code)
	}
}

func TestPlanValidationAndDigest(t *testing.T) {
	tools := NewTools(sandbox.NewRunCommand(sandbox.Options{Unconfined: true}))
	p := Plan{Steps: []Step{cmd("true"), {Tool: kernel.DelegateTool, Plan: &Plan{Steps: []Step{cmd("true")}}}}}
	if err := p.Validate(tools); err != nil {
		t.Fatal(err)
	}
	if p.Summary() != "2 steps: run_command, delegate" {
		t.Fatal(p.Summary())
	}
	a, _ := DecodePlan(json.RawMessage(`{"steps":[{"tool":"run_command","args":{"command":"x","timeout_s":1}}]}`))
	b, _ := DecodePlan(json.RawMessage(`{ "steps" : [ { "args" : { "timeout_s" : 1, "command" : "x" }, "tool" : "run_command" } ] }`))
	c, _ := DecodePlan(json.RawMessage(`{"steps":[{"tool":"run_command","args":{"command":"y","timeout_s":1}}]}`))
	da, _ := a.Digest()
	db, _ := b.Digest()
	dc, _ := c.Digest()
	if !bytes.Equal(da, db) || bytes.Equal(da, dc) {
		t.Fatal("digest must ignore key order and whitespace and see content")
	}
	deep := &Plan{Steps: []Step{cmd("true")}}
	for range MaxDepth + 1 {
		deep = &Plan{Steps: []Step{{Tool: kernel.DelegateTool, Plan: deep}}}
	}
	if err := deep.Validate(tools); err == nil || !strings.Contains(err.Error(), "nest") {
		t.Fatalf("deep plan: %v", err)
	}
	chain := Chain{NewTools(), tools}
	if _, ok := chain.Lookup("run_command"); !ok {
		t.Fatal("chain lookup")
	}
}
