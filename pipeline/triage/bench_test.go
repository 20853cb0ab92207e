package triage

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/seed-7bc021c3/reckon/kernel"
	"github.com/seed-7bc021c3/reckon/kernel/outbox"
	"github.com/seed-7bc021c3/reckon/pipeline"
	"github.com/seed-7bc021c3/reckon/pipeline/supervisor"
	"github.com/seed-7bc021c3/reckon/pipeline/supervisor/fakeopenai"
)

// seedBench journals runs × ops unsettled operations (uncertain failures,
// in finished runs), in batches.
func seedBench(b *testing.B, e *env, runs, ops int) {
	b.Helper()
	var batch []kernel.Event
	flush := func() {
		if len(batch) > 0 {
			e.ingest(batch...)
			batch = batch[:0]
		}
	}
	for r := 1; r <= runs; r++ {
		run := fmt.Sprintf("bench-%04d", r)
		batch = append(batch, e.event(run, run+"/run/started", kernel.TypeRunStarted, e.t0, map[string]any{}))
		var specs []opSpec
		for o := 1; o <= ops; o++ {
			tool := "run_command"
			if o%2 == 0 {
				tool = "mcp__create_issue"
			}
			specs = append(specs, opSpec{id: fmt.Sprintf("op-%d", o), tool: tool, outcome: "uncertain"})
		}
		batch = append(batch, e.opEvents(run, e.t0, specs...)...)
		batch = append(batch, e.event(run, run+"/run/failed", kernel.TypeRunFailed, e.t0.Add(time.Minute), kernel.RunFailed{Error: "stopped"}))
		if len(batch) >= 2000 {
			flush()
		}
	}
	flush()
}

// BenchmarkSweep measures one sweep over 1,000 runs × 5 unsettled
// operations: with the built-in supervisor, and with the fake model server
// adding 200 ms per call at concurrency 8. Run with `make bench`.
func BenchmarkSweep(b *testing.B) {
	const runs, ops = 1000, 5
	cases := []struct {
		name  string
		model func(b *testing.B) (pipeline.Supervisor, func())
	}{
		{"builtin", func(b *testing.B) (pipeline.Supervisor, func()) { return supervisor.Builtin{}, func() {} }},
		{"openai_fake_200ms_c8", func(b *testing.B) (pipeline.Supervisor, func()) {
			f := fakeopenai.New()
			f.SetLatency(200 * time.Millisecond)
			m, err := supervisor.NewOpenAI(supervisor.OpenAIConfig{BaseURL: f.URL, APIKey: "k", Model: "fake-model"})
			if err != nil {
				b.Fatal(err)
			}
			return m, func() {
				b.Logf("model calls: %d, peak concurrent calls: %d", len(f.Calls()), f.PeakConcurrency())
				f.Close()
			}
		}},
	}
	for _, c := range cases {
		b.Run(c.name, func(b *testing.B) {
			sup, done := c.model(b)
			defer done()
			var total, floor time.Duration
			walls := 0
			for i := 0; i < b.N; i++ {
				b.StopTimer()
				e := newEnv(b)
				seedBench(b, e, runs, ops)
				// Fresh statistics, as autovacuum keeps them in a live
				// database; a just-filled schema has none and the
				// listing's planner then walks the journal per candidate.
				if _, err := e.s.Pool.Exec(context.Background(), "ANALYZE"); err != nil {
					b.Fatal(err)
				}
				sw := e.sweeper(Config{Supervisor: sup, Concurrency: 8, MaxWalls: 10 * runs})
				b.StartTimer()
				start := time.Now()
				rep, err := sw.Sweep(context.Background(), SweepParams{})
				elapsed := time.Since(start)
				b.StopTimer()
				if err != nil {
					b.Fatal(err)
				}
				if rep.Journaled != runs || rep.Failed != 0 {
					b.Fatalf("journaled %d of %d walls, %d failed", rep.Journaled, runs, rep.Failed)
				}
				total += elapsed
				walls += rep.Journaled
				if c.name == "builtin" {
					floor += outboxFloor(b, rep, 8)
				}
			}
			if c.name == "builtin" {
				b.ReportMetric(floor.Seconds()/float64(b.N), "floor-s")
				b.ReportMetric(total.Seconds()/floor.Seconds(), "x-floor")
				b.Logf("outbox-only floor: the same %d walls' events enqueued one transaction per wall at concurrency 8: %.2fs (sweep/floor %.2f)",
					runs, floor.Seconds()/float64(b.N), total.Seconds()/floor.Seconds())
			}
			b.ReportMetric(total.Seconds()/float64(b.N), "s/sweep")
			b.ReportMetric(float64(walls)/total.Seconds(), "walls/s")
			b.Logf("%s: %d runs × %d ops: %.2fs per sweep, %.1f walls/s", c.name, runs, ops, total.Seconds()/float64(b.N), float64(walls)/total.Seconds())
		})
	}
}

// outboxFloor is the built-in sweep's floor: the time to write the same
// events (each wall's verdict and reconciliations, one transaction per
// wall, as record writes them) through the outbox alone, at the sweep's
// concurrency, into a fresh schema. Everything the sweep does beyond this
// (listing, building walls, deciding, the reconcile checks) is its cost.
func outboxFloor(b *testing.B, rep Report, concurrency int) time.Duration {
	b.Helper()
	e := newEnv(b)
	var walls [][]kernel.Event
	for _, w := range rep.Walls {
		if w.Verdict != nil {
			walls = append(walls, append([]kernel.Event{*w.Verdict}, w.Reconciled...))
		}
	}
	ctx := context.Background()
	next := make(chan []kernel.Event)
	var wg sync.WaitGroup
	start := time.Now()
	for range concurrency {
		wg.Go(func() {
			for evs := range next {
				if err := pgx.BeginFunc(ctx, e.s.Pool, func(tx pgx.Tx) error { return outbox.Enqueue(ctx, tx, evs...) }); err != nil {
					b.Error(err)
				}
			}
		})
	}
	for _, w := range walls {
		next <- w
	}
	close(next)
	wg.Wait()
	return time.Since(start)
}
