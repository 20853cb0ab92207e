package main

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/seed-7bc021c3/reckon/kernel"
	"github.com/seed-7bc021c3/reckon/kernel/outbox"
)

// TestOutboxParkedQuotesControlCharacters: source and event ids of a parked
// row are an agent's choice and its reason may quote them; in the `reckon
// outbox parked` table an escape sequence must not reach the terminal, nor
// a newline forge a row.
func TestOutboxParkedQuotesControlCharacters(t *testing.T) {
	t.Parallel()
	row := outbox.Parked{
		Key:      kernel.EventKey{SourceID: "agent\x1b[31m", EventID: "r1/op-1\nFORGED  row"},
		Reason:   "conflict on \x1b]0;pwned\x07",
		ParkedAt: time.Date(2026, 12, 2, 10, 0, 0, 0, time.UTC),
	}
	var out bytes.Buffer
	if err := printParked(&out, []outbox.Parked{row}); err != nil {
		t.Fatal(err)
	}
	s := out.String()
	if strings.ContainsAny(s, "\x1b\x07") || strings.Count(s, "\n") != 3 {
		t.Fatalf("control characters reach the terminal:\n%q", s)
	}
	for _, want := range []string{`"agent\x1b[31m"`, `"r1/op-1\nFORGED  row"`, `"conflict on \x1b]0;pwned\a"`, "1 parked row(s)"} {
		if !strings.Contains(s, want) {
			t.Errorf("output lacks %s:\n%s", want, s)
		}
	}
}
