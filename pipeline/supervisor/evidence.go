package supervisor

import (
	"fmt"
	"strings"

	"github.com/seed-7bc021c3/reckon/kernel"
	"github.com/seed-7bc021c3/reckon/pipeline"
)

// preBoundaryErrorTypes are failure types that by definition happened
// before the execution boundary: the call was rejected, nothing ran. When
// the kernel reports such a failure without an effect (legacy events), it
// still proves effect none.
var preBoundaryErrorTypes = map[string]bool{
	kernel.ErrorTypeValidation:      true,
	kernel.ErrorTypeUnknownTool:     true,
	kernel.ErrorTypeDelegationStart: true,
	kernel.ErrorTypeBlocked:         true,
}

// Proof is what a wall's own evidence establishes about one operation.
type Proof struct {
	// Effect is occurred or none when the evidence proves it, "" otherwise.
	Effect string
	// Basis is probe for a probe finding, inference for a kernel fact (a
	// failure or child summary the kernel itself recorded).
	Basis string
	// Conflict says decisive probe findings contradict each other: they
	// prove nothing, and no weaker rule may then decide either.
	Conflict bool
	// Why says what the proof (or the conflict) rests on, for notes.
	Why string
	// Rejected says, per decisive probe finding whose preconditions do
	// not hold (pipeline.Unmet), why it proves nothing.
	Rejected []string
}

// Proven reports whether the proof decides an effect.
func (p Proof) Proven() bool { return p.Effect != "" }

// Prove applies THE rule of what counts as evidence on a wall. The
// built-in supervisor decides by it, settlement (Settle) lets an inference
// settle only where it holds, and validation checks a verdict against it,
// so the three can never disagree. In order:
//
//  1. probe findings: when the operation's evidence holds a finding of
//     occurred or none whose preconditions hold (pipeline.Unmet: observed
//     after the operation started, a wait measured on one clock, a store
//     the state can be credited from), the operation is proven exactly
//     when all such findings agree (contradicting findings are a Conflict
//     and decide nothing); a finding whose preconditions do not hold is no
//     evidence, and inconclusive findings neither help nor hurt;
//  2. a delegation whose failure the kernel reported as
//     delegated_run_failed, carrying a child summary of at least one
//     child operation and none unresolved: occurred (the kernel summarised
//     the child after it ended);
//  3. a failure the kernel reported with an error type that is by
//     definition before the execution boundary: none.
//
// Failures and child summaries an external agent reported about its own
// call are claims, never evidence: an agent's "argument_validation" on a
// call whose effect landed would otherwise make a re-issue duplicate it.
// Nothing else proves anything: args, error text and every other
// agent-written field are never evidence.
func Prove(op pipeline.WallOperation) Proof {
	pf := probeFindings(op)
	if pf.decisive {
		if pf.finding == "" {
			return Proof{Conflict: true, Why: "probes disagree: " + proofSummary(op, ""), Rejected: pf.rejected}
		}
		return Proof{Effect: pf.finding, Basis: kernel.BasisProbe, Why: "proved by probe: " + proofSummary(op, pf.finding), Rejected: pf.rejected}
	}
	p := proveByKernelFact(op)
	p.Rejected = pf.rejected
	return p
}

// proveByKernelFact is Prove's rules 2 and 3.
func proveByKernelFact(op pipeline.WallOperation) Proof {
	f := op.KernelFailure()
	if f == nil {
		return Proof{}
	}
	// The kernel's own rule (kernel.ChildSummary.Effect): every child
	// operation settled, none of them unknown and not all of them none.
	if c := op.KernelChildSummary(); c != nil && f.ErrorType == kernel.ErrorTypeDelegationFail && c.Total > 0 && c.Effect() == kernel.EffectOccurred {
		return Proof{Effect: kernel.EffectOccurred, Basis: kernel.BasisInference,
			Why: fmt.Sprintf("delegated child run %s: the kernel's summary counts all %d child operations settled in the journal", op.ChildRunID, c.Total)}
	}
	if preBoundaryErrorTypes[f.ErrorType] {
		return Proof{Effect: kernel.EffectNone, Basis: kernel.BasisInference,
			Why: fmt.Sprintf("the kernel reported a failure before the execution boundary (error_type %s): the call was rejected, nothing ran", f.ErrorType)}
	}
	return Proof{}
}

