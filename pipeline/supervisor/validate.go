// Package supervisor holds the supervisors that turn a wall into a decision
// — the built-in evidence-based one and the OpenAI-compatible model — and
// the validation every decision passes before anything is written.
package supervisor

import (
	"fmt"
	"strings"

	"github.com/seed-7bc021c3/reckon/kernel"
	"github.com/seed-7bc021c3/reckon/pipeline"
)

// Bounds of the integrated conclusion, so a verdict stays a readable card.
const (
	MaxListItems     = 20
	MaxItemBytes     = 1000
	MaxLessonBytes   = kernel.MaxNoteBytes
	maxProblemsShown = 8
)

// InvalidOutputError lists everything wrong with a decision. Its message is
// what the OpenAI supervisor feeds back to the model.
type InvalidOutputError struct {
	Problems []string
}

// Error implements error.
func (e *InvalidOutputError) Error() string {
	ps := e.Problems
	more := ""
	if len(ps) > maxProblemsShown {
		more = fmt.Sprintf("; and %d more", len(ps)-maxProblemsShown)
		ps = ps[:maxProblemsShown]
	}
	return "invalid supervisor output: " + strings.Join(ps, "; ") + more
}

// Validate checks a decision against its wall before anything is written:
// every operation of the wall exactly once and no other, effects in
// none|occurred|unknown, basis inference or probe (probe only where the
// operation carries a probe finding equal to the effect: an inference is
// never presented as a proof), no effect that contradicts a decisive probe
// finding on its operation whatever the basis (a probe finding cannot be
// overruled by inference; unknown never contradicts), none that
// contradicts a fact the kernel recorded (ContradictsKernelFact), no proposed_effect
// (settlement's field, not a supervisor's), notes within 2000 bytes, and
// causes, remedies and lesson non-empty when needs_attention (which an
// unknown effect requires), non-blank notes, and text the journal can
// store (valid UTF-8, no NUL). Operation ids are quoted in every problem, so
// an id carrying a newline cannot forge a line of the repair message.
func Validate(w pipeline.Wall, d pipeline.Decision) error {
	var ps problems
	anyUnknown := ps.checkOperations(w, d)
	ps.checkConclusion(d, anyUnknown)
	if len(ps) > 0 {
		return &InvalidOutputError{Problems: ps}
	}
	return nil
}

// problems collects what is wrong with a decision, in the order found.
type problems []string

func (ps *problems) add(format string, args ...any) { *ps = append(*ps, fmt.Sprintf(format, args...)) }

// checkOperations checks the decision's operations: each of the wall's
// exactly once and no other, each decided validly. It reports whether any
// effect is unknown.
func (ps *problems) checkOperations(w pipeline.Wall, d pipeline.Decision) (anyUnknown bool) {
	inWall := make(map[string]pipeline.WallOperation, len(w.Operations))
	for _, op := range w.Operations {
		inWall[op.OperationID] = op
	}
	seen := make(map[string]bool, len(d.Operations))
	for i, v := range d.Operations {
		where := fmt.Sprintf("operations[%d]", i)
		op, ok := inWall[v.OperationID]
		switch {
		case v.OperationID == "":
			ps.add("%s.operation_id is empty", where)
			continue
		case !ok:
			ps.add("%s.operation_id %q is not an operation of this wall", where, v.OperationID)
			continue
		case seen[v.OperationID]:
			ps.add("%s.operation_id %q appears more than once", where, v.OperationID)
			continue
		}
		seen[v.OperationID] = true
		ps.checkOperation(fmt.Sprintf("%s (%q)", where, v.OperationID), op, v)
		if v.Effect == kernel.EffectUnknown {
			anyUnknown = true
		}
	}
	var missing []string
	for _, op := range w.Operations {
		if !seen[op.OperationID] {
			missing = append(missing, fmt.Sprintf("%q", op.OperationID))
		}
	}
	if len(missing) > 0 {
		ps.add("operations is missing %s (every operation of the wall exactly once)", strings.Join(missing, ", "))
	}
	return anyUnknown
}

