package evals

import (
	"context"
	"testing"
	"time"

	"github.com/seed-7bc021c3/reckon/pipeline/supervisor"
)

// The suite and baseline committed before workspace manifests keep
// loading and scoring: their events carry no workspace_manifest, so
// the diff probe has nothing to compare and the built-in supervisor settles
// what it settled then, with nothing unsafe, and passes the gate of the
// baseline recorded with them.
func TestPreviousSuiteStillLoadsAndScores(t *testing.T) {
	t.Parallel()
	fx, err := LoadDir("testdata/suite-20261130-v1")
	if err != nil {
		t.Fatalf("load the previous suite: %v", err)
	}
	if len(fx) != 74 {
		t.Fatalf("previous suite: %d fixtures loaded, want 74", len(fx))
	}
	bl, err := ReadBaseline("testdata/baseline-20261130-v1.json")
	if err != nil {
		t.Fatalf("read the previous baseline: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	rep, err := Score(ctx, supervisor.Builtin{}, fx, ScoreParams{CaseTimeout: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	m := rep.Metrics
	if m.UnsafeNone+m.UnsafeOccurred > 0 || m.Accuracy == nil || *m.Accuracy < 1 {
		t.Fatalf("previous suite scored unsafe or inaccurate: %s", Markdown(rep))
	}
	if err := Gate(rep, bl); err != nil {
		t.Fatalf("previous suite against its own baseline: %v", err)
	}
	t.Logf("previous suite: coverage %.1f%%, accuracy %.1f%%", *m.Coverage*100, *m.Accuracy*100)
}
