package kernel

import (
	"encoding/json"
	"reflect"
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
// quoted, and so are bytes that are not UTF-8; everything else, non-ASCII
// letters included, is left as it is.
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
		"op-1\x9b2K":        `"op-1\x9b2K"`,
		"op-\xffé":          `"op-\xffé"`,
	} {
		if got := Printable(in); got != want {
			t.Errorf("Printable(%q) = %s, want %s", in, got, want)
		}
	}
}

// TerminalJSON escapes in JSON text what a terminal would act on or hide,
// and leaves the values as they were.
func TestTerminalJSON(t *testing.T) {
	t.Parallel()
	for _, c := range []struct{ in, want string }{
		{`{"a":"plain é € 😀 ok"}`, `{"a":"plain é € 😀 ok"}`},
		{"{\"reason\":\"op-1\u202eenon\"}", `{"reason":"op-1\u202eenon"}`},
		{"[\"\u202a\u202b\u202c\u202d\u202e\"]", `["\u202a\u202b\u202c\u202d\u202e"]`},
		{"[\"\u2066\u2067\u2068\u2069\"]", `["\u2066\u2067\u2068\u2069"]`},
		{"[\"\u200b\u200c\u200d\u200e\u200f\ufeff\u00ad\u061c\"]", `["\u200b\u200c\u200d\u200e\u200f\ufeff\u00ad\u061c"]`},
		{"[\"\u2028\u2029\u0085\u009b\"]", `["\u2028\u2029\u0085\u009b"]`},
		{"[\"tag \U000e0041\"]", `["tag \udb40\udc41"]`},
		{"[\"bad \xff byte\"]", `["bad \ufffd byte"]`},
		{"[\"del \x7f\"]", `["del \u007f"]`},
		{"{\n  \"k\": \"v\"\n}\n", "{\n  \"k\": \"v\"\n}\n"},
	} {
		got := string(TerminalJSON([]byte(c.in)))
		if got != c.want {
			t.Errorf("TerminalJSON(%q) = %q, want %q", c.in, got, c.want)
			continue
		}
		var in, out any
		if err := json.Unmarshal([]byte(c.in), &in); err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal([]byte(got), &out); err != nil {
			t.Fatalf("TerminalJSON(%q) = %q: %v", c.in, got, err)
		}
		if !reflect.DeepEqual(in, out) {
			t.Errorf("TerminalJSON(%q) decodes to %q, the input to %q", c.in, out, in)
		}
	}
}
