package kernel

import (
	"testing"
	"unicode/utf8"
)

func TestTruncateUTF8(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		s    string
		n    int
		want string
	}{
		{"abc", 5, "abc"},
		{"abc", 3, "abc"},
		{"abcdef", 3, "abc"},
		{"aé", 2, "a"},   // é is 2 bytes: a cut after its first byte backs off
		{"aéb", 3, "aé"}, // a cut on a boundary keeps the rune
		{"€uro", 2, ""},  // nothing whole fits
		{"abc", 0, ""},
	} {
		got := TruncateUTF8(c.s, c.n)
		if got != c.want || !utf8.ValidString(got) || len(got) > c.n && c.n < len(c.s) {
			t.Errorf("TruncateUTF8(%q, %d) = %q, want %q", c.s, c.n, got, c.want)
		}
	}
	if got := Abbreviate("aéb", 2); got != "a…" {
		t.Errorf("Abbreviate = %q", got)
	}
	if got := Abbreviate("ab", 2); got != "ab" {
		t.Errorf("Abbreviate of a fitting string = %q", got)
	}
}

// TestPrintableQuotesWhatCouldForgeADisplay: control characters, and
// format characters (bidirectional overrides, zero-width spaces), are
// quoted; everything else, non-ASCII letters included, is left as it is.
func TestPrintableQuotesWhatCouldForgeADisplay(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		"op-1":              "op-1",
		"résumé-ß-操作":       "résumé-ß-操作",
		"op-1\nnone probe":  `"op-1\nnone probe"`,
		"op-1\x1b[2K":       `"op-1\x1b[2K"`,
		"op-1\u202eenon":    `"op-1\u202eenon"`,
		"op-\u200b1":        `"op-\u200b1"`,
		"run\u2066-7\u2069": `"run\u2066-7\u2069"`,
	} {
		if got := Printable(in); got != want {
			t.Errorf("Printable(%q) = %s, want %s", in, got, want)
		}
	}
}
