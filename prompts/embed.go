// Package prompts holds the supervisor's prompt templates, embedded and
// versioned: every verdict records the version of the prompt that produced
// it, so a change of wording is a new file (reconcile_v2.tmpl), never an
// edit of a released one. Released files stay in the folder, unused, so a
// recorded prompt_version can always be read back.
//
// Since reconcile_v2 every piece of wall data reaches the model only inside
// one delimited block of JSON (WallOpen … WallClose) that the data cannot
// close: it is encoded with encoding/json's HTML escaping, which writes
// every "<" and ">" inside strings as \u003c and \u003e, so no value — an
// operation id, an argument, an error — can produce a delimiter, and its
// newlines stay \n escapes inside one JSON string. Outside the block the
// messages hold only fixed text and numbers.
package prompts

import (
	"bytes"
	"embed"
	"encoding/json"
	"fmt"
	"strings"
	"text/template"

	"github.com/seed-7bc021c3/reckon/kernel"
)

//go:embed *.tmpl
var files embed.FS

// ReconcileVersion is the version of the reconciliation prompt in use; it
// names the template file without its extension.
const ReconcileVersion = "reconcile_v2"

// Delimiters of the data blocks, each on a line of its own. They contain
// "<" and ">", which encoded data never does.
const (
	WallOpen      = "<wall_data>"
	WallClose     = "</wall_data>"
	ProblemsOpen  = "<validation_problems>"
	ProblemsClose = "</validation_problems>"
)

// reconcile is parsed once at start-up; a broken template is a build-time
// mistake that the package test catches, so parse errors surface from
// Render instead of panicking at init.
var reconcile, reconcileErr = template.New(ReconcileVersion).
	Option("missingkey=error").
	ParseFS(files, ReconcileVersion+".tmpl")

// Reconcile is the rendered reconciliation prompt for one wall.
type Reconcile struct {
	System string
	User   string
}

// ReconcileData is what a caller gives to render a wall's prompt.
type ReconcileData struct {
	// Wall is the wall as the model reads it: any value encoding/json can
	// marshal. It is rendered only inside the data block.
	Wall any
	// Operations, Part and Parts are the numbers the fixed text states.
	Operations, Part, Parts int
}

// view is what the template reads: fixed text, numbers and the encoded
// data block.
type view struct {
	Operations, Part, Parts int
	Open, Close             string
	WallJSON                string
	ProblemsJSON            string
}

// MaxNoteBytes is the bound on each note the template states: the one
// validation enforces.
func (view) MaxNoteBytes() int { return kernel.MaxNoteBytes }

// RenderReconcile renders the system and user messages for a wall.
func RenderReconcile(d ReconcileData) (Reconcile, error) {
	if reconcileErr != nil {
		return Reconcile{}, fmt.Errorf("prompt %s: parse: %w", ReconcileVersion, reconcileErr)
	}
	data, err := EncodeData(d.Wall)
	if err != nil {
		return Reconcile{}, fmt.Errorf("prompt %s: wall: %w", ReconcileVersion, err)
	}
	v := view{Operations: d.Operations, Part: d.Part, Parts: d.Parts, Open: WallOpen, Close: WallClose, WallJSON: data}
	sys, err := execute("system", v)
	if err != nil {
		return Reconcile{}, err
	}
	user, err := execute("user", v)
	if err != nil {
		return Reconcile{}, err
	}
	return Reconcile{System: sys, User: user}, nil
}

// RenderRepair renders the message that feeds validation problems back to
// the model once. The problems quote the model's answer and the wall, so
// they travel in a data block too.
func RenderRepair(problems []string) (string, error) {
	if reconcileErr != nil {
		return "", fmt.Errorf("prompt %s: parse: %w", ReconcileVersion, reconcileErr)
	}
	if problems == nil {
		problems = []string{}
	}
	data, err := EncodeData(problems)
	if err != nil {
		return "", fmt.Errorf("prompt %s: problems: %w", ReconcileVersion, err)
	}
	return execute("repair", view{Open: ProblemsOpen, Close: ProblemsClose, ProblemsJSON: data})
}

// EncodeData renders v as indented JSON that cannot close a data block:
// encoding/json escapes "<", ">" and "&" (and U+2028/U+2029) wherever they
// occur in strings and object keys, raw messages included, and a newline
// inside a string is always the escape \n. The result is checked anyway,
// so a change of encoder can never weaken the block silently.
func EncodeData(v any) (string, error) {
	raw, err := json.Marshal(v)
	if err != nil {
		return "", err
	}
	var b bytes.Buffer
	if err := json.Indent(&b, raw, "", " "); err != nil {
		return "", err
	}
	s := b.String()
	if strings.ContainsAny(s, "<>") {
		return "", fmt.Errorf("encoded data holds a raw %q or %q; refusing to render it in a data block", "<", ">")
	}
	return s, nil
}

// WallData returns the JSON between the wall's delimiter lines of a
// rendered user message, and whether exactly one such block was found.
func WallData(user string) (string, bool) {
	return block(user, WallOpen, WallClose)
}

// ProblemsData returns the JSON between the problems' delimiter lines of a
// rendered repair message, and whether exactly one such block was found.
func ProblemsData(repair string) (string, bool) {
	return block(repair, ProblemsOpen, ProblemsClose)
}

// block finds the single data block between open and close lines.
func block(msg, open, close string) (string, bool) {
	if strings.Count(msg, open) != 1 || strings.Count(msg, close) != 1 {
		return "", false
	}
	_, rest, _ := strings.Cut(msg, "\n"+open+"\n")
	inner, _, ok := strings.Cut(rest, "\n"+close)
	if !ok {
		return "", false
	}
	return inner, true
}

func execute(name string, data any) (string, error) {
	var b bytes.Buffer
	if err := reconcile.ExecuteTemplate(&b, name, data); err != nil {
		return "", fmt.Errorf("prompt %s: render %s: %w", ReconcileVersion, name, err)
	}
	return b.String(), nil
}
