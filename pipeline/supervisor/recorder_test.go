package supervisor

import (
	"context"
	"encoding/json"
	"testing"
)

// TestRecorderKeepsWallsAndDecidesAsBuiltin: the walls come back in the
// order they were handed over, and each decision is the built-in one.
func TestRecorderKeepsWallsAndDecidesAsBuiltin(t *testing.T) {
	t.Parallel()
	first, second := testWall(), testWall()
	second.RunID = "run-2"
	var r Recorder
	d, err := r.Decide(context.Background(), first)
	if err != nil {
		t.Fatal(err)
	}
	want, _ := Builtin{}.Decide(context.Background(), first)
	a, _ := json.Marshal(d)
	b, _ := json.Marshal(want)
	if string(a) != string(b) {
		t.Fatalf("recorder decided %s, builtin %s", a, b)
	}
	if _, err := r.Decide(context.Background(), second); err != nil {
		t.Fatal(err)
	}
	walls := r.Walls()
	if len(walls) != 2 || walls[0].RunID != "run-1" || walls[1].RunID != "run-2" {
		t.Fatalf("recorded walls: %d, want run-1 then run-2", len(walls))
	}
}
