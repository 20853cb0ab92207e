package prompts

import (
	"strings"
	"testing"
)

func TestRenderReconcile(t *testing.T) {
	type op struct{ OperationID string }
	wall := struct {
		Project, RunID  string
		Part, Parts     int
		Operations      []op
		EarlierVerdicts []int
	}{"acme", "run-1", 1, 2, []op{{"op-1"}, {"op-2"}}, []int{1}}
	p, err := RenderReconcile(ReconcileData{Wall: wall, WallJSON: `{"x":1}`})
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"Operation ids: op-1, op-2.", "Wall 1 of 2", "1 earlier verdict", `{"x":1}`} {
		if !strings.Contains(p.User, want) {
			t.Errorf("user message lacks %q:\n%s", want, p.User)
		}
	}
	if !strings.Contains(p.System, "at most 2000 bytes") {
		t.Errorf("system message lacks the note bound:\n%s", p.System)
	}
	r, err := RenderRepair("operations is missing op-2")
	if err != nil || !strings.Contains(r, "operations is missing op-2") {
		t.Fatalf("repair: %q %v", r, err)
	}
	// A wall value without the fields the template reads is an error, not a panic.
	if _, err := RenderReconcile(ReconcileData{Wall: struct{}{}}); err == nil {
		t.Fatal("want an error for a wall without fields")
	}
}
