package evals

import (
	"fmt"
	"strings"

	"github.com/seed-7bc021c3/reckon/kernel"
	"github.com/seed-7bc021c3/reckon/pipeline"
)

// ValidateDecision applies the sweep's acceptance rules to a decision: every
// operation of the wall exactly once, no invented ids, effects in
// none|occurred|unknown, basis inference or probe, notes within 2000 bytes,
// and causes, remedies and a lesson when the wall needs attention. A
// decision the sweep would reject is an invalid output here too.
func ValidateDecision(w pipeline.Wall, d pipeline.Decision) error {
	want := make(map[string]bool, len(w.Operations))
	for _, op := range w.Operations {
		want[op.OperationID] = true
	}
	seen := make(map[string]bool, len(d.Operations))
	for i, v := range d.Operations {
		switch {
		case v.OperationID == "":
			return fmt.Errorf("operations[%d].operation_id: missing", i)
		case !want[v.OperationID]:
			return fmt.Errorf("operations[%d].operation_id: %q is not an operation of the wall", i, v.OperationID)
		case seen[v.OperationID]:
			return fmt.Errorf("operations[%d].operation_id: %q has more than one verdict", i, v.OperationID)
		}
		seen[v.OperationID] = true
		if !kernel.ValidReconciledEffect(v.Effect) {
			return fmt.Errorf("operations[%d].effect: %q is not none, occurred or unknown", i, v.Effect)
		}
		if v.Basis != kernel.BasisInference && v.Basis != kernel.BasisProbe {
			return fmt.Errorf("operations[%d].basis: %q is not inference or probe", i, v.Basis)
		}
		if len(v.Note) > kernel.MaxNoteBytes {
			return fmt.Errorf("operations[%d].note: %d bytes, over the %d-byte limit", i, len(v.Note), kernel.MaxNoteBytes)
		}
	}
	for _, op := range w.Operations {
		if !seen[op.OperationID] {
			return fmt.Errorf("operations: no verdict for operation %q", op.OperationID)
		}
	}
	if d.NeedsAttention {
		if len(nonEmpty(d.Causes)) == 0 {
			return fmt.Errorf("causes: empty although needs_attention is true")
		}
		if len(nonEmpty(d.Remedies)) == 0 {
			return fmt.Errorf("remedies: empty although needs_attention is true")
		}
		if strings.TrimSpace(d.Lesson) == "" {
			return fmt.Errorf("lesson: empty although needs_attention is true")
		}
	}
	return nil
}

func nonEmpty(ss []string) []string {
	var out []string
	for _, s := range ss {
		if strings.TrimSpace(s) != "" {
			out = append(out, s)
		}
	}
	return out
}