// ProbeFinding returns the effect the operation's probe evidence proves:
// occurred or none when every decisive finding whose preconditions hold
// agrees, "" when there is none or they contradict each other.
func ProbeFinding(op pipeline.WallOperation) string {
	return probeFindings(op).finding
}

// findingsRead is what an operation's probe findings prove.
type findingsRead struct {
	// finding is the effect the accepted findings agree on, "" when there
	// is none or they disagree (decisive then says which).
	finding string
	// decisive says some finding of occurred or none was accepted.
	decisive bool
	// rejected says why each refused finding proves nothing.
	rejected []string
}

// probeFindings reads op's decisive findings, refusing those whose
// preconditions do not hold.
func probeFindings(op pipeline.WallOperation) findingsRead {
	var r findingsRead
	conflict := false
	for _, ev := range op.Evidence {
		if !accepted(op, ev, &r.rejected) {
			continue
		}
		switch {
		case !r.decisive:
			r.finding, r.decisive = ev.Finding, true
		case r.finding != ev.Finding:
			conflict = true
		}
	}
	if conflict {
		r.finding = ""
	}
	return r
}

// accepted reports whether ev is a decisive finding whose preconditions
// hold on op, adding the reason to rejected when they do not.
func accepted(op pipeline.WallOperation, ev pipeline.Evidence, rejected *[]string) bool {
	if !decisiveFinding(ev.Finding) {
		return false
	}
	if why := pipeline.Unmet(op, ev); why != "" {
		*rejected = append(*rejected, fmt.Sprintf("%s found %s, not taken as proof: %s", ev.Probe, ev.Finding, why))
		return false
	}
	return true
}

func decisiveFinding(f string) bool {
	return f == pipeline.FindingOccurred || f == pipeline.FindingNone
}

// ContradictsProbe reports whether effect contradicts a decisive probe
// finding on op whose preconditions hold: occurred where such a probe
// found none, or none where one found occurred. unknown never
// contradicts, nor does a finding that proves nothing.
func ContradictsProbe(op pipeline.WallOperation, effect string) bool {
	if effect != kernel.EffectOccurred && effect != kernel.EffectNone {
		return false
	}
	var ignored []string
	for _, ev := range op.Evidence {
		if accepted(op, ev, &ignored) && ev.Finding != effect {
			return true
		}
	}
	return false
}

// ContradictsKernelFact reports whether effect contradicts what a fact the
// kernel recorded on op proves (Prove without a decisive probe finding: a
// failure before the execution boundary proves none, a delegation's child
// summary with every child operation settled proves occurred), and that
// proof. unknown never contradicts; a probe finding, which Prove puts
// first, is ContradictsProbe's business.
func ContradictsKernelFact(op pipeline.WallOperation, effect string) (Proof, bool) {
	if effect != kernel.EffectOccurred && effect != kernel.EffectNone {
		return Proof{}, false
	}
	p := Prove(op)
	if !p.Proven() || p.Basis == kernel.BasisProbe {
		return Proof{}, false
	}
	return p, p.Effect != effect
}

// proofSummary names op's accepted decisive findings (of finding, or all
// of them when finding is "").
func proofSummary(op pipeline.WallOperation, finding string) string {
	var parts, ignored []string
	for _, ev := range op.Evidence {
		if accepted(op, ev, &ignored) && (finding == "" || ev.Finding == finding) {
			parts = append(parts, fmt.Sprintf("%s found %s (%s)", ev.Probe, ev.Finding, ev.Detail))
		}
	}
	return strings.Join(parts, "; ")
}
