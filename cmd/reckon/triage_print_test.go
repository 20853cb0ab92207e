package main

import (
	"bytes"
	"strings"
	"testing"

	"github.com/seed-7bc021c3/reckon/kernel"
	"github.com/seed-7bc021c3/reckon/pipeline"
	"github.com/seed-7bc021c3/reckon/pipeline/triage"
)

// TestTriageReportQuotesControlCharacters: a dry run's notes and a failed
// wall's error carry a supervisor's text (a model's note, its refusal),
// which may repeat what an agent wrote; `reckon triage` must not pass an
// escape sequence in them to the operator's terminal, nor let a newline
// forge a line of its own.
func TestTriageReportQuotesControlCharacters(t *testing.T) {
	t.Parallel()
	const forge = "\x1b[1A\x1b[2K\n  op-1   none   probe"
	rep := triage.Report{Walls: []triage.WallResult{
		{Project: "acme", RunID: "run-1", Part: 1, Parts: 1, Outcome: triage.OutcomeDryRun, Decision: &pipeline.Decision{
			NeedsAttention: true, Operations: []pipeline.EffectAnswer{{OperationID: "op-1", Effect: kernel.EffectUnknown, Basis: kernel.BasisInference, Note: "n" + forge}}}},
		{Project: "acme", RunID: "run-2", Outcome: triage.OutcomeFailed, Error: "supervisor m refused: " + forge},
		{Project: "acme", RunID: "run-3", Outcome: triage.OutcomeUnavailable, Operations: []string{"op-1"}, Error: "op-1: server " + forge},
	}, Unavailable: 1}
	var b bytes.Buffer
	printReport(&b, rep)
	out := b.String()
	if strings.ContainsRune(out, '\x1b') {
		t.Fatalf("an escape sequence reaches the terminal:\n%q", out)
	}
	// An operation left because a probe could not reach its evidence is
	// named, with why, and counted.
	if !strings.Contains(out, "UNAVAILABLE acme/run-3: op-1") || !strings.Contains(out, "1 operation(s) whose evidence a probe could not reach") {
		t.Fatalf("the unavailable operation is not reported:\n%s", out)
	}
	for _, line := range strings.Split(out, "\n") {
		if strings.HasPrefix(strings.TrimSpace(line), "op-1   none") {
			t.Fatalf("a forged line:\n%s", out)
		}
	}
}
