package journal_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/seed-7bc021c3/reckon/internal/pgtest"
	"github.com/seed-7bc021c3/reckon/kernel"
	"github.com/seed-7bc021c3/reckon/kernel/journal"
)

// benchIngest ingests total events in batches of size from clients
// concurrent callers and reports events/s.
func benchIngest(b *testing.B, size, total, clients int) {
	ctx := context.Background()
	s := journal.New(pgtest.New(b).Pool, nil)
	seq := 0
	mk := func() []kernel.Event {
		out := make([]kernel.Event, size)
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
	b.ResetTimer()
	var elapsed time.Duration
	for it := 0; it < b.N; it++ {
		batches := make([][]kernel.Event, total/size)
		for i := range batches {
			batches[i] = mk()
		}
		next := make(chan []kernel.Event, len(batches))
		for _, batch := range batches {
			next <- batch
		}
		close(next)
		start := time.Now()
		var wg sync.WaitGroup
		for range clients {
			wg.Go(func() {
				for batch := range next {
					res, err := s.Ingest(ctx, batch)
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
	rate := float64(total*b.N) / elapsed.Seconds()
	b.ReportMetric(rate, "events/s")
	b.Logf("journal ingest, batch %d, %d client(s): %d events in %v = %.0f events/s", size, clients, total*b.N, elapsed.Round(time.Millisecond), rate)
}

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
