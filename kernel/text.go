package kernel

import (
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// TruncateUTF8 cuts s to at most n bytes without splitting a UTF-8
// sequence: a split one is invalid text, which PostgreSQL refuses in a text
// column and JSON encoders silently replace.
func TruncateUTF8(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}

// Storable returns s with what reckon does not store (CheckText) replaced
// by U+FFFD: invalid UTF-8 and NUL. Text a tool produced (a command's
// output, an MCP server's answer) is the tool's to choose; carried into an
// event as it was, one NUL would make the event unstorable and leave the
// operation's outcome unjournaled.
func Storable(s string) string {
	return strings.ReplaceAll(strings.ToValidUTF8(s, "\uFFFD"), "\x00", "\uFFFD")
}

// Abbreviate returns s when it fits in n bytes, otherwise s cut by
// TruncateUTF8 to n bytes and marked with "…" (so at most n+3 bytes).
func Abbreviate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return TruncateUTF8(s, n) + "…"
}

// Printable returns s, or s quoted when it holds control or format
// characters, so that a value someone else wrote cannot forge what an
// operator reads in a table, a card or a log: an agent's run or operation
// id with a newline or an escape sequence (forged lines, a cursor moved
// over the effect column), or with a bidirectional override (U+202E
// displays what follows right to left, so "op-1\u202eenon" reads as
// "op-1none") or a zero-width character (two ids that print alike). Quoted,
// each such character shows as its \u escape.
func Printable(s string) string {
	for _, r := range s {
		if unicode.IsControl(r) || unicode.Is(unicode.Cf, r) {
			return strconv.Quote(s)
		}
	}
	return s
}
