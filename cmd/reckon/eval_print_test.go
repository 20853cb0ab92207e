package main

import (
	"strings"
	"testing"
	"unicode/utf8"
)

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
