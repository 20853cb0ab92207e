package promx_test

import (
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/seed-7bc021c3/reckon/platform/promx"
)

// TestCollectorsCarryNameHelpLabelsAndBuckets: each builder's series is
// exposed under its name with its help, labels and buckets.
func TestCollectorsCarryNameHelpLabelsAndBuckets(t *testing.T) {
	t.Parallel()
	reg := prometheus.NewRegistry()
	c := promx.Counter("t_plain_total", "Plain count.")
	cv := promx.CounterVec("t_by_status_total", "Count by status.", "status", "path")
	h := promx.Histogram("t_seconds", "Latency.", []float64{.5, 2})
	hv := promx.HistogramVec("t_by_outcome_seconds", "Latency by outcome.", []float64{1}, "outcome")
	reg.MustRegister(c, cv, h, hv)
	c.Inc()
	cv.WithLabelValues("ok", "fast").Add(2)
	h.Observe(1)
	hv.WithLabelValues("error").Observe(3)

	want := `
# HELP t_by_outcome_seconds Latency by outcome.
# TYPE t_by_outcome_seconds histogram
t_by_outcome_seconds_bucket{outcome="error",le="1"} 0
t_by_outcome_seconds_bucket{outcome="error",le="+Inf"} 1
t_by_outcome_seconds_sum{outcome="error"} 3
t_by_outcome_seconds_count{outcome="error"} 1
# HELP t_by_status_total Count by status.
# TYPE t_by_status_total counter
t_by_status_total{path="fast",status="ok"} 2
# HELP t_plain_total Plain count.
# TYPE t_plain_total counter
t_plain_total 1
# HELP t_seconds Latency.
# TYPE t_seconds histogram
t_seconds_bucket{le="0.5"} 0
t_seconds_bucket{le="2"} 1
t_seconds_bucket{le="+Inf"} 1
t_seconds_sum 1
t_seconds_count 1
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want)); err != nil {
		t.Fatal(err)
	}
}
