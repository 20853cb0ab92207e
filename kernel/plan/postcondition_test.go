package plan

import (
	"strings"
	"testing"

	"github.com/seed-7bc021c3/reckon/kernel"
	"github.com/seed-7bc021c3/reckon/tool/sandbox"
)

// TestValidateRefusesUncheckablePostcondition: a postcondition is
// {"path", "sha256"?} (docs/design.md's plan format; the workspace probe reads
// nothing else). One without a path, or with a misspelt key, is a
// declaration the probe can never check — it answers "inconclusive" for
// ever — so the boundary refuses it with a 400 naming the field, as it
// refuses a path outside the workspace, instead of accepting the run.
func TestValidateRefusesUncheckablePostcondition(t *testing.T) {
	t.Parallel()
	tools := NewTools(sandbox.NewRunCommand(sandbox.Config{Unconfined: true}))
	hex := strings.Repeat("a", 64)
	step := func(pc string) string {
		return `{"steps":[{"tool":"run_command","args":{"command":"echo ok > proof.txt"},"postcondition":` + pc + `}]}`
	}
	for _, tc := range []struct{ pc, field string }{
		{`{}`, "postcondition.path"},
		{`{"sha256":"` + hex + `"}`, "postcondition.path"},
		{`{"path":null}`, "postcondition.path"},
		{`{"paht":"proof.txt"}`, "paht"},
		{`{"path":"proof.txt","sha265":"` + hex + `"}`, "sha265"},
	} {
		p, err := DecodePlan([]byte(step(tc.pc)))
		if err == nil {
			err = p.Validate(tools)
		}
		if kernel.ErrorCode(err) != kernel.EInvalid || !strings.Contains(kernel.ErrorMessage(err), tc.field) {
			t.Errorf("postcondition %s: got %v, want a 400 naming %s", tc.pc, err, tc.field)
		}
	}
	// What the plan format allows still passes.
	for _, pc := range []string{`{"path":"proof.txt"}`, `{"path":"out/proof.txt","sha256":"` + hex + `"}`, `null`} {
		p, err := DecodePlan([]byte(step(pc)))
		if err == nil {
			err = p.Validate(tools)
		}
		if err != nil {
			t.Errorf("postcondition %s: %v", pc, err)
		}
	}
}
