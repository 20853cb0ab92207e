package kernel

import (
	"strings"
	"testing"
)

func TestRunAncestry(t *testing.T) {
	t.Parallel()
	got := strings.Join(RunAncestry("a.op-1.op-2-r1"), " ")
	if got != "a a.op-1 a.op-1.op-2-r1" {
		t.Fatalf("ancestry = %q", got)
	}
	if got := strings.Join(RunAncestry(".x."), " "); got != ".x .x." {
		t.Fatalf("ancestry of odd id = %q", got)
	}
	if ChildRunID("a", "op-1") != "a"+ChildSeparator+"op-1" {
		t.Fatal("ChildRunID does not use ChildSeparator")
	}
}
