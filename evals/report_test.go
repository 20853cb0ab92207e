package evals

import (
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
