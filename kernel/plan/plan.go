// Package plan is the input of a kernel run: its types, its strict
// decoding and its validation against the tools a worker has. It imports
// nothing heavier than kernel, so the boundary's decoder of plans can be
// fuzzed without instrumenting Temporal (kernel/runner aliases these
// names).
package plan

import (
	"bytes"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"

	"github.com/seed-7bc021c3/reckon/kernel"
)

// Values of step.on_uncertain: "stop" (the default) ends the run after an
// uncertain failure; "reissue" issues the step again as a new operation;
// "await" makes the run wait until a probe or an operator settles the
// operation: occurred counts the step as done, none issues it again as a
// new operation, an operator's unknown fails the run.
const (
	OnUncertainStop    = "stop"
	OnUncertainReissue = "reissue"
	OnUncertainAwait   = "await"
)

// Plan limits. A step costs about a dozen history events; Temporal warns at
// 10,240 events per run.
const (
	MaxSteps    = 200
	MaxTotal    = 1000 // steps of a plan and all its delegate plans
	MaxDepth    = 4    // nesting of delegate plans
	MaxReissues = 1    // re-issues per step after an uncertain failure
	// MaxPlanBytes bounds a plan's JSON, well under Temporal's blob
	// limit (2 MB by default) on the workflow input that carries it: a
	// larger plan is a 413 before anything is written.
	MaxPlanBytes = 512 << 10
)

// Plan is the input of a run: tool calls executed in order.
type Plan struct {
	Steps []Step `json:"steps"`
}

// Step is one tool call of a plan.
type Step struct {
	Tool string          `json:"tool"`
	Args json.RawMessage `json:"args,omitempty"`
	// Postcondition is copied into tool.started for probes; the kernel
	// does not interpret it.
	Postcondition json.RawMessage `json:"postcondition,omitempty"`
	// OnUncertain "reissue" re-issues the step once, as a new operation,
	// after an uncertain failure; "await" waits for the failure's
	// settlement (a settled none re-issues it once); empty or "stop" stops
	// the run.
	OnUncertain string `json:"on_uncertain,omitempty"`
	// Plan is the child plan of a delegate step.
	Plan *Plan `json:"plan,omitempty"`
}

// RunIDs lists runID and the id of every child run the plan can start:
// each delegate step's operation and its re-issues, recursively.
func (p Plan) RunIDs(runID string) []string {
	out := []string{runID}
	for i, s := range p.Steps {
		if s.Tool != kernel.DelegateTool || s.Plan == nil {
			continue
		}
		op := fmt.Sprintf("op-%d", i+1)
		ops := []string{op}
		if s.OnUncertain == OnUncertainReissue || s.OnUncertain == OnUncertainAwait {
			for k := 1; k <= MaxReissues; k++ {
				ops = append(ops, fmt.Sprintf("%s-r%d", op, k))
			}
		}
		for _, o := range ops {
			out = append(out, s.Plan.RunIDs(kernel.ChildRunID(runID, o))...)
		}
	}
	return out
}

// ToolNames lists the distinct tool names of the plan's steps and of
// every child plan, in first-use order.
func (p Plan) ToolNames() []string {
	var out []string
	seen := map[string]bool{}
	var walk func(Plan)
	walk = func(p Plan) {
		for _, s := range p.Steps {
			if !seen[s.Tool] {
				seen[s.Tool] = true
				out = append(out, s.Tool)
			}
			if s.Plan != nil {
				walk(*s.Plan)
			}
		}
	}
	walk(p)
	return out
}

// Summary is the plan_summary of run.started: step count and tools.
func (p Plan) Summary() string {
	tools := make([]string, len(p.Steps))
	for i, s := range p.Steps {
		tools[i] = s.Tool
	}
	n := "steps"
	if len(p.Steps) == 1 {
		n = "step"
	}
	return fmt.Sprintf("%d %s: %s", len(p.Steps), n, strings.Join(tools, ", "))
}

// Digest is the sha256 of the plan's canonical JSON: equal plans (whatever
// their key order or whitespace) have equal digests.
func (p Plan) Digest() ([]byte, error) {
	raw, err := json.Marshal(p)
	if err != nil {
		return nil, fmt.Errorf("marshal plan: %w", err)
	}
	return DigestJSON(raw)
}

