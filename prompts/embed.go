// Package prompts holds the supervisor's prompt templates, embedded and
// versioned: every verdict records the version of the prompt that produced
// it, so a change of wording is a new file (reconcile_v2.tmpl), never an
// edit of a released one.
package prompts

import (
	"bytes"
	"embed"
	"fmt"
	"text/template"

	"github.com/seed-7bc021c3/reckon/kernel"
)

//go:embed *.tmpl
var files embed.FS

// ReconcileVersion is the version of the reconciliation prompt in use; it
// names the template file without its extension.
const ReconcileVersion = "reconcile_v1"

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

// ReconcileData is what the reconciliation template reads.
type ReconcileData struct {
	// Wall is the wall itself (any value with the fields the template
	// uses: Project, RunID, Part, Parts, Operations, EarlierVerdicts).
	Wall any
	// WallJSON is the wall's JSON as the supervisor reads it.
	WallJSON string
}

// MaxNoteBytes is the bound on each note the template states: the one
// validation enforces.
func (ReconcileData) MaxNoteBytes() int { return kernel.MaxNoteBytes }

// RenderReconcile renders the system and user messages for a wall.
func RenderReconcile(d ReconcileData) (Reconcile, error) {
	if reconcileErr != nil {
		return Reconcile{}, fmt.Errorf("prompt %s: parse: %w", ReconcileVersion, reconcileErr)
	}
	sys, err := execute("system", d)
	if err != nil {
		return Reconcile{}, err
	}
	user, err := execute("user", d)
	if err != nil {
		return Reconcile{}, err
	}
	return Reconcile{System: sys, User: user}, nil
}

// RenderRepair renders the message that feeds a validation problem back to
// the model once.
func RenderRepair(problem string) (string, error) {
	if reconcileErr != nil {
		return "", fmt.Errorf("prompt %s: parse: %w", ReconcileVersion, reconcileErr)
	}
	return execute("repair", struct{ Problem string }{problem})
}

func execute(name string, data any) (string, error) {
	var b bytes.Buffer
	if err := reconcile.ExecuteTemplate(&b, name, data); err != nil {
		return "", fmt.Errorf("prompt %s: render %s: %w", ReconcileVersion, name, err)
	}
	return b.String(), nil
}
