package webhook

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"
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
			reg.MustRegister(newStatsCollector(pool, ids))
		}
	}
	return m
}

func (m *Metrics) attempt(endpoint, outcome string) {
	m.attempts.WithLabelValues(endpoint, outcome).Inc()
}

// statsCollector reads the backlog per endpoint on scrape, as the
// outbox's gauges do: with the database unreachable the scrape still
// succeeds, without the gauges, and reckon_webhook_stats_up is 0.
type statsCollector struct {
	pool           *pgxpool.Pool
	ids            []string
	backlog, age   *prometheus.Desc
	up             *prometheus.Desc
	scrapeFailures prometheus.Counter
}

func newStatsCollector(pool *pgxpool.Pool, ids []string) *statsCollector {
	return &statsCollector{
		pool: pool, ids: ids,
		backlog: prometheus.NewDesc("reckon_webhook_backlog", "Webhook notifications not yet delivered, by endpoint id.", []string{"endpoint"}, nil),
		age:     prometheus.NewDesc("reckon_webhook_oldest_undelivered_age_seconds", "Age of the oldest webhook notification not yet delivered, by endpoint id (0 when none waits).", []string{"endpoint"}, nil),
		up:      prometheus.NewDesc("reckon_webhook_stats_up", "1 when the webhook backlog could be read from the database at this scrape, 0 when not.", nil, nil),
		scrapeFailures: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "reckon_webhook_stats_scrape_errors_total",
			Help: "Scrapes at which the webhook backlog could not be read from the database.",
		}),
	}
}

// Describe implements prometheus.Collector.
func (c *statsCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.backlog
	ch <- c.age
	ch <- c.up
	c.scrapeFailures.Describe(ch)
}

// Collect implements prometheus.Collector: every configured endpoint
// shows, at 0 when nothing of it waits.
func (c *statsCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	type stat struct {
		n   int64
		age float64
	}
	stats := map[string]stat{}
	rows, err := c.pool.Query(ctx, statsSQL)
	if err == nil {
		var (
			id string
			s  stat
		)
		_, err = pgx.ForEachRow(rows, []any{&id, &s.n, &s.age}, func() error { stats[id] = s; return nil })
	}
	if err != nil {
		c.scrapeFailures.Inc()
		ch <- prometheus.MustNewConstMetric(c.up, prometheus.GaugeValue, 0)
		c.scrapeFailures.Collect(ch)
		return
	}
	ch <- prometheus.MustNewConstMetric(c.up, prometheus.GaugeValue, 1)
	c.scrapeFailures.Collect(ch)
	for _, id := range c.ids {
		s := stats[id]
		ch <- prometheus.MustNewConstMetric(c.backlog, prometheus.GaugeValue, float64(s.n), id)
		ch <- prometheus.MustNewConstMetric(c.age, prometheus.GaugeValue, s.age, id)
	}
}
