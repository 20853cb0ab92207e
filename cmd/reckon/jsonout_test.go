package main

import (
	"bytes"
	"encoding/json"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
	"unicode"

	"github.com/seed-7bc021c3/reckon/kernel"
	"github.com/seed-7bc021c3/reckon/kernel/outbox"
)

// hiddenRune is a character a terminal acts on or does not show, which no
// JSON output may hold raw.
func hiddenRune(s string) (rune, bool) {
	for _, r := range s {
		if r >= 0x80 && (unicode.IsControl(r) || unicode.Is(unicode.Cf, r) || r == '\u2028' || r == '\u2029') {
			return r, true
		}
	}
	return 0, false
}

// TestOutboxJSONEscapesFormatCharacters: the reason, last error and ids
// of a parked or retried row are an agent's text; in `reckon outbox
// parked|retrying --json` a bidirectional override or a zero-width
// character in them is written as its \u escape, and the JSON decodes to
// the exact strings.
func TestOutboxJSONEscapesFormatCharacters(t *testing.T) {
	t.Parallel()
	at := time.Date(2026, 12, 2, 10, 0, 0, 0, time.UTC)
	parked := outbox.Parked{
		Key:      kernel.EventKey{SourceID: "agent\u200b-x", EventID: "r1/op-1\u2066/started"},
		Reason:   "conflict: op-1\u202eenon differs",
		ParkedAt: at,
	}
	retrying := outbox.Retrying{
		Key:      kernel.EventKey{SourceID: "agent-x", EventID: "r2/op-2\u202d/started"},
		Attempts: 3, EnqueuedAt: at, NextAttemptAt: at,
		LastError: "journal said \u202eno\u2069 \u200f\u2028done",
	}
	check := func(what string, out []byte, want map[string]string) {
		t.Helper()
		if r, ok := hiddenRune(string(out)); ok {
			t.Errorf("%s: U+%04X raw in %q", what, r, out)
		}
		if !bytes.Contains(out, []byte(`\u202e`)) && !bytes.Contains(out, []byte(`\u202d`)) {
			t.Errorf("%s: no \\u202e nor \\u202d escape in %s", what, out)
		}
		var got map[string][]map[string]any
		if err := json.Unmarshal(out, &got); err != nil {
			t.Fatalf("%s: %v\n%s", what, err, out)
		}
		rows := got[what]
		if len(rows) != 1 {
			t.Fatalf("%s: rows %v", what, got)
		}
		for k, v := range want {
			if rows[0][k] != v {
				t.Errorf("%s: %s decodes to %q, want %q", what, k, rows[0][k], v)
			}
		}
	}
	var out bytes.Buffer
	if err := printRows(&out, true, "parked", []outbox.Parked{parked}, printParked, parkedObject); err != nil {
		t.Fatal(err)
	}
	check("parked", out.Bytes(), map[string]string{"reason": parked.Reason, "source_id": parked.Key.SourceID, "event_id": parked.Key.EventID})
	if !bytes.Contains(out.Bytes(), []byte(`op-1\u202eenon`)) {
		t.Errorf("parked: reason not escaped as op-1\\u202eenon: %s", out.Bytes())
	}
	out.Reset()
	if err := printRows(&out, true, "retrying", []outbox.Retrying{retrying}, printRetrying, retryingObject); err != nil {
		t.Fatal(err)
	}
	check("retrying", out.Bytes(), map[string]string{"last_error": retrying.LastError, "event_id": retrying.Key.EventID})
}

// TestWriteRawEscapesFormatCharacters: `reckon ops ... --json` prints the
// API's JSON, which encoding/json wrote with a bidirectional override raw;
// the printed JSON has it escaped and decodes to the same value.
func TestWriteRawEscapesFormatCharacters(t *testing.T) {
	t.Parallel()
	v := map[string]any{"operations": []any{map[string]any{"operation_id": "op-1\u202eenon", "note": "a\u200bb"}}}
	raw, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(raw), "\u202e") {
		t.Fatalf("encoding/json escaped U+202E itself (%s): the test no longer shows anything", raw)
	}
	var out bytes.Buffer
	if err := writeRaw(&out, raw); err != nil {
		t.Fatal(err)
	}
	if r, ok := hiddenRune(out.String()); ok || !strings.Contains(out.String(), `op-1\u202eenon`) {
		t.Fatalf("U+%04X raw, or no escape, in\n%s", r, out.String())
	}
	var got map[string]any
	if err := json.Unmarshal(out.Bytes(), &got); err != nil {
		t.Fatal(err)
	}
	want, _ := json.Marshal(v)
	if again, _ := json.Marshal(got); !bytes.Equal(again, want) {
		t.Fatalf("decodes to %s, want %s", again, want)
	}
	// An answer that is not JSON is printed with its characters escaped.
	out.Reset()
	if err := writeRaw(&out, []byte("bad gateway \u202e\x1b[2J")); err != nil {
		t.Fatal(err)
	}
	if r, ok := hiddenRune(out.String()); ok || strings.Contains(out.String(), "\x1b") {
		t.Fatalf("U+%04X or an escape sequence raw in %q", r, out.String())
	}
}

// TestJSONOutputsShareOneWriter: every JSON a command prints is written by
// writeJSON or writeRaw (jsonout.go), which escape what a terminal would
// act on; an encoder or an indenter elsewhere in the command would print
// an agent's bidirectional override raw.
func TestJSONOutputsShareOneWriter(t *testing.T) {
	t.Parallel()
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") || f == "jsonout.go" {
			continue
		}
		src, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		file, err := parser.ParseFile(fset, f, src, 0)
		if err != nil {
			t.Fatal(err)
		}
		ast.Inspect(file, func(n ast.Node) bool {
			sel, ok := n.(*ast.SelectorExpr)
			if !ok {
				return true
			}
			if pkg, ok := sel.X.(*ast.Ident); ok && pkg.Name == "json" {
				switch sel.Sel.Name {
				case "NewEncoder", "MarshalIndent", "Indent":
					t.Errorf("%s: json.%s: print JSON with writeJSON or writeRaw", fset.Position(sel.Pos()), sel.Sel.Name)
				}
			}
			return true
		})
	}
}
