package main

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/seed-7bc021c3/reckon/internal/fakeopenai"
)

// TestEvalRefusesBadFlagsBeforeScoring: a mistake in `reckon eval`'s
// command line is reported before the suite is scored — with a model
// supervisor, scoring is one paid call per wall. A --gate baseline that
// cannot be read is reported before any wall is sent to the model, and a
// negative --concurrency or --case-timeout is refused, not taken as 1 and
// "no bound".
func TestEvalRefusesBadFlagsBeforeScoring(t *testing.T) {
	fixtures := filepath.Join("..", "..", "evals", "fixtures")
	t.Setenv("RECKON_DATA_DIR", t.TempDir())
	fake := fakeopenai.New()
	defer fake.Close()
	t.Setenv("RECKON_SUPERVISOR_BASE_URL", fake.URL)
	t.Setenv("RECKON_SUPERVISOR_API_KEY", "sk-test")
	t.Setenv("RECKON_SUPERVISOR_MODEL", "fake-model")
	badBaseline := filepath.Join(t.TempDir(), "baseline.json")
	if err := os.WriteFile(badBaseline, []byte(`{"accuracy": 7, "coverage": 0.5}`), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		flags []string
		want  string
	}{
		{[]string{"--gate", filepath.Join(t.TempDir(), "no-such-baseline.json")}, "baseline"},
		{[]string{"--gate", badBaseline}, "accuracy"},
		{[]string{"--concurrency", "-2"}, "--concurrency"},
		{[]string{"--concurrency", "0"}, "--concurrency"},
		{[]string{"--case-timeout", "-1s"}, "--case-timeout"},
	} {
		out := filepath.Join(t.TempDir(), "out")
		args := append([]string{"--supervisor", "openai", "--fixtures", fixtures, "--out", out, "--quiet"}, c.flags...)
		err := runEval(context.Background(), args)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("reckon eval %s: %v, want an error naming %s", strings.Join(c.flags, " "), err, c.want)
		}
		if n := len(fake.Calls()); n != 0 {
			t.Errorf("reckon eval %s: the model was called %d times before the flag was refused", strings.Join(c.flags, " "), n)
		}
		if _, err := os.Stat(out); err == nil {
			t.Errorf("reckon eval %s: reports were written before the flag was refused", strings.Join(c.flags, " "))
		}
	}
}