// checkOperation checks the decision v on the wall's operation op, named
// where in the problems: its effect against the probes and the kernel's
// facts, its basis, and its note.
func (ps *problems) checkOperation(where string, op pipeline.WallOperation, v pipeline.EffectAnswer) {
	if !kernel.ValidReconciledEffect(v.Effect) {
		ps.add("%s.effect must be none, occurred or unknown, got %q", where, v.Effect)
	}
	if ContradictsProbe(op, v.Effect) {
		ps.add("%s.effect %q contradicts the probe evidence of this operation (%s); a probe finding cannot be overruled by inference: answer the probe's finding, or unknown when probes disagree",
			where, v.Effect, findings(op))
	}
	if p, ok := ContradictsKernelFact(op, v.Effect); ok {
		// Under settlement policy inference this would be journaled as
		// it stands: none where the kernel summarised a finished child
		// run, occurred where it rejected the call before running it.
		ps.add("%s.effect %q contradicts a fact the kernel recorded (%s); answer %s, or unknown if you doubt it",
			where, v.Effect, p.Why, p.Effect)
	}
	if v.ProposedEffect != "" {
		ps.add("%s.proposed_effect is set by settlement, not by a supervisor", where)
	}
	switch v.Basis {
	case kernel.BasisInference:
	case kernel.BasisProbe:
		if !provenBy(op, v.Effect) {
			ps.add("%s.basis is probe but no probe evidence of this operation found %q; use inference", where, v.Effect)
		}
	default:
		ps.add("%s.basis must be inference or probe, got %q", where, v.Basis)
	}
	if len(v.Note) > kernel.MaxNoteBytes {
		ps.add("%s.note is %d bytes; at most %d are allowed", where, len(v.Note), kernel.MaxNoteBytes)
	}
	if strings.TrimSpace(v.Note) == "" {
		// The reconcile path requires a note: found only when the wall
		// is recorded, after the repair round, it failed every sweep.
		ps.add("%s.note is empty; say what the decision rests on", where)
	}
	if !storable(v.Note) {
		ps.add("%s.note is not valid UTF-8 or holds a NUL character", where)
	}
}

// checkConclusion checks the integrated conclusion: causes, remedies and
// lesson present when the decision needs attention (which an unknown
// effect requires), within their bounds and storable, and the supervisor
// named.
func (ps *problems) checkConclusion(d pipeline.Decision, anyUnknown bool) {
	if anyUnknown && !d.NeedsAttention {
		ps.add("needs_attention must be true when any effect is unknown")
	}
	if d.NeedsAttention {
		if nonBlank(d.Causes) == 0 {
			ps.add("causes must be non-empty when needs_attention is true")
		}
		if nonBlank(d.Remedies) == 0 {
			ps.add("remedies must be non-empty when needs_attention is true")
		}
		if strings.TrimSpace(d.Lesson) == "" {
			ps.add("lesson must be non-empty when needs_attention is true")
		}
	}
	ps.checkList("causes", d.Causes)
	ps.checkList("remedies", d.Remedies)
	if len(d.Lesson) > MaxLessonBytes {
		ps.add("lesson is %d bytes; at most %d are allowed", len(d.Lesson), MaxLessonBytes)
	}
	if !storable(d.Lesson) {
		ps.add("lesson is not valid UTF-8 or holds a NUL character")
	}
	if d.Supervisor == "" {
		ps.add("supervisor name is missing")
	}
}

// checkList checks the items of the list name: how many, how long, none
// blank, all storable.
func (ps *problems) checkList(name string, items []string) {
	if len(items) > MaxListItems {
		ps.add("%s has %d items; at most %d are allowed", name, len(items), MaxListItems)
	}
	for i, s := range items {
		if len(s) > MaxItemBytes {
			ps.add("%s[%d] is %d bytes; at most %d are allowed", name, i, len(s), MaxItemBytes)
		}
		if strings.TrimSpace(s) == "" {
			ps.add("%s[%d] is blank", name, i)
		}
		if !storable(s) {
			ps.add("%s[%d] is not valid UTF-8 or holds a NUL character", name, i)
		}
	}
}

// provenBy reports whether op carries probe evidence that found effect and
// none that found the opposite: contradicting probes prove nothing.
func provenBy(op pipeline.WallOperation, effect string) bool {
	return ProbeFinding(op) == effect && effect != ""
}

// findings lists op's accepted decisive probe findings for a problem
// message.
func findings(op pipeline.WallOperation) string {
	var parts, ignored []string
	for _, ev := range op.Evidence {
		if accepted(op, ev, &ignored) {
			parts = append(parts, fmt.Sprintf("%s found %s", ev.Probe, ev.Finding))
		}
	}
	return strings.Join(parts, ", ")
}

// storable reports whether the journal can store s as it is: PostgreSQL
// refuses a NUL in text, and the event encoder refuses it too (kernel.Canonical),
// so such a decision would pass validation only to fail its record.
func storable(s string) bool {
	return kernel.CheckText("", s) == nil
}

func nonBlank(items []string) int {
	n := 0
	for _, s := range items {
		if strings.TrimSpace(s) != "" {
			n++
		}
	}
	return n
}
