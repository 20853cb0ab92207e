package triage

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/seed-7bc021c3/reckon/internal/reckontest"
	"github.com/seed-7bc021c3/reckon/pipeline"
	"github.com/seed-7bc021c3/reckon/pipeline/supervisor"
)

// TestOncallGauges: a scheduled sweep leaves the unresolved gauge at what
// it listed minus what it settled, counts its outcome, and sets the last
// success only when no wall failed; the backlog refresh fills the
// operator's queue gauges, whose age grows with the clock between
// refreshes; a sweep of one project touches none of them.
func TestOncallGauges(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := newEnv(t)
	e.seedRun("run-1", uncertainOps(2)...)
	e.seedRun("run-2", opSpec{id: "op-1", outcome: "crash"})
	reg := prometheus.NewRegistry()
	// A minute ahead of the journal's clock, so that every decision is in its past.
	clock := reckontest.NewClock(time.Now().UTC().Add(time.Minute).Truncate(time.Second))
	modelDown := true
	sup := decideFunc{name: "flaky", f: func(ctx context.Context, w pipeline.Wall) (pipeline.Decision, error) {
		if modelDown && w.RunID == "run-2" {
			return pipeline.Decision{}, errors.New("model unreachable")
		}
		return supervisor.Builtin{}.Decide(ctx, w)
	}}
	sw := e.sweeper(Config{Supervisor: sup, Metrics: NewMetrics(reg), Now: clock.Now})
	gauge := func(name string, labels map[string]string) float64 {
		t.Helper()
		return reckontest.Value(t, reg, name, labels)
	}

	if _, err := sw.Sweep(ctx, SweepParams{}); err != nil {
		t.Fatal(err)
	}
	if got := gauge("reckon_operations_unresolved", map[string]string{"project": "acme", "state": "crash_window"}); got != 1 {
		t.Errorf("unresolved crash_window %v, want run-2's operation, left by its failed wall", got)
	}
	if _, ok := reckontest.Sample(t, reg, "reckon_operations_unresolved", map[string]string{"project": "acme", "state": "failed_uncertain"}); ok {
		t.Error("run-1's operations, settled by the sweep, are still counted unresolved")
	}
	if got := gauge("reckon_triage_sweeps_total", map[string]string{"outcome": "walls_failed"}); got != 1 {
		t.Errorf("walls_failed sweeps %v, want 1", got)
	}
	if _, ok := reckontest.Sample(t, reg, "reckon_triage_last_success_timestamp_seconds", map[string]string{}); ok {
		t.Error("a sweep with a failed wall set the last success")
	}

	e.drain()
	if err := sw.RefreshBacklog(ctx); err != nil {
		t.Fatal(err)
	}
	acme := map[string]string{"project": "acme"}
	if got := gauge("reckon_attention_operations", acme); got != 2 {
		t.Errorf("attention %v, want run-1's two unknowns", got)
	}
	age := gauge("reckon_attention_oldest_age_seconds", acme)
	clock.Advance(10 * time.Minute)
	if later := gauge("reckon_attention_oldest_age_seconds", acme); later-age != 600 {
		t.Errorf("oldest age %v then %v ten minutes later, want it grown by 600", age, later)
	}
	if got := gauge("reckon_runs_awaiting", acme); got != 0 {
		t.Errorf("runs awaiting %v, want 0", got)
	}

	if _, err := sw.Sweep(ctx, SweepParams{Project: "acme"}); err != nil {
		t.Fatal(err)
	}
	if got := gauge("reckon_triage_sweeps_total", map[string]string{"outcome": "walls_failed"}); got != 1 {
		t.Errorf("a sweep of one project counted as scheduled: walls_failed %v", got)
	}
	modelDown = false
	if _, err := sw.Sweep(ctx, SweepParams{}); err != nil {
		t.Fatal(err)
	}
	if got := gauge("reckon_triage_last_success_timestamp_seconds", map[string]string{}); got != float64(clock.Now().Unix()) {
		t.Errorf("last success %v, want the clock's %d", got, clock.Now().Unix())
	}
	if got := gauge("reckon_triage_sweeps_total", map[string]string{"outcome": "ok"}); got != 1 {
		t.Errorf("ok sweeps %v, want 1", got)
	}
	if _, ok := reckontest.Sample(t, reg, "reckon_operations_unresolved", map[string]string{"project": "acme", "state": "crash_window"}); ok {
		t.Error("the operation the last sweep settled is still counted unresolved")
	}
}
