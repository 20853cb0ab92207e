package webhook

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/seed-7bc021c3/reckon/internal/pgtest"
	"github.com/seed-7bc021c3/reckon/kernel"
	"github.com/seed-7bc021c3/reckon/kernel/pgplan"
)

// BenchmarkNotificationCost measures what the notifications' statements
// add to the transaction of the fact they announce, as the outbox's
// Enqueue queues them in a caller's transaction (pgplan's settings, the
// insert, the settings back): the same batch, a write's transaction,
// without them, with them and no endpoint registered, and with them
// writing a row for one endpoint, the three interleaved iteration by
// iteration so that a shared machine's load falls on each alike. The
// commit is asynchronous: its WAL flush, which the fact's own write pays
// whether or not a notification rides along, would otherwise be most of
// what is measured. Reports the median of each (p50-us) and the two
// differences. Run with
// `go test -run '^$' -bench NotificationCost -benchtime 3000x ./kernel/webhook/`.
func BenchmarkNotificationCost(b *testing.B) {
	ctx := context.Background()
	none, one := pgtest.New(b), pgtest.New(b)
	for _, s := range []*pgtest.Schema{none, one} {
		if _, err := s.Pool.Exec(ctx, `CREATE TABLE fact (x int)`); err != nil {
			b.Fatal(err)
		}
	}
	if _, err := one.Pool.Exec(ctx, `INSERT INTO webhook_endpoints (id, events) VALUES ('wh_bench', '{attention,settled,run.awaiting,conflict.parked}')`); err != nil {
		b.Fatal(err)
	}
	n := Notification{Event: EventSettled, Body: []byte(`{"type":"settled","timestamp":"2026-12-01T00:00:00Z","data":{"project":"acme","run_id":"r-1","operation_id":"op-1","effect":"none","basis":"operator","actor":"operator:ann","note":"checked by hand","reconciliation":{"source_id":"kernel","event_id":"r-1/op-1/reconciled/1"}},"text":"reckon: operation op-1 of run r-1 (project acme) is settled"}`)}
	send := func(s *pgtest.Schema, i int, notify bool) time.Duration {
		bt := &pgx.Batch{}
		bt.Queue("SET LOCAL synchronous_commit TO off")
		bt.Queue("INSERT INTO fact VALUES (1)")
		if notify {
			n.MsgID = fmt.Sprintf("msg_%d", i)
			pgplan.Force(bt, "")
			Queue(bt, []Notification{n})
			pgplan.Restore(bt)
		}
		start := time.Now()
		if err := s.Pool.SendBatch(ctx, bt).Close(); err != nil {
			b.Fatal(err)
		}
		return time.Since(start)
	}
	var bare, empty, written []time.Duration
	b.ResetTimer()
	for i := range b.N {
		bare = append(bare, send(none, i, false))
		empty = append(empty, send(none, i, true))
		written = append(written, send(one, i, true))
	}
	b.StopTimer()
	med := func(d []time.Duration) float64 { slices.Sort(d); return float64(d[len(d)/2].Nanoseconds()) / 1e3 }
	m0, m1, m2 := med(bare), med(empty), med(written)
	b.ReportMetric(m0, "bare-p50-us")
	b.ReportMetric(m1-m0, "no-endpoint-added-us")
	b.ReportMetric(m2-m0, "one-endpoint-added-us")
	b.Logf("a write's transaction %.0f µs; with the notifications' statements and no endpoint %.0f µs (+%.0f), writing one row %.0f µs (+%.0f)", m0, m1, m1-m0, m2, m2-m0)
}

// BenchmarkDeriveKernelEvent measures what Derive adds to the enqueue of
// an event that announces nothing (a worker's tool.started, the kernel's
// hot path): a pass over the batch's types.
func BenchmarkDeriveKernelEvent(b *testing.B) {
	ev := kernel.Event{SourceID: kernel.SourceKernel, EventID: "r-1/op-1/started", Project: "acme", RunID: "r-1",
		Type: kernel.TypeToolStarted, TS: time.Now(), Actor: kernel.ActorKernel, Data: []byte(`{"operation_id":"op-1","tool":"run_command"}`)}
	events := []kernel.Event{ev}
	for b.Loop() {
		if ns, err := Derive(events); err != nil || ns != nil {
			b.Fatal(ns, err)
		}
	}
}
