package journal_test

import (
	"context"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/seed-7bc021c3/reckon/internal/benchpair"
	"github.com/seed-7bc021c3/reckon/internal/pgtest"
	"github.com/seed-7bc021c3/reckon/kernel"
	"github.com/seed-7bc021c3/reckon/kernel/journal"
)

// benchIngest ingests total events in batches of size from clients
// concurrent callers and reports events/s, against pgbench doing the same
// right after: benchpair.Repeats() pairs, each on a fresh journal, and the
// pair of median ratio is the figure.
func benchIngest(b *testing.B, size, total, clients int) {
	reps, err := benchpair.Repeats()
	if err != nil {
		b.Fatal(err)
	}
	script := map[int]string{1: "batch1", 500: "batch500"}[size]
	var pairs []benchpair.Pair
	for range reps {
		rate, elapsed := measureIngest(b, size, total, clients)
		// The reference right after, on the same server: pgbench writing the
		// same table shape the same way (rows per transaction, clients), so
		// that whatever else loads the machine loads both.
		ref := pgbenchRef(b, script, size, clients, elapsed)
		if ref == 0 {
			b.ReportMetric(rate, "events/s")
			return
		}
		b.Logf("journal ingest, batch %d, %d client(s): %d events in %v = %.0f events/s; pgbench %s right after: %.0f events/s; ratio %.2f",
			size, clients, total, elapsed.Round(time.Millisecond), rate, script, ref, rate/ref)
		pairs = append(pairs, benchpair.Pair{Value: rate, Ref: ref})
	}
	m, ratios := benchpair.Median(pairs)
	b.ReportMetric(m.Value, "events/s")
	b.ReportMetric(m.Ref, "ref-events/s")
	b.ReportMetric(m.Ratio(), "x-ref")
	b.Logf("median of %d pairs (ratios %s): %.0f events/s against pgbench %.0f, ratio %.2f", len(pairs), ratios, m.Value, m.Ref, m.Ratio())
}

// measureIngest times total events ingested in batches of size by clients
// callers into a fresh journal, and returns events/s and the time it took
// per iteration.
func measureIngest(b *testing.B, size, total, clients int) (float64, time.Duration) {
	ctx := context.Background()
	pool := pgtest.New(b).Pool
	s := journal.New(pool, nil)
	seq := 0
	mk := func(n int) []kernel.Event {
		out := make([]kernel.Event, n)
		for i := range out {
			seq++
			// A realistic mix: a start and a completion per operation.
			typ, data := kernel.TypeToolStarted, fmt.Sprintf(`{"operation_id":"op-%d","tool":"run_command","args":{"command":"echo %d > f"}}`, seq/2, seq)
			if seq%2 == 1 {
				typ, data = kernel.TypeToolCompleted, fmt.Sprintf(`{"operation_id":"op-%d","result_summary":"exit 0"}`, seq/2)
			}
			out[i] = kernel.Event{SourceID: "bench", EventID: fmt.Sprintf("e-%d", seq), Project: "bench",
				RunID: fmt.Sprintf("run-%d", seq/100), Type: typ, TS: time.Now().UTC(), Actor: "agent", Data: []byte(data)}
		}
		return out
	}
	// A journal in service is large and analyzed, and pgplan runs the
	// ingest statement on its generic plan only then: 20,000 events and
	// ANALYZE before the clock starts (the pgbench reference table gets
	// the same).
	for range warmEvents / 500 {
		if _, err := s.Ingest(ctx, mk(500)); err != nil {
			b.Fatal(err)
		}
	}
	if _, err := pool.Exec(ctx, pgtest.AnalyzeJournalSQL); err != nil {
		b.Fatal(err)
	}
	var elapsed time.Duration
	for it := 0; it < b.N; it++ {
		batches := make([][]kernel.Event, total/size)
		for i := range batches {
			batches[i] = mk(size)
		}
		next := make(chan []kernel.Event, len(batches))
		for _, batch := range batches {
			next <- batch
		}
		close(next)
		pgtest.Checkpoint(b)
		start := time.Now()
		var wg sync.WaitGroup
		for range clients {
			wg.Go(func() {
				for batch := range next {
					// The agents' path (POST /v1/events): each write also
					// refuses kernel runs in its own transaction.
					res, err := s.IngestAgentEvents(ctx, batch)
					if err != nil {
						b.Error(err)
						return
					}
					if res[0].Status != kernel.StatusAccepted {
						b.Errorf("status %s", res[0].Status)
						return
					}
				}
			})
		}
		wg.Wait()
		elapsed += time.Since(start)
	}
	// The next pair starts from a fresh journal of its own; this one's
	// pages leave the shared buffers now, not when the benchmark ends.
	if _, err := pool.Exec(ctx, "TRUNCATE journal_events"); err != nil {
		b.Fatal(err)
	}
	return float64(total*b.N) / elapsed.Seconds(), elapsed / time.Duration(b.N)
}

// warmEvents is how many events both the journal and the pgbench reference
// table hold, analyzed, before the measurement.
const warmEvents = 20000

