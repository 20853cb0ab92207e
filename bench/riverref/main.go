// Command riverref is `make bench`'s queue-peer reference: River
// (github.com/riverqueue/river), a PostgreSQL job queue, working no-op jobs
// on the same PostgreSQL as reckon's outbox benchmarks, in the same run. It
// is modelled on River's own `river bench` (cmd/river/riverbench, not served
// by the module proxy, hence written here) and shaped like the two reckon
// benchmarks it is compared with (kernel/outbox/bench_test.go):
//
//   - burn-down, like BenchmarkPublisherDrain: N jobs are inserted first
//     (batches of 1,000, then VACUUM ANALYZE), then the clock runs from the
//     started client to the last job completed;
//   - steady, like BenchmarkOutboxToJournal: with the client working, two
//     producers insert N jobs between them, 100 per InsertMany (one
//     transaction each, as a run's RecordEvent enqueues its events), and the
//     clock runs from the first insert to the last job completed.
//
// A job counts when River's completer has persisted it (the subscription's
// completed event), as an event counts when the journal has it. The client
// uses River's bench settings (fetch cooldown 2 ms, poll 20 ms, 2,000
// workers), so the reference is River at its tuned best, and a pool of 8
// connections like the reckon benchmarks' pgtest schemas.
//
// It lives in its own module so that River stays out of reckon's go.mod;
// make bench runs it with `cd bench/riverref && go run .`. It works in a
// schema of its own (created, migrated with rivermigrate, dropped) and prints
// "ref NAME JOBS_PER_SECOND" lines for scripts/benchtable.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"strconv"
	"sync"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/riverqueue/river/rivermigrate"
)

// defaultURL is the database the reckon benchmarks make their schemas in
// (internal/pgtest.DefaultURL).
const defaultURL = "postgres://127.0.0.1:5432/reckon_test?sslmode=disable"

// benchArgs is the no-op job; Num keeps the args non-empty as River's
// bench does.
type benchArgs struct {
	Num int `json:"num"`
}

// Kind names the job kind for River.
func (benchArgs) Kind() string { return "reckon_bench" }

// noopWorker completes every job at once: the reference measures the queue,
// not the work.
type noopWorker struct {
	river.WorkerDefaults[benchArgs]
}

// Work does nothing.
func (*noopWorker) Work(context.Context, *river.Job[benchArgs]) error { return nil }

type options struct {
	url                  string
	mode                 string
	n                    int
	producers, txSize    int
	preBatch, maxWorkers int
	timeout              time.Duration
}

func main() {
	o := options{}
	flag.StringVar(&o.url, "url", envOr("RECKON_TEST_DATABASE_URL", defaultURL), "PostgreSQL to measure on (a schema of its own is created there and dropped)")
	flag.StringVar(&o.mode, "mode", "both", "burndown, steady or both")
	flag.IntVar(&o.n, "n", 100000, "jobs per measurement (the outbox benchmarks' 100,000 events)")
	flag.IntVar(&o.producers, "producers", 2, "steady: concurrent producers (BenchmarkOutboxToJournal's 2 writers)")
	flag.IntVar(&o.txSize, "tx", 100, "steady: jobs per InsertMany (BenchmarkOutboxToJournal's 100 events per transaction)")
	flag.IntVar(&o.preBatch, "prebatch", 1000, "burn-down: jobs per InsertMany when pre-inserting (BenchmarkPublisherDrain's 1,000)")
	flag.IntVar(&o.maxWorkers, "workers", 2000, "River MaxWorkers (River's bench uses 2,000)")
	flag.DurationVar(&o.timeout, "timeout", 10*time.Minute, "give up after this long")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, o)
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "riverref:", err)
		os.Exit(1)
	}
}

func envOr(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}

