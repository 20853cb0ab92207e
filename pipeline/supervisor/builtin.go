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
const BuiltinVersion = "builtin_v1"

// preBoundaryErrorTypes are failure types that by definition happened
// before the execution boundary: the call was rejected, nothing ran. A
// failure of these types reported without an effect (legacy or external
// agents) still proves effect none.
var preBoundaryErrorTypes = map[string]bool{
	kernel.ErrorTypeValidation:      true,
	kernel.ErrorTypeUnknownTool:     true,
	kernel.ErrorTypeDelegationStart: true,
	kernel.ErrorTypeBlocked:         true,
}

// Builtin is the offline, deterministic supervisor. It decides only what
// the wall's evidence supports — a probe proof, a delegated child whose
// operations are all settled, an explicit failure before the execution
// boundary — and answers unknown with needs_attention otherwise. It never
// reads an agent's account of its own work: the wall carries none, and
// nothing here looks at results or free text except failure types.
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
		Operations:    make([]pipeline.OperationVerdict, 0, len(w.Operations)),
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
func decideOne(op pipeline.WallOperation) (v pipeline.OperationVerdict, cause, remedy string) {
	v = pipeline.OperationVerdict{OperationID: op.OperationID, Basis: kernel.BasisInference}
	if f := ProbeFinding(op); f != "" {
		v.Effect, v.Basis = f, kernel.BasisProbe
		v.Note = clip("proved by probe: " + proofSummary(op, f))
		return v, "", ""
	}
	if conflicting(op) {
		v.Effect = kernel.EffectUnknown
		v.Note = clip("probes disagree: " + proofSummary(op, ""))
		return v, "probes returned contradicting findings for the same operation",
			"check the downstream state by hand; contradicting probes mean one of them reads the wrong state"
	}
	// A child summary proves the delegation only when it was taken after
	// the child ended (the kernel summarizes at delegated_run_failed); a
	// summary of a child that may still run is left to the replay probe,
	// which checks that the child ended.
	if c := op.ChildOps; c != nil && c.Total > 0 && c.Unresolved == 0 && op.Failure != nil && op.Failure.ErrorType == kernel.ErrorTypeDelegationFail {
		v.Effect = kernel.EffectOccurred
		v.Note = clip(fmt.Sprintf("delegated child run %s: all %d child operations are settled in the journal", op.ChildRunID, c.Total))
		return v, "", ""
	}
	if f := op.Failure; f != nil && preBoundaryErrorTypes[f.ErrorType] {
		v.Effect = kernel.EffectNone
		v.Note = clip(fmt.Sprintf("failed before the execution boundary (error_type %s): the call was rejected, nothing ran", f.ErrorType))
		return v, "", ""
	}
	v.Effect = kernel.EffectUnknown
	cause = stateCause(op)
	remedy = toolRemedy(op)
	note := cause
	for _, ev := range op.Evidence {
		note += fmt.Sprintf("; probe %s was %s: %s", ev.Probe, ev.Finding, ev.Detail)
	}
	v.Note = clip(note + ". No evidence establishes whether the effect landed.")
	return v, cause, remedy
}

func conflicting(op pipeline.WallOperation) bool {
	occ, none := false, false
	for _, ev := range op.Evidence {
		occ = occ || ev.Finding == pipeline.FindingOccurred
		none = none || ev.Finding == pipeline.FindingNone
	}
	return occ && none
}

func proofSummary(op pipeline.WallOperation, finding string) string {
	var parts []string
	for _, ev := range op.Evidence {
		if finding == "" || ev.Finding == finding {
			parts = append(parts, fmt.Sprintf("%s found %s (%s)", ev.Probe, ev.Finding, ev.Detail))
		}
	}
	return strings.Join(parts, "; ")
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
