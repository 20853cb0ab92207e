package webhook

import (
	"context"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/seed-7bc021c3/reckon/platform/promx"
)

// Metrics of the webhook deliverers of a process.
type Metrics struct {
	attempts *prometheus.CounterVec
}

// NewMetrics registers the webhook metrics with reg (when not nil): the
// attempts counted by endpoint and outcome, and, with pool set, the
// backlog gauges of the endpoints ids read at scrape time.
func NewMetrics(reg prometheus.Registerer, pool *pgxpool.Pool, ids []string) *Metrics {
	m := &Metrics{attempts: prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "reckon_webhook_attempts_total",
		Help: "Webhook delivery attempts, by endpoint id and outcome (delivered: the receiver answered 2xx; failed: anything else, retried with backoff).",
	}, []string{"endpoint", "outcome"})}
	for _, id := range ids {
		// Both outcomes exist from the start, at 0, so that a rate over
		// them is defined before the first attempt.
		m.attempts.WithLabelValues(id, "delivered")
		m.attempts.WithLabelValues(id, "failed")
	}
	if reg != nil {
		reg.MustRegister(m.attempts)
		if pool != nil {
			reg.MustRegister(statsGauges(pool, ids))
		}
	}
	return m
}

func (m *Metrics) attempt(endpoint, outcome string) {
	m.attempts.WithLabelValues(endpoint, outcome).Inc()
}

// statsGauges are the backlog gauges of the endpoints ids, read from
// the database on scrape as the outbox's are (promx.DBGauges: with the
// database unreachable the scrape still succeeds, reckon_webhook_stats_up
// 0). Every configured endpoint shows, at 0 when nothing of it waits.
func statsGauges(pool *pgxpool.Pool, ids []string) *promx.DBGauges {
	backlog := prometheus.NewDesc("reckon_webhook_backlog", "Webhook notifications not yet delivered, by endpoint id.", []string{"endpoint"}, nil)
	age := prometheus.NewDesc("reckon_webhook_oldest_undelivered_age_seconds", "Age of the oldest webhook notification not yet delivered, by endpoint id (0 when none waits).", []string{"endpoint"}, nil)
	return promx.NewDBGauges("reckon_webhook_stats", "webhook backlog", []*prometheus.Desc{backlog, age},
		func(ctx context.Context) ([]prometheus.Metric, error) {
			type stat struct {
				n   int64
				age float64
			}
			stats := map[string]stat{}
			rows, err := pool.Query(ctx, statsSQL)
			if err != nil {
				return nil, err
			}
			var (
				id string
				s  stat
			)
			if _, err := pgx.ForEachRow(rows, []any{&id, &s.n, &s.age}, func() error { stats[id] = s; return nil }); err != nil {
				return nil, err
			}
			var ms []prometheus.Metric
			for _, id := range ids {
				s := stats[id]
				ms = append(ms, prometheus.MustNewConstMetric(backlog, prometheus.GaugeValue, float64(s.n), id),
					prometheus.MustNewConstMetric(age, prometheus.GaugeValue, s.age, id))
			}
			return ms, nil
		})
}
