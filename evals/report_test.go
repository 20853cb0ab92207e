package evals

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"unicode/utf8"
)

// TestMarkdownQuotesOthersText: report.md carries text a model or a
// fixture's author wrote (a case's id and error, a verdict's note); a
// carriage return, an escape sequence or a bidirectional override in it
// must not reach the reader's terminal or viewer as such, and a long note
// is cut without splitting a character.
func TestMarkdownQuotesOthersText(t *testing.T) {
	t.Parallel()
	yes := true
	rep := &Report{Supervisor: "x", Cases: []CaseResult{
		{ID: "c\u202e1", Status: StatusError, Error: "decide: a\rb\x1b[2J"},
		{ID: "d\u200b2", Status: StatusOK, NeedsAttention: &yes},
	}}
	md := Markdown(rep)
	if !utf8.ValidString(md) {
		t.Error("report.md is not valid UTF-8")
	}
	for _, bad := range []string{"\r", "\x1b", "\u202e", "\u200b"} {
		if strings.Contains(md, bad) {
			t.Errorf("report.md holds %q raw", bad)
		}
	}
	if !strings.Contains(md, `\u202e`) || !strings.Contains(md, `\x1b`) {
		t.Errorf("report.md does not show the quoted characters:\n%s", md)
	}
	long := "x" + strings.Repeat("é", 200)
	if got := mdEscape(long); !utf8.ValidString(got) || !strings.HasSuffix(got, "…") {
		t.Errorf("mdEscape of a long note = %q", got)
	}
	if got := mdEscape("a|b\nc"); got != `a\|b c` {
		t.Errorf("mdEscape(a|b\\nc) = %q", got)
	}
}

// TestReportJSONEscapesFormatCharacters: report.json holds a fixture's and
// a model's text; a bidirectional override in it is written as its \u
// escape (kernel.TerminalJSON), and the file reads back the same.
func TestReportJSONEscapesFormatCharacters(t *testing.T) {
	t.Parallel()
	rep := &Report{Version: 1, Supervisor: "scripted", Model: "m-1\u202eenon", Fixtures: "testdata\u200b"}
	dir := t.TempDir()
	if _, err := WriteReports(dir, rep); err != nil {
		t.Fatal(err)
	}
	js, err := os.ReadFile(filepath.Join(dir, ReportJSONFile))
	if err != nil {
		t.Fatal(err)
	}
	if strings.ContainsAny(string(js), "\u202e\u200b") || !strings.Contains(string(js), `m-1\u202eenon`) {
		t.Fatalf("report.json:\n%s", js)
	}
	var got Report
	if err := json.Unmarshal(js, &got); err != nil {
		t.Fatal(err)
	}
	if got.Model != rep.Model || got.Fixtures != rep.Fixtures {
		t.Fatalf("read back %q %q, want %q %q", got.Model, got.Fixtures, rep.Model, rep.Fixtures)
	}
}
