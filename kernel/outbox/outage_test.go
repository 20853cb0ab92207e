package outbox_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"

	"github.com/seed-7bc021c3/reckon/internal/pgtest"
	"github.com/seed-7bc021c3/reckon/internal/reckontest"
	"github.com/seed-7bc021c3/reckon/kernel/outbox"
)

// TestMetricsSurviveDatabaseOutage: with PostgreSQL down the scrape still
// succeeds: the counters are there, reckon_outbox_stats_up is 0 and the
// scrape-error counter moves, instead of the whole scrape failing.
func TestMetricsSurviveDatabaseOutage(t *testing.T) {
	t.Parallel()
	reg := prometheus.NewRegistry()
	outbox.NewMetrics(reg, pgtest.DeadPool(t))
	for i := 1; i <= 2; i++ {
		mfs, err := reg.Gather()
		if err != nil {
			t.Fatalf("scrape %d failed with the database down: %v", i, err)
		}
		got := map[string]float64{}
		for _, mf := range mfs {
			for _, m := range mf.GetMetric() {
				switch {
				case m.GetGauge() != nil:
					got[mf.GetName()] = m.GetGauge().GetValue()
				case m.GetCounter() != nil && len(m.GetLabel()) == 0:
					got[mf.GetName()] = m.GetCounter().GetValue()
				}
			}
		}
		if got["reckon_outbox_stats_up"] != 0 || got["reckon_outbox_stats_scrape_errors_total"] != float64(i) {
			t.Fatalf("scrape %d: up=%v scrape_errors=%v", i, got["reckon_outbox_stats_up"], got["reckon_outbox_stats_scrape_errors_total"])
		}
		if _, ok := got["reckon_outbox_parked_total"]; !ok {
			t.Fatalf("scrape %d lost the counters: %v", i, got)
		}
		if _, ok := got["reckon_outbox_backlog"]; ok {
			t.Fatalf("scrape %d reported a backlog it could not read", i)
		}
	}
}

// TestPublisherBacksOffWhileDatabaseDown: against an unreachable database
// the publisher retries with capped exponential backoff (not every
// PollInterval) and logs the outage once, not per attempt.
func TestPublisherBacksOffWhileDatabaseDown(t *testing.T) {
	t.Parallel()
	reg := prometheus.NewRegistry()
	pool := pgtest.DeadPool(t)
	m := outbox.NewMetrics(reg, nil)
	var logs reckontest.Buffer
	p := outbox.NewPublisher(pool, nil, outbox.Config{PollInterval: 5 * time.Millisecond, BaseBackoff: 50 * time.Millisecond,
		OutageBackoff: 400 * time.Millisecond, PruneEvery: time.Hour}, m, zerolog.New(&logs))
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	_ = p.Run(ctx)
	n := reckontest.Value(t, reg, "reckon_outbox_publish_errors_total", nil)
	// Polling every 5 ms would be ~600 attempts; backing off from 50 ms
	// to a 400 ms cap is at most ~25.
	if n < 3 || n > 40 {
		t.Fatalf("%v attempts in 3 s against a dead database", n)
	}
	if w := strings.Count(logs.String(), `"level":"warn"`); w != 1 {
		t.Fatalf("%d warnings for one outage of %v attempts:\n%s", w, n, logs.String())
	}
}
