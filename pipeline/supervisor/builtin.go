package supervisor

import (
	"context"
	"fmt"
	"sort"
	"strings"

	"github.com/seed-7bc021c3/reckon/kernel"
	"github.com/seed-7bc021c3/reckon/pipeline"
)

// BuiltinName names the built-in supervisor in every verdict.
const BuiltinName = "builtin"

// BuiltinVersion is the version of the built-in rules, recorded where a
// model verdict records its prompt version.
const BuiltinVersion = "builtin_v2"

// Builtin is the offline, deterministic supervisor. It decides exactly what
// the wall's evidence proves (Prove: a probe proof, a kernel-reported child
// summary with every child operation settled, a kernel-reported failure
// before the execution boundary) and answers unknown with needs_attention
// otherwise. It never reads an agent's account of its own work: failures
// and summaries an external agent reported are claims, and nothing here
// looks at args, results or free text.
type Builtin struct{}

var _ pipeline.Supervisor = Builtin{}

// Name implements pipeline.Supervisor.
func (Builtin) Name() string { return BuiltinName }

// Decide implements pipeline.Supervisor.
func (Builtin) Decide(ctx context.Context, w pipeline.Wall) (pipeline.Decision, error) {
	if err := ctx.Err(); err != nil {
		return pipeline.Decision{}, err
	}
	d := pipeline.Decision{
		Supervisor:    BuiltinName,
		PromptVersion: BuiltinVersion,
		Operations:    make([]pipeline.EffectAnswer, 0, len(w.Operations)),
	}
	causes := map[string]bool{}
	remedies := map[string]bool{}
	var unknownIDs, decidedIDs []string
	for _, op := range w.Operations {
		v, cause, remedy := decideOne(op)
		d.Operations = append(d.Operations, v)
		if v.Effect == kernel.EffectUnknown {
			unknownIDs = append(unknownIDs, op.OperationID)
			causes[cause] = true
			remedies[remedy] = true
		} else {
			decidedIDs = append(decidedIDs, op.OperationID)
		}
	}
	d.Causes = sortedKeys(causes)
	d.Remedies = sortedKeys(remedies)
	d.NeedsAttention = len(unknownIDs) > 0
	d.Lesson = lesson(w, unknownIDs, decidedIDs)
	return d, nil
}

// decideOne decides one operation and, for unknown, says why and what to do.
func decideOne(op pipeline.WallOperation) (v pipeline.EffectAnswer, cause, remedy string) {
	v = pipeline.EffectAnswer{OperationID: op.OperationID, Basis: kernel.BasisInference}
	p := Prove(op)
	switch {
	case p.Proven():
		v.Effect, v.Basis, v.Note = p.Effect, p.Basis, clip(p.Why)
		return v, "", ""
	case p.Conflict:
		v.Effect = kernel.EffectUnknown
		v.Note = clip(p.Why)
		return v, "probes returned contradicting findings for the same operation",
			"check the downstream state by hand; contradicting probes mean one of them reads the wrong state"
	}
	v.Effect = kernel.EffectUnknown
	cause = stateCause(op)
	remedy = toolRemedy(op)
	note := cause
	if claim := agentClaim(op); claim != "" {
		note += "; " + claim
	}
	// Why a finding was refused comes first: the note is clipped, and
	// that is what a reader needs before the findings' details.
	for _, r := range p.Rejected {
		note += "; " + r
	}
	for _, ev := range op.Evidence {
		note += fmt.Sprintf("; probe %s was %s: %s", ev.Probe, ev.Finding, ev.Detail)
	}
	v.Note = clip(note + ". No evidence establishes whether the effect landed.")
	return v, cause, remedy
}

// agentClaim says which decisive-looking fields of the operation were not
// the kernel's, so a reader sees why they were not taken as evidence.
func agentClaim(op pipeline.WallOperation) string {
	var parts []string
	if f := op.Failure; f != nil && op.KernelFailure() == nil {
		parts = append(parts, fmt.Sprintf("the failure (error_type %s, effect %s) was reported by %s, not the kernel: a claim, not evidence",
			f.ErrorType, f.Effect, sourceName(op.FailureSource())))
	}
	if c := op.ChildOps; c != nil && op.KernelChildSummary() == nil {
		who := "counted by the listing before the child was known to have ended"
		if s := op.ChildSummarySource(); s != "" {
			who = "reported by " + sourceName(s) + ", not the kernel"
		}
		parts = append(parts, fmt.Sprintf("the child summary (%d of %d unresolved) was %s: not evidence", c.Unresolved, c.Total, who))
	}
	return strings.Join(parts, "; ")
}

func sourceName(s string) string {
	if s == "" {
		return "an unknown source"
	}
	return fmt.Sprintf("source %q", s)
}

func stateCause(op pipeline.WallOperation) string {
	switch op.State {
	case "crash_window":
		return "the worker was lost after tool.started and before any completion was recorded (crash window)"
	case "stale_in_flight":
		return "the operation has had no terminal event past the stale threshold inside a running run"
	}
	if f := op.Failure; f != nil {
		return fmt.Sprintf("the call failed at or after the execution boundary (error_type %s), so its effect may have landed", f.ErrorType)
	}
	return "the operation failed with an uncertain effect"
}

func toolRemedy(op pipeline.WallOperation) string {
	switch {
	case op.Tool == "run_command":
		return "inspect the run's workspace for the command's effect before re-issuing; declare a postcondition on such steps so a probe can verify them"
	case op.Tool == "delegate":
		return "inspect the child run's trajectory and reconcile its unresolved operations first"
	case strings.HasPrefix(op.Tool, "mcp__"):
		return "ask the downstream service whether the idempotency key (the operation id) was applied before re-issuing; prefer MCP servers that answer lookup_operation"
	}
	return "verify the downstream state by hand, then record an operator reconciliation"
}

func lesson(w pipeline.Wall, unknown, decided []string) string {
	var b strings.Builder
	switch {
	case len(unknown) == 0:
		fmt.Fprintf(&b, "Every operation of this wall was settled from evidence (%s).", strings.Join(decided, ", "))
	default:
		fmt.Fprintf(&b, "%d of %d operations could not be verified from evidence (%s); operations without a probe-able postcondition or a downstream lookup stay uncertain until an operator checks them.",
			len(unknown), len(w.Operations), strings.Join(unknown, ", "))
	}
	if n := len(w.EarlierVerdicts); n > 0 {
		fmt.Fprintf(&b, " This run has been triaged %d time(s) before: uncertain operations keep recurring here.", n)
	}
	return clip(b.String())
}

func sortedKeys(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		if k != "" {
			out = append(out, k)
		}
	}
	sort.Strings(out)
	return out
}

// clip bounds a note to kernel.MaxNoteBytes without splitting a rune.
func clip(s string) string {
	if len(s) <= kernel.MaxNoteBytes {
		return s
	}
	return kernel.Abbreviate(s, kernel.MaxNoteBytes-len("…"))
}
