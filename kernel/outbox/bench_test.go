package outbox_test

import (
	"context"
	"fmt"
	osexec "os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/seed-7bc021c3/reckon/internal/benchpair"
	"github.com/seed-7bc021c3/reckon/internal/pgtest"
	"github.com/seed-7bc021c3/reckon/kernel"
	"github.com/seed-7bc021c3/reckon/kernel/journal"
	"github.com/seed-7bc021c3/reckon/kernel/outbox"
)

// BenchmarkOutboxToJournal enqueues 100,000 events while two publishers
// drain them into the in-process journal, and reports the sustained
// enqueue→delivered rate (the whole path the kernel's events take). Its
// queue peer runs right after each measurement: River's steady benchmark
// (bench/riverref -mode steady), the same number of jobs inserted the same
// way while worked; benchpair.Repeats() pairs, and the pair of median ratio
// is the figure. Without a River build (no module proxy), the events/s of
// the median run alone are reported, and the row says not measured.
func BenchmarkOutboxToJournal(b *testing.B) {
	reps, err := benchpair.Repeats()
	if err != nil {
		b.Fatal(err)
	}
	river := riverSteady(b)
	var pairs, alone []benchpair.Pair
	for range reps {
		rate := measureSustained(b)
		ref := river()
		if ref == 0 {
			// No reference: ordered by the rate itself.
			alone = append(alone, benchpair.Pair{Value: rate, Ref: 1})
			continue
		}
		b.Logf("River steady right after: %.0f jobs/s; ratio %.2f", ref, rate/ref)
		pairs = append(pairs, benchpair.Pair{Value: rate, Ref: ref})
	}
	if len(pairs) == 0 {
		m, _ := benchpair.Median(alone)
		b.ReportMetric(m.Value, "events/s")
		return
	}
	m, ratios := benchpair.Median(pairs)
	b.ReportMetric(m.Value, "events/s")
	b.ReportMetric(m.Ref, "river-jobs/s")
	b.ReportMetric(m.Ratio(), "x-river")
	b.Logf("median of %d pairs (ratios %s): %.0f events/s against River's %.0f jobs/s, %.2f", len(pairs), ratios, m.Value, m.Ref, m.Ratio())
}