func run(ctx context.Context, o options) error {
	if o.mode != "burndown" && o.mode != "steady" && o.mode != "both" {
		return fmt.Errorf("-mode %q: want burndown, steady or both", o.mode)
	}
	if o.n <= 0 || o.producers <= 0 || o.txSize <= 0 || o.preBatch <= 0 {
		return errors.New("-n, -producers, -tx and -prebatch must be positive")
	}
	ctx, cancel := context.WithTimeout(ctx, o.timeout)
	defer cancel()
	schema := "riverref_" + strconv.Itoa(os.Getpid())
	admin, err := pgx.Connect(ctx, o.url)
	if err != nil {
		return fmt.Errorf("connect %s: %w", o.url, err)
	}
	defer func() { _ = admin.Close(context.Background()) }()
	if _, err := admin.Exec(ctx, "CREATE SCHEMA "+schema); err != nil {
		return fmt.Errorf("create schema %s: %w", schema, err)
	}
	// Dropped on every way out (a failure, a timeout, Ctrl-C), on a fresh
	// context since ctx may be the reason for leaving.
	defer func() {
		dctx, dcancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer dcancel()
		if _, err := admin.Exec(dctx, "DROP SCHEMA "+schema+" CASCADE"); err != nil {
			fmt.Fprintf(os.Stderr, "riverref: drop schema %s: %v\n", schema, err)
		}
	}()

	cfg, err := pgxpool.ParseConfig(o.url)
	if err != nil {
		return fmt.Errorf("parse %s: %w", o.url, err)
	}
	cfg.MaxConns = 8 // as internal/pgtest gives the reckon benchmarks
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return fmt.Errorf("pool: %w", err)
	}
	defer pool.Close()
	driver := riverpgxv5.New(pool)
	migrator, err := rivermigrate.New(driver, &rivermigrate.Config{Schema: schema})
	if err != nil {
		return fmt.Errorf("river migrator: %w", err)
	}
	if _, err := migrator.Migrate(ctx, rivermigrate.DirectionUp, nil); err != nil {
		return fmt.Errorf("river migrations in %s: %w", schema, err)
	}

	b := bench{o: o, pool: pool, driver: driver, schema: schema}
	if o.mode != "steady" {
		rate, elapsed, err := b.burnDown(ctx)
		if err != nil {
			return fmt.Errorf("burn-down: %w", err)
		}
		fmt.Printf("River burn-down: %d pre-inserted no-op jobs completed in %v = %.0f jobs/s\n", o.n, elapsed.Round(time.Millisecond), rate)
		fmt.Printf("ref river_burndown %.0f\n", rate)
	}
	if o.mode != "burndown" {
		rate, elapsed, err := b.steady(ctx)
		if err != nil {
			return fmt.Errorf("steady: %w", err)
		}
		fmt.Printf("River steady: %d no-op jobs inserted by %d producers (%d per InsertMany) while worked, all completed after %v = %.0f jobs/s\n",
			o.n, o.producers, o.txSize, elapsed.Round(time.Millisecond), rate)
		fmt.Printf("ref river_steady %.0f\n", rate)
	}
	return nil
}

type bench struct {
	o      options
	pool   *pgxpool.Pool
	driver *riverpgxv5.Driver
	schema string
}

// client empties the jobs table and returns a River client on the schema
// with River's bench settings, and a channel that receives once per job
// completed.
func (b *bench) client(ctx context.Context) (*river.Client[pgx.Tx], <-chan *river.Event, func(), error) {
	if err := b.reset(ctx); err != nil {
		return nil, nil, nil, err
	}
	workers := river.NewWorkers()
	river.AddWorker(workers, &noopWorker{})
	c, err := river.NewClient(b.driver, &river.Config{
		FetchCooldown:     2 * time.Millisecond,
		FetchPollInterval: 20 * time.Millisecond,
		Queues:            map[string]river.QueueConfig{river.QueueDefault: {MaxWorkers: b.o.maxWorkers}},
		Schema:            b.schema,
		Workers:           workers,
	})
	if err != nil {
		return nil, nil, nil, fmt.Errorf("river client: %w", err)
	}
	// Room for every job's event: a dropped event would leave the count
	// short and the measurement waiting for the timeout.
	events, unsubscribe := c.SubscribeConfig(&river.SubscribeConfig{
		ChanSize: b.o.n,
		Kinds:    []river.EventKind{river.EventKindJobCompleted, river.EventKindJobFailed, river.EventKindJobCancelled},
	})
	return c, events, unsubscribe, nil
}

// await counts completed jobs until want, and fails on a job that did not
// complete (a no-op worker never fails, so that is a broken reference).
func await(ctx context.Context, events <-chan *river.Event, want int) error {
	for done := 0; done < want; {
		select {
		case <-ctx.Done():
			return fmt.Errorf("%d of %d jobs completed: %w", done, want, ctx.Err())
		case ev, ok := <-events:
			if !ok {
				return fmt.Errorf("subscription closed after %d of %d jobs", done, want)
			}
			if ev.Kind != river.EventKindJobCompleted {
				return fmt.Errorf("job %d: %s", ev.Job.ID, ev.Kind)
			}
			done++
		}
	}
	return nil
}

