package promx

import (
	"context"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// DBReadTimeout bounds a DBGauges read at one scrape.
const DBReadTimeout = 2 * time.Second

// DBGauges is a collector of gauges read from the database at each
// scrape. When the read fails the scrape still succeeds: the gauges are
// left out, <prefix>_up is 0 and <prefix>_scrape_errors_total moves, so
// every other metric stays visible exactly while the database is away.
type DBGauges struct {
	gauges []*prometheus.Desc
	up     *prometheus.Desc
	errors prometheus.Counter
	read   func(context.Context) ([]prometheus.Metric, error)
}

// NewDBGauges returns the DBGauges of gauges, whose values read returns
// (const metrics of those descriptions) within DBReadTimeout; what names
// the gauges in the help of <prefix>_up and <prefix>_scrape_errors_total.
func NewDBGauges(prefix, what string, gauges []*prometheus.Desc, read func(context.Context) ([]prometheus.Metric, error)) *DBGauges {
	return &DBGauges{
		gauges: gauges,
		up:     prometheus.NewDesc(prefix+"_up", "1 when the "+what+" could be read from the database at this scrape, 0 when not.", nil, nil),
		errors: Counter(prefix+"_scrape_errors_total", "Scrapes at which the "+what+" could not be read from the database."),
		read:   read,
	}
}

// Describe implements prometheus.Collector.
func (c *DBGauges) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range c.gauges {
		ch <- d
	}
	ch <- c.up
	c.errors.Describe(ch)
}

// Collect implements prometheus.Collector.
func (c *DBGauges) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), DBReadTimeout)
	defer cancel()
	ms, err := c.read(ctx)
	if err != nil {
		c.errors.Inc()
		ch <- prometheus.MustNewConstMetric(c.up, prometheus.GaugeValue, 0)
		c.errors.Collect(ch)
		return
	}
	ch <- prometheus.MustNewConstMetric(c.up, prometheus.GaugeValue, 1)
	c.errors.Collect(ch)
	for _, m := range ms {
		ch <- m
	}
}
