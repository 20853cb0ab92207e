package runner

import (
	"context"
	"fmt"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/seed-7bc021c3/reckon/kernel"
)

// noopTool does nothing and notes when it ran, so that the benchmark sees
// only the kernel's own cost per call.
type noopTool struct {
	mu  sync.Mutex
	ran map[string]time.Time // run_id/operation_id → execution time
}

func (n *noopTool) Name() string                   { return "noop" }
func (n *noopTool) Validate(kernel.ToolCall) error { return nil }
func (n *noopTool) Execute(_ context.Context, c kernel.ToolCall) (kernel.ToolResult, error) {
	n.mu.Lock()
	n.ran[c.RunID+"/"+c.OperationID] = time.Now()
	n.mu.Unlock()
	return kernel.ToolResult{Summary: "noop"}, nil
}

func quantile(xs []time.Duration, q float64) time.Duration {
	s := append([]time.Duration(nil), xs...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	return s[int(q*float64(len(s)-1)+0.5)]
}

// BenchmarkToolCallOverhead measures the kernel's cost per tool call of a
// no-op tool on the embedded Temporal server and real PostgreSQL:
//
//   - call: the interval between consecutive no-op executions of a run,
//     i.e. the whole per-step path — RecordEvent(tool.completed) and
//     RecordEvent(tool.started) through the outbox, RunTool scheduled with
//     one attempt, and the workflow tasks between them;
//   - bare: the same interval for a workflow of bare no-op activities on
//     the same server, measured in the same iteration (the reference);
//   - journal-lag: from the no-op execution until its tool.completed is in
//     the journal (outbox write + publisher delivery).
//
// Each iteration is one run of 100 no-op steps.
func BenchmarkToolCallOverhead(b *testing.B) {
	const steps = 100
	noop := &noopTool{ran: map[string]time.Time{}}
	e := newEnv(b, envOpts{extra: []kernel.Tool{noop}})
	plan := Plan{}
	for range steps {
		plan.Steps = append(plan.Steps, Step{Tool: "noop"})
	}
	var calls, lags, bare []time.Duration
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		// The reference, side by side: the same number of bare no-op
		// activities on the same server, just before the run.
		b.StopTimer()
		bare = append(bare, bareActivityIntervals(b, steps)...)
		b.StartTimer()
		runID := fmt.Sprintf("bench-%d", i)
		if _, err := e.run(runID, plan); err != nil {
			b.Fatal(err)
		}
		b.StopTimer()
		var prev time.Time
		for s := 1; s <= steps; s++ {
			at := noop.ran[fmt.Sprintf("%s/op-%d", runID, s)]
			if s > 1 {
				calls = append(calls, at.Sub(prev))
			}
			prev = at
		}
		rows, err := e.pool.Pool.Query(context.Background(),
			`SELECT operation_id, ingested_at FROM journal_events WHERE project = $1 AND run_id = $2 AND type = 'tool.completed'`, e.project, runID)
		if err != nil {
			b.Fatal(err)
		}
		for rows.Next() {
			var op string
			var at time.Time
			if err := rows.Scan(&op, &at); err != nil {
				b.Fatal(err)
			}
			lags = append(lags, at.Sub(noop.ran[runID+"/"+op]))
		}
		rows.Close()
		b.StartTimer()
	}
	b.StopTimer()
	ms := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
	b.ReportMetric(ms(quantile(calls, 0.5)), "call-median-ms")
	b.ReportMetric(ms(quantile(calls, 0.99)), "call-p99-ms")
	b.ReportMetric(ms(quantile(lags, 0.5)), "journal-lag-median-ms")
	b.ReportMetric(ms(quantile(lags, 0.99)), "journal-lag-p99-ms")
	b.ReportMetric(ms(quantile(bare, 0.5)), "bare-median-ms")
	b.ReportMetric(float64(quantile(calls, 0.5))/float64(quantile(bare, 0.5)), "x-bare")
	b.ReportMetric(0, "ns/op")
}
