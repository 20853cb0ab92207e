package main

import (
	"bytes"
	"context"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/seed-7bc021c3/reckon/internal/pgtest"
	"github.com/seed-7bc021c3/reckon/internal/sandboxtest"
)

// TestDemo runs `reckon demo` end to end (what `make demo` does) against a
// private schema and data directory: every registered step must succeed.
func TestDemo(t *testing.T) {
	s := pgtest.New(t)
	t.Setenv("DATABASE_URL", s.URL)
	t.Setenv("RECKON_DATA_DIR", sandboxtest.Dir(t))
	t.Setenv("RECKON_TOKENS", "")
	t.Setenv("RECKON_LOG_LEVEL", "error")
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	// From the repository root, as `make demo` runs, so the eval step
	// scores the committed fixtures.
	t.Chdir("../..")
	var out bytes.Buffer
	demoOut = &out
	defer func() { demoOut = os.Stdout }()
	if err := runDemo(ctx, nil); err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
	for _, want := range []string{
		"tool.failed     operation_id=op-1 error_type=injected_fault effect=uncertain",
		"truth occurred",
		`"state": "failed_uncertain"`,
		"occurred  probe",
		"listing after triage: 0 unresolved operation(s)",
		// Both faulted operations are proved from evidence: the first by
		// its re-issue's before-manifest, the second (no postcondition
		// declared) by the workspace against its before-manifest.
		"workspace.diff found occurred (the workspace as\n│     recorded before the later operation op-1-r1",
		"workspace.diff found occurred (the workspace now\n│     differs from the manifest recorded before op-1: report.txt)",
		"operator's queue: 0 operation(s) waiting for a person",
		// The overridden reconciliation by its key, as `reckon ops` shows
		// it: the supervisor's, under the kernel's source.
		"basis=operator supersedes=kernel:",
		"operator's queue after the override: 0 operation(s)",
		// The run that waits: the probe's verdict resumes it and the
		// payment is made once.
		"run.awaiting    operation_id=op-1",
		"run.resumed     operation_id=op-1 effect=occurred basis=probe reconciliation=kernel:",
		"\"payment op-1\\nreceipt op-2\\n\" — one payment, one receipt",
		// The retry guard in the gateway: the retry held, the third call
		// answered, one issue upstream.
		"the agent retries it at once: isError=true\n  mcp-gateway did not send this call: an identical earlier call (operation op-1 of run",
		"the agent calls it a third time: isError=false\n  mcp-gateway did not send this call: this effect already happened.",
		"the tracker holds 1 issue for the three identical calls",
		// The agent run: the model is said to be scripted, the run waits,
		// the model is told the write happened, and it happened once.
		"the model is SCRIPTED",
		"run.resumed     operation_id=op-1-call_notes effect=occurred basis=probe",
		"Do not repeat it.",
		"final_answer=NOTES.md says released",
		"/NOTES.md: \"released\\n\" — written once",
		"0 (0.0% of truly occurred)",
		"reckon demo: done",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("demo output lacks %q", want)
		}
	}
	// A value printed with %v from decoded JSON shows Go's map syntax, which
	// means nothing to the reader of the demo.
	if strings.Contains(out.String(), "map[") {
		t.Errorf("demo output prints a Go map")
	}
	if t.Failed() {
		t.Logf("demo output:\n%s", out.String())
	}
}
