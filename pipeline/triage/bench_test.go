package triage

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/seed-7bc021c3/reckon/internal/benchpair"
	"github.com/seed-7bc021c3/reckon/internal/fakeopenai"
	"github.com/seed-7bc021c3/reckon/internal/pgtest"
	"github.com/seed-7bc021c3/reckon/kernel"
	"github.com/seed-7bc021c3/reckon/kernel/outbox"
	"github.com/seed-7bc021c3/reckon/pipeline"
	"github.com/seed-7bc021c3/reckon/pipeline/supervisor"
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
		// paired: measured against its outbox-only floor, pair after pair
		// (the model sweep's reference is its concurrency limit).
		paired bool
	}{
		{"builtin", func(b *testing.B) (pipeline.Supervisor, func()) { return supervisor.Builtin{}, func() {} }, true},
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
		}, false},
	}
	for _, c := range cases {
		b.Run(c.name, func(b *testing.B) {
			sup, done := c.model(b)
			defer done()
			// The built-in sweep is measured with its floor, pair after
			// pair, and the pair of median ratio is the figure (benchpair).
			iterations := b.N
			if c.paired {
				reps, err := benchpair.Repeats()
				if err != nil {
					b.Fatal(err)
				}
				iterations *= reps
			}
			var total time.Duration
			var pairs []benchpair.Pair
			for i := 0; i < iterations; i++ {
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
				if c.paired {
					pgtest.Checkpoint(b) // as before its floor
				}
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
				if c.paired {
					floor := outboxFloor(b, rep, 8)
					b.Logf("sweep %.2fs; outbox-only floor (the same %d walls' events enqueued one transaction per wall at concurrency 8) %.2fs; sweep/floor %.2f",
						elapsed.Seconds(), runs, floor.Seconds(), elapsed.Seconds()/floor.Seconds())
					pairs = append(pairs, benchpair.Pair{Value: elapsed.Seconds(), Ref: floor.Seconds()})
				}
			}
			perSweep := total.Seconds() / float64(iterations)
			if c.paired {
				m, ratios := benchpair.Median(pairs)
				perSweep = m.Value
				b.ReportMetric(m.Ref, "floor-s")
				b.ReportMetric(m.Ratio(), "x-floor")
				b.Logf("median of %d pairs (ratios %s): sweep %.2fs against its floor %.2fs, %.2f", len(pairs), ratios, m.Value, m.Ref, m.Ratio())
			}
			b.ReportMetric(perSweep, "s/sweep")
			b.ReportMetric(float64(runs)/perSweep, "walls/s")
			b.Logf("%s: %d runs × %d ops: %.2fs per sweep, %.1f walls/s", c.name, runs, ops, perSweep, float64(runs)/perSweep)
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
	pgtest.Checkpoint(b) // as before the sweep
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

// BenchmarkSweepShared measures one scheduled sweep of 64 projects × 4
// finished runs with one uncertain operation each, shared by 1 and by 2
// sweepers (each its own lock connections and leases, as two pipeline
// processes), with the fake model server adding 200 ms per call at
// concurrency 8 each: the second process halves the model-bound sweep.
func BenchmarkSweepShared(b *testing.B) {
	const projects, runs = 64, 4
	for _, procs := range []int{1, 2} {
		b.Run(fmt.Sprintf("openai_fake_200ms_c8/processes_%d", procs), func(b *testing.B) {
			f := fakeopenai.New()
			defer f.Close()
			f.SetLatency(200 * time.Millisecond)
			sup, err := supervisor.NewOpenAI(supervisor.OpenAIConfig{BaseURL: f.URL, APIKey: "k", Model: "fake-model"})
			if err != nil {
				b.Fatal(err)
			}
			var total time.Duration
			for range b.N {
				b.StopTimer()
				e := newEnv(b)
				for r := range runs {
					e.seedProjects(ids("proj-", projects), fmt.Sprintf("run-%d", r))
				}
				if _, err := e.s.Pool.Exec(context.Background(), "ANALYZE"); err != nil {
					b.Fatal(err)
				}
				sws := make([]*Sweeper, procs)
				for i := range sws {
					sws[i] = e.sweeper(Config{Supervisor: sup, Concurrency: 8, MaxWalls: 10 * projects * runs,
						Shard: &Shard{Leases: e.ops, Holder: fmt.Sprint("p", i), Lease: time.Minute}})
				}
				settleShares(b, sws)
				b.StartTimer()
				elapsed, journaled := sweepAll(b, sws)
				b.StopTimer()
				if journaled != projects*runs {
					b.Fatalf("journaled %d of %d walls", journaled, projects*runs)
				}
				total += elapsed
			}
			per := total.Seconds() / float64(b.N)
			b.ReportMetric(per, "s/sweep")
			b.Logf("%d projects × %d runs, %d sweepers: %.2fs per sweep", projects, runs, procs, per)
		})
	}
}

// settleShares renews the sweepers' leases round after round until each
// holds its fair share.
func settleShares(b *testing.B, sws []*Sweeper) {
	b.Helper()
	for range 3 {
		for _, sw := range sws {
			if _, err := sw.Claim(context.Background()); err != nil {
				b.Fatal(err)
			}
		}
	}
}

// sweepAll runs one sharded sweep on every sweeper at once, and returns
// the time until the last is done and the walls journaled.
func sweepAll(b *testing.B, sws []*Sweeper) (time.Duration, int) {
	b.Helper()
	var (
		wg        sync.WaitGroup
		mu        sync.Mutex
		journaled int
	)
	start := time.Now()
	for _, sw := range sws {
		wg.Go(func() {
			rep, err := sw.Sweep(context.Background(), SweepParams{Sharded: true})
			if err != nil {
				b.Error(err)
				return
			}
			mu.Lock()
			journaled += rep.Journaled
			mu.Unlock()
		})
	}
	wg.Wait()
	return time.Since(start), journaled
}