// DigestJSON is Digest of a plan already marshalled.
func DigestJSON(raw []byte) ([]byte, error) {
	c, err := kernel.Canonical(raw)
	if err != nil {
		return nil, fmt.Errorf("canonical plan: %w", err)
	}
	d := sha256.Sum256(c)
	return d[:], nil
}

// DecodePlan decodes a plan strictly: unknown fields are errors naming the
// field, so a misspelt "on_uncertain" cannot silently change behaviour.
func DecodePlan(raw json.RawMessage) (Plan, error) {
	var p Plan
	if len(bytes.TrimSpace(raw)) == 0 || string(bytes.TrimSpace(raw)) == "null" {
		return p, kernel.Errorf(kernel.EInvalid, "plan: required, e.g. {\"steps\": [{\"tool\": \"run_command\", \"args\": {\"command\": \"echo ok\"}}]}")
	}
	if len(raw) > MaxPlanBytes {
		return p, TooLarge(len(raw))
	}
	if err := kernel.CheckJSON("plan", raw); err != nil {
		return p, err
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&p); err != nil {
		return p, kernel.Errorf(kernel.EInvalid, "plan: %v", err)
	}
	return p, nil
}

// TooLarge is the ETooLarge of a plan of n bytes of JSON.
func TooLarge(n int) error {
	return kernel.Errorf(kernel.ETooLarge, "plan: %d bytes of JSON; at most %d (MaxPlanBytes): put large inputs in files the plan's commands read", n, MaxPlanBytes)
}

var sha256RE = regexp.MustCompile(`^[0-9a-fA-F]{64}$`)

// validatePostcondition checks a step's declared postcondition,
// {"path": "<file in the workspace>", "sha256"?: "<hex>"}: the probe reads
// path beneath the run's workspace only, so a path that is absolute or
// climbs out of it (or names the workspace itself) is refused here rather
// than left to look like a declaration the probe can never check; so is one
// without a path, or with a key other than path and sha256.
func validatePostcondition(raw json.RawMessage, field string) error {
	pc := bytes.TrimSpace(raw)
	if len(pc) == 0 || string(pc) == "null" {
		return nil
	}
	if pc[0] != '{' {
		return kernel.Errorf(kernel.EInvalid, "%s: must be a JSON object {\"path\": ..., \"sha256\"?: ...}", field)
	}
	var d struct {
		Path   *string `json:"path"`
		SHA256 *string `json:"sha256"`
	}
	// Only path and sha256: a misspelt "sha265" would otherwise vanish and
	// leave a declaration that checks less than its author wrote.
	dec := json.NewDecoder(bytes.NewReader(pc))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&d); err != nil {
		return kernel.Errorf(kernel.EInvalid, "%s: must be {\"path\": ..., \"sha256\"?: ...}: %v", field, err)
	}
	// The probe reads path and nothing else: without it the declaration
	// can never be checked.
	if d.Path == nil {
		return kernel.Errorf(kernel.EInvalid, "%s.path: required (the workspace file the step leaves behind, e.g. {\"path\": \"proof.txt\"})", field)
	}
	p := *d.Path
	switch {
	case p == "":
		return kernel.Errorf(kernel.EInvalid, "%s.path: must not be empty", field)
	case filepath.IsAbs(p):
		return kernel.Errorf(kernel.EInvalid, "%s.path: must be relative to the workspace, got the absolute path %q", field, p)
	case strings.ContainsRune(p, 0) || !filepath.IsLocal(p) || filepath.Clean(p) == ".":
		return kernel.Errorf(kernel.EInvalid, "%s.path: must name a file inside the workspace, without \"..\" climbing out of it, got %q", field, p)
	}
	if d.SHA256 != nil && !sha256RE.MatchString(*d.SHA256) {
		return kernel.Errorf(kernel.EInvalid, "%s.sha256: must be 64 hexadecimal digits, got %q", field, *d.SHA256)
	}
	return nil
}

// ToolSet resolves tools by name. Tool sets compose (see Tools and Chain),
// so MCP tools can be added beside run_command.
type ToolSet interface {
	Lookup(name string) (kernel.Tool, bool)
}

// Tools is a ToolSet of fixed tools keyed by name.
type Tools map[string]kernel.Tool

// NewTools indexes tools by their names.
func NewTools(tools ...kernel.Tool) Tools {
	m := make(Tools, len(tools))
	for _, t := range tools {
		m[t.Name()] = t
	}
	return m
}

