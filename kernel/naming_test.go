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

func TestAncestryPairs(t *testing.T) {
	t.Parallel()
	projects, ids := AncestryPairs([]RunKey{{"p", "a.op-1"}, {"p", "a"}, {"q", "a"}, {"p", "b"}})
	var got []string
	for i := range ids {
		got = append(got, projects[i]+"/"+ids[i])
	}
	if s := strings.Join(got, " "); s != "p/a p/a.op-1 q/a p/b" {
		t.Fatalf("pairs = %q", s)
	}
}
