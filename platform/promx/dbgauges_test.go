package promx

import (
	"context"
	"errors"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

// TestDBGaugesSurviveAFailedRead: a read that fails leaves the gauges
// out, sets <prefix>_up to 0 and counts the scrape error, and the scrape
// itself succeeds; a read that succeeds exports its gauges with up 1.
func TestDBGaugesSurviveAFailedRead(t *testing.T) {
	t.Parallel()
	backlog := prometheus.NewDesc("x_backlog", "Rows waiting.", nil, nil)
	fail := true
	g := NewDBGauges("x_stats", "x gauges", []*prometheus.Desc{backlog}, func(context.Context) ([]prometheus.Metric, error) {
		if fail {
			return nil, errors.New("database down")
		}
		return []prometheus.Metric{prometheus.MustNewConstMetric(backlog, prometheus.GaugeValue, 7)}, nil
	})
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(g)
	values := func() map[string]float64 {
		t.Helper()
		mfs, err := reg.Gather()
		if err != nil {
			t.Fatal(err)
		}
		got := map[string]float64{}
		for _, mf := range mfs {
			for _, m := range mf.GetMetric() {
				if m.GetCounter() != nil {
					got[mf.GetName()] = m.GetCounter().GetValue()
				} else {
					got[mf.GetName()] = m.GetGauge().GetValue()
				}
			}
		}
		return got
	}
	for i := 1; i <= 2; i++ {
		got := values()
		if _, ok := got["x_backlog"]; ok || got["x_stats_up"] != 0 || got["x_stats_scrape_errors_total"] != float64(i) {
			t.Fatalf("failed read %d: %v", i, got)
		}
	}
	fail = false
	if got := values(); got["x_backlog"] != 7 || got["x_stats_up"] != 1 || got["x_stats_scrape_errors_total"] != 2 {
		t.Fatalf("read: %v", got)
	}
	if n := testutil.CollectAndCount(g); n != 3 {
		t.Fatalf("%d series collected, want 3", n)
	}
}
