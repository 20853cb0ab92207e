package triage

import (
	"context"
	"testing"
	"time"

	"github.com/seed-7bc021c3/reckon/internal/reckontest"
)

func TestRunScheduleSweeps(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.seedRun("run-1", opSpec{id: "op-1", outcome: "uncertain"})
	sw := e.sweeper(Config{})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- sw.RunSchedule(ctx, "@every 1s", SweepParams{}) }()
	reckontest.Eventually(t, 10*time.Second, "the scheduled sweep's verdict", func() bool { return e.outboxRows() > 0 })
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	e.drain()
	if vs := e.runVerdicts("run-1"); len(vs) != 1 {
		t.Fatalf("scheduled sweep verdicts: %d", len(vs))
	}
	if err := sw.RunSchedule(context.Background(), "not a spec", SweepParams{}); err == nil {
		t.Fatal("a bad spec must be an error")
	}
}
