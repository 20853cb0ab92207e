package runner

import (
	"strings"
	"testing"
)

// A command's output is the command's to choose, NUL bytes included, and
// reckon stores no NUL (kernel.CheckText). Carried into tool.completed's
// result_summary or tool.failed's error as it was, one NUL made the event
// unstorable: the run failed without ever journaling the operation's
// outcome, so a hostile command could erase the record of what it did.
func TestToolOutputWithNULIsJournaled(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOpts{})
	evs, err := e.run("r1", Plan{Steps: []Step{cmd(`printf 'a\000b'`)}})
	if err != nil {
		t.Fatalf("run failed: %v", err)
	}
	wantShape(t, evs, "run.started", "tool.started op-1", "tool.completed op-1", "run.completed")
	if got := data(t, evs[2])["result_summary"].(string); !strings.HasSuffix(got, "a\uFFFDb") {
		t.Fatalf("result_summary = %q, want the NUL shown as U+FFFD", got)
	}
	evs, err = e.run("r2", Plan{Steps: []Step{cmd(`printf 'x\000y' >&2; exit 3`)}})
	if err == nil {
		t.Fatal("a failing command's run completed")
	}
	wantShape(t, evs, "run.started", "tool.started op-1", "tool.failed op-1 command_failed effect=uncertain", "run.failed")
	if got := data(t, evs[2])["error"].(string); !strings.Contains(got, "x\uFFFDy") {
		t.Fatalf("tool.failed error = %q, want the NUL shown as U+FFFD", got)
	}
}
