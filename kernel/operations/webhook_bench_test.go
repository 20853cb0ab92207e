package operations_test

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/seed-7bc021c3/reckon/internal/reckontest"
	"github.com/seed-7bc021c3/reckon/kernel"
	"github.com/seed-7bc021c3/reckon/kernel/operations"
)

// BenchmarkReconcileWebhooks measures the two paths a webhook
// notification rides, one operation per iteration: an operator's ruling
// (Reconcile, a transaction of its own) and a triage wall of one
// operation written on the run as read under its lock (WriteWall, one
// round trip), with no webhook endpoint registered (the notifications'
// statement runs and writes nothing) and with one asking for every
// event (it writes a row). Run with
// `go test -run '^$' -bench ReconcileWebhooks -benchtime 300x ./kernel/operations/`.
func BenchmarkReconcileWebhooks(b *testing.B) {
	for _, endpoints := range []int{0, 1} {
		b.Run(fmt.Sprintf("ruling/endpoints=%d", endpoints), func(b *testing.B) {
			e := benchEnv(b, endpoints, b.N)
			took := make([]time.Duration, b.N)
			b.ResetTimer()
			for i := range b.N {
				r := human("acme", fmt.Sprintf("run-%d", i), kernel.EffectNone, "checked by hand")
				start := time.Now()
				if _, err := e.Ops.Reconcile(e.Ctx, r); err != nil {
					b.Fatal(err)
				}
				took[i] = time.Since(start)
			}
			reportMedian(b, took)
		})
		b.Run(fmt.Sprintf("wall/endpoints=%d", endpoints), func(b *testing.B) {
			e := benchEnv(b, endpoints, b.N)
			locks, err := e.Ops.OpenTriageLocks(e.Ctx, 1)
			if err != nil {
				b.Fatal(err)
			}
			defer locks.Close()
			took := make([]time.Duration, b.N)
			b.ResetTimer()
			for i := range b.N {
				run := fmt.Sprintf("run-%d", i)
				b.StopTimer()
				tr, locked, err := locks.Lock(e.Ctx, "acme", run)
				if err != nil || !locked {
					b.Fatalf("lock %s: %v %v", run, locked, err)
				}
				v, err := kernel.NewEvent(kernel.SourceKernel, run+"/verdict/w", "acme", run, kernel.TypeSupervisorVerdict, kernel.ActorSupervisor,
					reckontest.T0, kernel.Verdict{Kind: kernel.VerdictKindReconciliation, NeedsAttention: true, Causes: []string{}, Remedies: []string{},
						OperationIDs: []string{"op-1"}, Supervisor: "builtin", WallDigest: "w"})
				if err != nil {
					b.Fatal(err)
				}
				req := supervisor("acme", run, kernel.EffectUnknown)
				req.IdempotencyKey = "wall/w"
				b.StartTimer()
				start := time.Now()
				w, err := tr.WriteWall(e.Ctx, v, []operations.ReconcileParams{req}, true)
				took[i] = time.Since(start)
				b.StopTimer()
				if err != nil || !w.OnRead {
					b.Fatalf("wall of %s: %+v %v", run, w, err)
				}
				tr.Unlock(e.Ctx)
				b.StartTimer()
			}
			reportMedian(b, took)
		})
	}
}

// reportMedian reports the median of took as p50-ms: on a shared machine
// the mean follows whatever else runs, the median much less.
func reportMedian(b *testing.B, took []time.Duration) {
	slices.Sort(took)
	b.ReportMetric(float64(took[len(took)/2].Microseconds())/1000, "p50-ms")
}

// benchEnv is a schema with n finished runs run-0 … run-(n-1) of one
// uncertain operation op-1 each, and endpoints webhook endpoints (0 or 1)
// asking for every event.
func benchEnv(b *testing.B, endpoints, n int) *env {
	b.Helper()
	e := reckontest.Setup(b, reckontest.Config{Operations: operations.Config{Window: 168 * time.Hour}})
	var evs []kernel.Event
	for i := range n {
		r := reckontest.Run{Project: "acme", RunID: fmt.Sprintf("run-%d", i), Source: "agent-x"}
		evs = append(evs, r.RunStarted(ago(2*time.Hour)), r.Started("op-1", "run_command", ago(time.Hour)),
			r.Failed("op-1", kernel.EffectUncertain, ago(59*time.Minute)), r.RunFailed(ago(58*time.Minute)))
		if len(evs) >= 2000 || i == n-1 {
			e.Ingest(evs...)
			evs = evs[:0]
		}
	}
	if endpoints > 0 {
		if _, err := e.Schema.Pool.Exec(e.Ctx, `INSERT INTO webhook_endpoints (id, events) VALUES ('wh_bench', '{attention,settled,run.awaiting,conflict.parked}')`); err != nil {
			b.Fatal(err)
		}
	}
	if _, err := e.Schema.Pool.Exec(e.Ctx, "ANALYZE"); err != nil {
		b.Fatal(err)
	}
	return e
}
