package supervisor

import (
	"fmt"
	"strings"

	"github.com/seed-7bc021c3/reckon/kernel"
	"github.com/seed-7bc021c3/reckon/pipeline"
)

// Settlement policies (RECKON_SUPERVISOR_SETTLE): what a supervisor's
// decision may settle.
const (
	// SettleEvidence (the default): an occurred or none settles only when
	// the wall's evidence proves it (Prove: a probe finding, or a fact the
	// kernel recorded). An occurred or none by inference alone is recorded
	// as unknown carrying the proposal in proposed_effect, and the wall
	// needs attention: an operator decides.
	SettleEvidence = "evidence"
	// SettleInference settles whatever valid effect the supervisor gives,
	// inference included (the behaviour before the policy existed), for
	// teams that accept a model's most plausible reading as a verdict.
	SettleInference = "inference"
)

// DefaultSettlePolicy is the policy without configuration. A wrong
// inference is not a cheap mistake: none on an effect that landed makes a
// re-issue duplicate it, occurred on one that never happened silently
// drops the work, and no model's reading of a wall is a proof. unknown
// costs an operator's look, so that is the default.
const DefaultSettlePolicy = SettleEvidence

// ParseSettlePolicy checks a policy name; "" is the default.
func ParseSettlePolicy(s string) (string, error) {
	switch s {
	case "":
		return DefaultSettlePolicy, nil
	case SettleEvidence, SettleInference:
		return s, nil
	}
	return "", fmt.Errorf("must be evidence or inference, got %q", s)
}

// Settle applies the settlement policy to a validated decision and returns
// what is journaled: THE one function the sweep records through and the
// eval scorer scores, so the scorecard counts what a sweep would write.
//
// Under SettleEvidence every occurred or none with basis inference that
// the wall's evidence (Prove) does not prove to be that very effect becomes
// unknown, with the supervisor's effect in ProposedEffect and its note kept
// after a sentence saying why; the decision then needs attention, with a
// cause and a remedy naming those operations. Verdicts with basis probe
// (Validate has checked a probe found exactly that) and unknowns are kept.
// Under SettleInference the decision is kept as it is. Either way the
// decision records the policy applied. d is not modified.
func Settle(policy string, w pipeline.Wall, d pipeline.Decision) pipeline.Decision {
	out := d
	out.SettlePolicy = policy
	if policy != SettleEvidence {
		return out
	}
	out.Operations = append([]pipeline.EffectAnswer(nil), d.Operations...)
	var held []string
	for i := range out.Operations {
		v := &out.Operations[i]
		if v.Effect != kernel.EffectOccurred && v.Effect != kernel.EffectNone {
			continue
		}
		if v.Basis == kernel.BasisProbe && ProbeFinding(mustOp(w, v.OperationID)) == v.Effect {
			continue
		}
		if p := Prove(mustOp(w, v.OperationID)); p.Proven() && p.Effect == v.Effect {
			continue
		}
		held = append(held, fmt.Sprintf("%q", v.OperationID))
		v.ProposedEffect, v.Effect = v.Effect, kernel.EffectUnknown
		v.Note = clip(fmt.Sprintf("Recorded unknown under settlement policy %s: the supervisor proposed %s by inference, "+
			"and no probe finding or kernel fact on the wall proves it. The supervisor's note: %s", policy, v.ProposedEffect, v.Note))
	}
	if len(held) == 0 {
		return out
	}
	ids := kernel.Abbreviate(strings.Join(held, ", "), MaxItemBytes/2)
	out.NeedsAttention = true
	out.Causes = appendBounded(d.Causes, fmt.Sprintf(
		"the supervisor proposed effects by inference that no evidence on the wall proves (%s); settlement policy %s records them as unknown", ids, policy))
	out.Remedies = appendBounded(d.Remedies, fmt.Sprintf(
		"check the downstream state of %s and record an operator reconciliation; each reconciliation keeps the supervisor's proposal in proposed_effect", ids))
	if strings.TrimSpace(out.Lesson) == "" {
		out.Lesson = "Effects proposed by inference are held for an operator until a probe or a kernel fact proves them."
	}
	return out
}

// mustOp returns the wall's operation with id; Validate has checked every
// verdict names one, and a missing one proves nothing.
func mustOp(w pipeline.Wall, id string) pipeline.WallOperation {
	op, _ := w.Operation(id)
	return op
}

// appendBounded appends item to a copy of list, replacing the last item
// when the list is full, so the decision stays within Validate's bounds.
func appendBounded(list []string, item string) []string {
	out := append([]string(nil), list...)
	item = kernel.Abbreviate(item, MaxItemBytes-len("…"))
	if len(out) >= MaxListItems {
		out[len(out)-1] = item
		return out
	}
	return append(out, item)
}