// reset empties the jobs table between the measurements, as River's bench
// does before each (TRUNCATE, VACUUM FULL).
func (b *bench) reset(ctx context.Context) error {
	if _, err := b.pool.Exec(ctx, "TRUNCATE "+b.schema+".river_job"); err != nil {
		return fmt.Errorf("truncate river_job: %w", err)
	}
	if _, err := b.pool.Exec(ctx, "VACUUM FULL "+b.schema+".river_job"); err != nil {
		return fmt.Errorf("vacuum river_job: %w", err)
	}
	return nil
}

func (b *bench) insert(ctx context.Context, c *river.Client[pgx.Tx], from, count int) error {
	params := make([]river.InsertManyParams, count)
	for i := range params {
		params[i].Args = benchArgs{Num: from + i}
	}
	if _, err := c.InsertMany(ctx, params); err != nil {
		return fmt.Errorf("insert jobs %d–%d: %w", from, from+count-1, err)
	}
	return nil
}

// stopClient stops c within a bounded time: after the measurement, so
// its cost is not measured.
func stopClient(c *river.Client[pgx.Tx]) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := c.Stop(ctx); err != nil {
		fmt.Fprintln(os.Stderr, "riverref: stop client:", err)
	}
}

func (b *bench) burnDown(ctx context.Context) (float64, time.Duration, error) {
	c, events, unsubscribe, err := b.client(ctx)
	if err != nil {
		return 0, 0, err
	}
	defer unsubscribe()
	for from := 0; from < b.o.n; from += b.o.preBatch {
		if err := b.insert(ctx, c, from, min(b.o.preBatch, b.o.n-from)); err != nil {
			return 0, 0, err
		}
	}
	if _, err := b.pool.Exec(ctx, "VACUUM ANALYZE "+b.schema+".river_job"); err != nil {
		return 0, 0, fmt.Errorf("vacuum analyze river_job: %w", err)
	}
	if err := c.Start(ctx); err != nil {
		return 0, 0, fmt.Errorf("start client: %w", err)
	}
	defer stopClient(c)
	start := time.Now()
	if err := await(ctx, events, b.o.n); err != nil {
		return 0, 0, err
	}
	elapsed := time.Since(start)
	return float64(b.o.n) / elapsed.Seconds(), elapsed, b.verify(ctx)
}

func (b *bench) steady(ctx context.Context) (float64, time.Duration, error) {
	c, events, unsubscribe, err := b.client(ctx)
	if err != nil {
		return 0, 0, err
	}
	defer unsubscribe()
	if err := c.Start(ctx); err != nil {
		return 0, 0, fmt.Errorf("start client: %w", err)
	}
	defer stopClient(c)
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	start := time.Now()
	var wg sync.WaitGroup
	// Producer p inserts transactions p, p+producers, …, as the reckon
	// benchmark's writers split theirs.
	for p := 0; p < b.o.producers; p++ {
		wg.Go(func() {
			for from := p * b.o.txSize; from < b.o.n; from += b.o.producers * b.o.txSize {
				if err := b.insert(ctx, c, from, min(b.o.txSize, b.o.n-from)); err != nil {
					cancel(err)
					return
				}
			}
		})
	}
	err = await(ctx, events, b.o.n)
	elapsed := time.Since(start)
	wg.Wait()
	if err != nil {
		// A producer's failure is the reason, not the wait it cut short.
		if cause := context.Cause(ctx); cause != nil && !errors.Is(cause, context.Canceled) && !errors.Is(cause, context.DeadlineExceeded) {
			return 0, 0, cause
		}
		return 0, 0, err
	}
	return float64(b.o.n) / elapsed.Seconds(), elapsed, b.verify(ctx)
}

// verify checks the table agrees with the subscription: every job
// inserted, every one completed.
func (b *bench) verify(ctx context.Context) error {
	var total, completed int
	if err := b.pool.QueryRow(ctx, "SELECT count(*), count(*) FILTER (WHERE state = 'completed') FROM "+b.schema+".river_job").Scan(&total, &completed); err != nil {
		return fmt.Errorf("count jobs: %w", err)
	}
	if total != b.o.n || completed != b.o.n {
		return fmt.Errorf("river_job has %d jobs, %d completed; want %d", total, completed, b.o.n)
	}
	return nil
}
