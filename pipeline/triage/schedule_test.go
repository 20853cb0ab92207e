package triage

import (
	"context"
	"testing"
	"time"
)

func TestRunScheduleSweeps(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.seedRun("run-1", opSpec{id: "op-1", outcome: "uncertain"})
	sw := e.sweeper(Config{})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- sw.RunSchedule(ctx, "@every 1s", SweepParams{}) }()
	deadline := time.Now().Add(10 * time.Second)
	for e.outboxRows() == 0 && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
	}
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