// BenchmarkIngestBatch1 measures single-event ingest from one caller (one
// round trip and one commit each: a lone caller has nothing to share with).
func BenchmarkIngestBatch1(b *testing.B) { benchIngest(b, 1, 5000, 1) }

// BenchmarkIngestSingleConcurrent measures single-event ingest from 8
// concurrent callers, as HTTP clients posting one event each would: group
// commit lets them share round trips (the pgbench reference runs 8
// clients too).
func BenchmarkIngestSingleConcurrent(b *testing.B) { benchIngest(b, 1, 20000, 8) }

// BenchmarkIngestBatch500 measures batched ingest.
func BenchmarkIngestBatch500(b *testing.B) { benchIngest(b, 500, 100000, 1) }

// pgbenchRef runs bench/pgbench_<script>.sql (the journal's table shape
// and indexes, INSERT ... ON CONFLICT DO NOTHING, rows per transaction)
// with clients for about as long as the measurement took, and returns
// events/s; 0 when pgbench is not installed.
func pgbenchRef(b *testing.B, script string, rows, clients int, d time.Duration) float64 {
	b.Helper()
	bin, err := exec.LookPath("pgbench")
	if err != nil {
		b.Logf("no pgbench reference: %v", err)
		return 0
	}
	s := pgtest.New(b)
	u, err := url.Parse(s.URL)
	if err != nil {
		b.Fatal(err)
	}
	u.RawQuery = "sslmode=disable" // pgbench's libpq takes no search_path
	setup, err := os.ReadFile("../../bench/pgbench_setup.sql")
	if err != nil {
		b.Fatal(err)
	}
	if _, err := s.Pool.Exec(context.Background(), string(setup)); err != nil {
		b.Fatalf("pgbench setup: %v", err)
	}
	if _, err := s.Pool.Exec(context.Background(), fmt.Sprintf(`INSERT INTO pgbench_ref.keys (source_id, event_id, project, run_id, seq, payload_digest)
SELECT 'warm', 'e-' || g, 'bench', 'run-' || (g / 100), g, '\x00' FROM generate_series(1, %[1]d) g;
SELECT setval('pgbench_ref.seq', %[1]d);
INSERT INTO pgbench_ref.events (seq, source_id, event_id, project,
    run_id, type, ts, actor, data, payload_digest, operation_id, settles, open)
SELECT g, 'warm', 'e-' || g, 'bench', 'run-' || (g / 100), 'tool.started', now(), 'agent', '{}', '\x00', 'op-' || g, false, true
FROM generate_series(1, %[1]d) g; ANALYZE pgbench_ref.keys; ANALYZE pgbench_ref.events_week`, warmEvents)); err != nil {
		b.Fatalf("pgbench warm-up: %v", err)
	}
	defer func() { _, _ = s.Pool.Exec(context.Background(), "DROP SCHEMA pgbench_ref CASCADE") }()
	secs := max(3, min(10, int(d.Seconds()+0.5)))
	pgtest.Checkpoint(b)
	out, err := exec.Command(bin, "-n", "-c", strconv.Itoa(clients), "-j", "1", "-T", strconv.Itoa(secs),
		"-f", "../../bench/pgbench_"+script+".sql", u.String()).CombinedOutput()
	if err != nil {
		b.Fatalf("pgbench: %v\n%s", err, out)
	}
	for _, line := range strings.Split(string(out), "\n") {
		if f := strings.Fields(line); len(f) >= 3 && f[0] == "tps" {
			tps, err := strconv.ParseFloat(f[2], 64)
			if err != nil {
				b.Fatalf("pgbench output %q: %v", line, err)
			}
			return tps * float64(rows)
		}
	}
	b.Fatalf("no tps in pgbench output:\n%s", out)
	return 0
}

// BenchmarkRunEvents reads one run of 20 events (ten operations, started
// and completed) back from the journal, as the triage sweep reads each
// run and GET /v1/runs/{run_id} reads a page: the client's cost of
// scanning rows, per read (go test -bench RunEvents -benchmem).
func BenchmarkRunEvents(b *testing.B) {
	ctx := context.Background()
	s := journal.New(pgtest.New(b).Pool, nil)
	evs := make([]kernel.Event, 20)
	for i := range evs {
		typ, data := kernel.TypeToolStarted, fmt.Sprintf(`{"operation_id":"op-%d","tool":"run_command","args":{"command":"echo %d > f","timeout_s":30,"env":{"A":"1","B":"2"}}}`, i/2, i)
		if i%2 == 1 {
			typ, data = kernel.TypeToolCompleted, fmt.Sprintf(`{"operation_id":"op-%d","result_summary":"exit 0","output":{"stdout":"ok\n","exit_code":0}}`, i/2)
		}
		evs[i] = kernel.Event{SourceID: "bench", EventID: fmt.Sprintf("e-%d", i), Project: "bench", RunID: "run-1",
			Type: typ, TS: time.Now().UTC(), Actor: "agent", Data: []byte(data)}
	}
	if _, err := s.Ingest(ctx, evs); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		got, err := s.RunEvents(ctx, "bench", "run-1")
		if err != nil || len(got) != len(evs) {
			b.Fatalf("read %d events (%v), want %d", len(got), err, len(evs))
		}
	}
}
