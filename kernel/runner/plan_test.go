package runner

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/seed-7bc021c3/reckon/kernel"
	"github.com/seed-7bc021c3/reckon/tool/sandbox"
)

func TestPlanValidationAndDigest(t *testing.T) {
	tools := NewTools(sandbox.NewRunCommand(sandbox.Config{Unconfined: true}))
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
