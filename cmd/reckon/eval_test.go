package main

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/seed-7bc021c3/reckon/evals"
	"github.com/seed-7bc021c3/reckon/internal/fakeopenai"
)

// TestEvalCLI runs `reckon eval` on the committed suite: the built-in
// supervisor passes the gate against the committed baseline, and the
// OpenAI-compatible path, pointed at the fake model server by the same
// environment variables a real endpoint uses, produces a scored report.
func TestEvalCLI(t *testing.T) {
	fixtures := filepath.Join("..", "..", "evals", "fixtures")
	baseline := filepath.Join("..", "..", "evals", "baseline.json")
	t.Setenv("RECKON_DATA_DIR", t.TempDir())

	out := filepath.Join(t.TempDir(), "builtin")
	if err := runEval(context.Background(), []string{"--supervisor", "builtin", "--fixtures", fixtures, "--out", out, "--quiet", "--gate", baseline}); err != nil {
		t.Fatalf("builtin eval: %v", err)
	}
	for _, f := range []string{evals.ReportMarkdownFile, evals.ReportJSONFile, evals.ConfusionChartFile} {
		if fi, err := os.Stat(filepath.Join(out, f)); err != nil || fi.Size() == 0 {
			t.Errorf("%s not written: %v", f, err)
		}
	}

	fake := fakeopenai.New()
	defer fake.Close()
	// The first wall's first answer invents an id; the repair round fixes it.
	fake.Script(fakeopenai.Step{Kind: fakeopenai.InventedID})
	t.Setenv("RECKON_SUPERVISOR_BASE_URL", fake.URL)
	t.Setenv("RECKON_SUPERVISOR_API_KEY", "sk-test")
	t.Setenv("RECKON_SUPERVISOR_MODEL", "fake-model")
	out = filepath.Join(t.TempDir(), "openai")
	if err := runEval(context.Background(), []string{"--supervisor", "openai", "--fixtures", fixtures, "--out", out, "--quiet", "--concurrency", "1"}); err != nil {
		t.Fatalf("openai eval: %v", err)
	}
	raw, err := os.ReadFile(filepath.Join(out, evals.ReportJSONFile))
	if err != nil {
		t.Fatal(err)
	}
	var rep evals.Report
	if err := json.Unmarshal(raw, &rep); err != nil {
		t.Fatal(err)
	}
	fx, _ := evals.LoadDir(fixtures)
	expect := 0
	for _, f := range fx {
		if f.ExpectNeedsAttention {
			expect++
		}
	}
	// The fake answers unknown for every operation (with needs_attention):
	// nothing decided, every wall flagged.
	m := rep.Metrics
	if rep.Supervisor != "openai" || rep.Model != "fake-model" || m.WallsOK != len(fx) || m.Decided != 0 || m.Unknown != m.Operations {
		t.Errorf("openai report: supervisor %s model %s, %d/%d walls ok, decided %d, unknown %d of %d", rep.Supervisor, rep.Model, m.WallsOK, len(fx), m.Decided, m.Unknown, m.Operations)
	}
	if m.NeedsAttention.TruePositives != expect || m.NeedsAttention.FalsePositives != len(fx)-expect {
		t.Errorf("needs_attention = %+v, want TP %d FP %d", m.NeedsAttention, expect, len(fx)-expect)
	}
	if m.Usage.PromptTokens == 0 || !strings.Contains(string(raw), `"latency"`) {
		t.Error("model usage or latency missing from the report")
	}
	if n := len(fake.Calls()); n != len(fx)+1 {
		t.Errorf("model calls = %d, want one per wall plus one repair (%d)", n, len(fx)+1)
	}
	if rep.ModelInvalidAnswers != 1 || m.InvalidOutputs != 0 {
		t.Errorf("model answers rejected = %d, invalid outputs = %d; want 1 repaired, 0 invalid", rep.ModelInvalidAnswers, m.InvalidOutputs)
	}
	if c := fake.Calls(); len(c) > 0 && c[0].Auth != "Bearer sk-test" {
		t.Errorf("Authorization = %q", c[0].Auth)
	}

	// Without an endpoint the openai supervisor refuses to start.
	t.Setenv("RECKON_SUPERVISOR_BASE_URL", "")
	t.Setenv("RECKON_SUPERVISOR_MODEL", "")
	if err := runEval(context.Background(), []string{"--supervisor", "openai", "--fixtures", fixtures, "--out", out, "--quiet"}); err == nil || !strings.Contains(err.Error(), "RECKON_SUPERVISOR_BASE_URL") {
		t.Errorf("openai without endpoint: %v", err)
	}
	if err := runEval(context.Background(), []string{"--supervisor", "gpt"}); err == nil || !strings.Contains(err.Error(), "--supervisor") {
		t.Errorf("unknown supervisor: %v", err)
	}
}

// TestFailedGateWritesNoBaseline: `--write-baseline F --gate G` on a run
// that fails G leaves no F behind, which a later gate would otherwise be
// held to. G asks the built-in supervisor for more coverage than it has
// (0.99 against its 0.90), so the run is recordable but fails the gate.
func TestFailedGateWritesNoBaseline(t *testing.T) {
	fixtures := filepath.Join("..", "..", "evals", "fixtures")
	t.Setenv("RECKON_DATA_DIR", t.TempDir())
	dir := t.TempDir()
	gate := filepath.Join(dir, "gate.json")
	if err := os.WriteFile(gate, []byte(`{"supervisor": "builtin", "accuracy": 1, "coverage": 0.99, "walls": 102, "operations": 110,
  "recorded_at": "2026-12-01T09:24:16Z", "command": "test"}`), 0o644); err != nil {
		t.Fatal(err)
	}
	written := filepath.Join(dir, "new-baseline.json")
	err := runEval(context.Background(), []string{"--supervisor", "builtin", "--fixtures", fixtures, "--out", filepath.Join(dir, "out"),
		"--quiet", "--gate", gate, "--write-baseline", written})
	if err == nil || !strings.Contains(err.Error(), "eval gate failed") || !strings.Contains(err.Error(), "not written") {
		t.Fatalf("runEval = %v, want the gate's failure saying the baseline was not written", err)
	}
	if _, err := os.Stat(written); !os.IsNotExist(err) {
		t.Errorf("a run that failed its gate wrote %s (stat: %v)", written, err)
	}
}

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

// TestFirstLineIsSafeForATerminal: the progress line of `reckon eval` and
// `reckon drill` carries a case's error, which holds text a model or an
// endpoint wrote. Its escape sequences and bidirectional overrides reached
// the terminal as they were, and the 160-byte cut could split a UTF-8
// sequence.
func TestFirstLineIsSafeForATerminal(t *testing.T) {
	t.Parallel()
	for _, s := range []string{
		"decide: model said \x1b[2J\x1b[Hall walls ok",
		"decide: op-1\u202eenon\nsecond line",
		"decide: \r[ 1/1] forged ok",
		"x" + strings.Repeat("é", 100),
	} {
		got := firstLine(s)
		if strings.ContainsAny(got, "\x1b\r\n\u202e") || !utf8.ValidString(got) {
			t.Errorf("firstLine(%q) = %q", s, got)
		}
	}
	if got := firstLine("decide: context deadline exceeded\nmore"); got != "decide: context deadline exceeded" {
		t.Errorf("a plain error changed: %q", got)
	}
}
