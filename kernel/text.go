package kernel

import (
	"strconv"
	"strings"
	"unicode"
	"unicode/utf16"
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
// each such character shows as its \u escape. A byte that is not UTF-8 is
// quoted too (as \x9b): a terminal set for 8-bit controls reads the byte
// 0x9b alone as an escape sequence's start.
func Printable(s string) string {
	if !utf8.ValidString(s) {
		return strconv.Quote(s)
	}
	for _, r := range s {
		if disguises(r) {
			return strconv.Quote(s)
		}
	}
	return s
}

// disguises says whether r changes how the text around it reads without
// showing itself: a control character or a format character (Printable,
// TerminalJSON).
func disguises(r rune) bool {
	return unicode.IsControl(r) || unicode.Is(unicode.Cf, r)
}

// TerminalJSON returns b, JSON text, with every character that would
// change how a terminal shows it written as its \u escape: DEL and the C1
// controls, the format characters (bidirectional embeddings, overrides
// and isolates U+202A–U+202E and U+2066–U+2069, the marks and zero-width
// characters U+200B–U+200F, U+FEFF, ...), the line and paragraph
// separators U+2028 and U+2029, and a byte that is not UTF-8 (as \ufffd,
// which is what a decoder reads it as). encoding/json leaves all but the
// separators as they are, so an agent's id or error printed by a --json
// command could reorder the line it is on ("op-1\u202eenon" reads as
// "op-1none"), as Printable prevents in a table. Outside its strings,
// JSON text is ASCII, so each such character is inside a string, where
// its escape decodes to the same character: the values are unchanged.
// Characters beyond U+FFFF are escaped as UTF-16 surrogate pairs, as
// JSON has them.
func TerminalJSON(b []byte) []byte {
	out := make([]byte, 0, len(b))
	for i := 0; i < len(b); {
		if b[i] < utf8.RuneSelf {
			// DEL is the one ASCII control encoding/json leaves raw (it
			// escapes those below space); outside strings JSON has none.
			if b[i] == 0x7f {
				out = appendJSONEscape(out, 0x7f)
			} else {
				out = append(out, b[i])
			}
			i++
			continue
		}
		r, size := utf8.DecodeRune(b[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			out = appendJSONEscape(out, utf8.RuneError)
		case disguises(r) || r == '\u2028' || r == '\u2029':
			out = appendJSONEscape(out, r)
		default:
			out = append(out, b[i:i+size]...)
		}
		i += size
	}
	return out
}

// appendJSONEscape appends r as JSON writes it escaped: \uXXXX, in lower
// case hex as encoding/json does, or a surrogate pair of those.
func appendJSONEscape(out []byte, r rune) []byte {
	const hex = "0123456789abcdef"
	units := []rune{r}
	if r > 0xFFFF {
		hi, lo := utf16.EncodeRune(r)
		units = []rune{hi, lo}
	}
	for _, u := range units {
		out = append(out, '\\', 'u', hex[u>>12&0xF], hex[u>>8&0xF], hex[u>>4&0xF], hex[u&0xF])
	}
	return out
}