// measureSustained is one run of BenchmarkOutboxToJournal's path on a
// fresh schema, in events/s.
func measureSustained(b *testing.B) float64 {
	const total, txSize = 100000, 100
	var elapsedSum time.Duration
	for it := 0; it < b.N; it++ {
		s := pgtest.New(b)
		j := journal.New(s.Pool, nil)
		ctx, cancel := context.WithCancel(context.Background())
		var wg sync.WaitGroup
		pgtest.Checkpoint(b)
		start := time.Now()
		for i := 0; i < 2; i++ {
			p := outbox.NewPublisher(s.Pool, j, outbox.Config{BatchSize: 1000, PollInterval: time.Millisecond}, nil, zerolog.Nop())
			wg.Add(1)
			go func() {
				defer wg.Done()
				_ = p.Run(ctx)
			}()
		}
		// Producers: two concurrent writers, each transaction enqueuing a
		// run's worth of events, as RecordEvent activities would.
		var pw sync.WaitGroup
		for w := 0; w < 2; w++ {
			pw.Add(1)
			go func(w int) {
				defer pw.Done()
				for t := w; t < total/txSize; t += 2 {
					if err := outbox.Enqueue(ctx, s.Pool, events(fmt.Sprintf("r%d", t), txSize)...); err != nil {
						b.Error(err)
						return
					}
				}
			}(w)
		}
		pw.Wait()
		enqueued := time.Since(start)
		// Done when no row is pending: no undelivered row left, stopping
		// at the first one found: a count(*) over the outbox polled this
		// often would take a core from the publishers it is timing.
		// River's reference counts completions in process.
		for {
			var pending bool
			if err := s.Pool.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM kernel_event_outbox_undelivered)`).Scan(&pending); err != nil {
				b.Fatal(err)
			}
			if !pending {
				break
			}
			time.Sleep(5 * time.Millisecond)
		}
		elapsed := time.Since(start)
		cancel()
		wg.Wait()
		var rows, parked int
		_ = s.Pool.QueryRow(context.Background(), "SELECT count(*) FROM journal_events").Scan(&rows)
		_ = s.Pool.QueryRow(context.Background(), "SELECT count(*) FROM kernel_event_outbox WHERE parked_at IS NOT NULL").Scan(&parked)
		if rows != total || parked != 0 {
			b.Fatalf("journal has %d rows, want %d; %d outbox rows parked", rows, total, parked)
		}
		// The next run starts on empty tables; these leave the shared
		// buffers now, not when the benchmark ends.
		if _, err := s.Pool.Exec(context.Background(), "TRUNCATE journal_events, kernel_event_outbox, kernel_event_outbox_undelivered"); err != nil {
			b.Fatal(err)
		}
		b.Logf("outbox→journal: %d events enqueued in %v, all delivered after %v = %.0f events/s sustained",
			total, enqueued.Round(time.Millisecond), elapsed.Round(time.Millisecond), float64(total)/elapsed.Seconds())
		elapsedSum += elapsed
	}
	return float64(total*b.N) / elapsedSum.Seconds()
}

// riverSteady builds bench/riverref (River, in a module of its own) once
// and returns a function that runs its steady benchmark on the tests'
// database and returns jobs/s; 0 when River could not be built or run (the
// reason is logged).
func riverSteady(b *testing.B) func() float64 {
	b.Helper()
	bin := filepath.Join(b.TempDir(), "riverref")
	build := osexec.Command("go", "build", "-o", bin, ".")
	build.Dir = "../../bench/riverref"
	if out, err := build.CombinedOutput(); err != nil {
		b.Logf("no River reference: build bench/riverref: %v\n%s", err, out)
		return func() float64 { return 0 }
	}
	return func() float64 {
		pgtest.Checkpoint(b)
		out, err := osexec.Command(bin, "-mode", "steady", "-url", pgtest.BaseURL()).CombinedOutput()
		if err != nil {
			b.Logf("no River reference: %v\n%s", err, out)
			return 0
		}
		for _, line := range strings.Split(string(out), "\n") {
			if v, ok := strings.CutPrefix(line, "ref river_steady "); ok {
				if rate, err := strconv.ParseFloat(strings.TrimSpace(v), 64); err == nil && rate > 0 {
					return rate
				}
			}
		}
		b.Logf("no River reference: no rate in its output:\n%s", out)
		return 0
	}
}

// ingestOnly hides the journal's IngestTx, forcing the two-commit path the
// HTTP journal takes (deliver, then mark in the claim transaction).
type ingestOnly struct{ j *journal.Store }

func (i ingestOnly) Ingest(ctx context.Context, evs []kernel.Event) ([]kernel.IngestResult, error) {
	return i.j.Ingest(ctx, evs)
}

// BenchmarkPublisherDrain measures the publishers alone: 100,000 events are
// enqueued first (in batches of 1,000), then two publishers drain them into
// the in-process journal, in one commit per batch (tx) and, for
// comparison, through the plain Journal interface (two-commit).
func BenchmarkPublisherDrain(b *testing.B) {
	for _, mode := range []string{"tx", "two-commit"} {
		b.Run(mode, func(b *testing.B) { benchDrain(b, mode) })
	}
}

func benchDrain(b *testing.B, mode string) {
	const total = 100000
	for it := 0; it < b.N; it++ {
		s := pgtest.New(b)
		var j kernel.Journal = journal.New(s.Pool, nil)
		if mode != "tx" {
			j = ingestOnly{journal.New(s.Pool, nil)}
		}
		ctx, cancel := context.WithCancel(context.Background())
		for t := 0; t < total/1000; t++ {
			if err := outbox.Enqueue(ctx, s.Pool, events(fmt.Sprintf("r%d", t), 1000)...); err != nil {
				b.Fatal(err)
			}
		}
		if _, err := s.Pool.Exec(ctx, "VACUUM ANALYZE kernel_event_outbox"); err != nil {
			b.Fatal(err)
		}
		start := time.Now()
		var wg sync.WaitGroup
		for i := 0; i < 2; i++ {
			p := outbox.NewPublisher(s.Pool, j, outbox.Config{BatchSize: 1000, PollInterval: time.Millisecond}, nil, zerolog.Nop())
			wg.Add(1)
			go func() {
				defer wg.Done()
				if err := p.Drain(ctx); err != nil {
					b.Error(err)
				}
			}()
		}
		wg.Wait()
		elapsed := time.Since(start)
		cancel()
		var rows int
		_ = s.Pool.QueryRow(context.Background(), "SELECT count(*) FROM journal_events").Scan(&rows)
		if rows != total {
			b.Fatalf("journal has %d rows, want %d", rows, total)
		}
		rate := float64(total) / elapsed.Seconds()
		b.ReportMetric(rate, "events/s")
		b.Logf("publisher drain (%s): %d pre-enqueued events delivered by 2 publishers in %v = %.0f events/s", mode, total, elapsed.Round(time.Millisecond), rate)
	}
}