// Lookup implements ToolSet.
func (t Tools) Lookup(name string) (kernel.Tool, bool) {
	tool, ok := t[name]
	return tool, ok
}

// Chain looks a name up in each set in turn; the first match wins.
type Chain []ToolSet

// Lookup implements ToolSet.
func (c Chain) Lookup(name string) (kernel.Tool, bool) {
	for _, s := range c {
		if s == nil {
			continue
		}
		if t, ok := s.Lookup(name); ok {
			return t, true
		}
	}
	return nil, false
}

// Validate checks a plan at the boundary, naming the offending field
// (plan.steps[2].args.command). Tool arguments are checked by the tools'
// own Validate, which has no side effects; workspace-dependent checks run
// again at execution.
func (p Plan) Validate(tools ToolSet) error {
	if n := p.totalSteps(); n > MaxTotal {
		return kernel.Errorf(kernel.EInvalid, "plan: %d steps including delegate plans; at most %d", n, MaxTotal)
	}
	return p.validate(tools, "plan", 0)
}

func (p Plan) totalSteps() int {
	n := len(p.Steps)
	for _, s := range p.Steps {
		if s.Plan != nil {
			n += s.Plan.totalSteps()
		}
	}
	return n
}

func (p Plan) validate(tools ToolSet, path string, depth int) error {
	if depth > MaxDepth {
		return kernel.Errorf(kernel.EInvalid, "%s: delegate plans nest deeper than %d levels", path, MaxDepth)
	}
	if len(p.Steps) == 0 {
		return kernel.Errorf(kernel.EInvalid, "%s.steps: must list at least one step", path)
	}
	if len(p.Steps) > MaxSteps {
		return kernel.Errorf(kernel.EInvalid, "%s.steps: at most %d steps per plan, got %d", path, MaxSteps, len(p.Steps))
	}
	for i, s := range p.Steps {
		sp := fmt.Sprintf("%s.steps[%d]", path, i)
		if s.Tool == "" {
			return kernel.Errorf(kernel.EInvalid, "%s.tool: required", sp)
		}
		switch s.OnUncertain {
		case "", OnUncertainStop, OnUncertainReissue, OnUncertainAwait:
		default:
			return kernel.Errorf(kernel.EInvalid, "%s.on_uncertain: must be %q, %q or %q (the default), got %q", sp, OnUncertainAwait, OnUncertainReissue, OnUncertainStop, s.OnUncertain)
		}
		if err := validatePostcondition(s.Postcondition, sp+".postcondition"); err != nil {
			return err
		}
		if s.Tool == kernel.DelegateTool {
			if s.Plan == nil {
				return kernel.Errorf(kernel.EInvalid, "%s.plan: required for a delegate step (the child plan)", sp)
			}
			if a := bytes.TrimSpace(s.Args); len(a) > 0 && string(a) != "null" && string(a) != "{}" {
				return kernel.Errorf(kernel.EInvalid, "%s.args: a delegate step takes no args; put the child's steps in plan", sp)
			}
			if err := s.Plan.validate(tools, sp+".plan", depth+1); err != nil {
				return err
			}
			continue
		}
		if s.Plan != nil {
			return kernel.Errorf(kernel.EInvalid, "%s.plan: only a delegate step carries a plan", sp)
		}
		tool, ok := tools.Lookup(s.Tool)
		if !ok {
			return kernel.Errorf(kernel.EInvalid, "%s.tool: unknown tool %q (known: run_command, delegate, and mcp__<tool> of configured MCP servers)", sp, s.Tool)
		}
		// The workspace does not exist yet; validation sees a real,
		// harmless directory so that only the arguments are judged here.
		call := kernel.ToolCall{Tool: s.Tool, Args: s.Args, OperationID: "validate", Workspace: os.TempDir()}
		if err := tool.Validate(call); err != nil {
			msg := ToolMessage(err)
			if strings.HasPrefix(msg, "args") {
				return kernel.Errorf(kernel.EInvalid, "%s.%s", sp, msg)
			}
			return kernel.Errorf(kernel.EInvalid, "%s: %s", sp, msg)
		}
	}
	return nil
}

// ToolMessage is a tool error's message for people: the tool's own error
// without the kernel's wrapping.
func ToolMessage(err error) string {
	var te *kernel.ToolError
	if errors.As(err, &te) && te.Err != nil {
		return te.Err.Error()
	}
	return err.Error()
}
