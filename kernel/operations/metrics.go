package operations

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/seed-7bc021c3/reckon/kernel"
	"github.com/seed-7bc021c3/reckon/platform/promx"
)

// Metrics of the operations projection and the reconcile path. One per
// process: every Service built with it (the API's and the sweep's) counts
// into the same series.
type Metrics struct {
	listSeconds *prometheus.HistogramVec
	listed      *prometheus.CounterVec
	degraded    prometheus.Counter
	reconciles  *prometheus.CounterVec
}

// NewMetrics registers the operations metrics with reg (when not nil).
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		listSeconds: promx.HistogramVec("reckon_operations_list_seconds",
			"Latency of one operations listing (one page, liveness and child summaries included), by outcome (ok, error).",
			// The listing answers from indexes in a few milliseconds; the
			// upper buckets are for liveness calls to a slow Temporal.
			[]float64{.001, .0025, .005, .01, .02, .05, .1, .25, .5, 1, 2.5, 5},
			"outcome"),
		listed: promx.CounterVec("reckon_operations_listed_total",
			"Unresolved operations returned by listings, by state (crash_window, stale_in_flight, failed_uncertain). A poll loop counts an operation once per poll.",
			"state"),
		degraded: promx.Counter("reckon_operations_degraded_listings_total",
			"Listings answered degraded: some run's liveness could not be established (Temporal unreachable or the per-listing call budget spent)."),
		reconciles: promx.CounterVec("reckon_operations_reconciles_total",
			"Reconcile requests in their own transaction (the operator API), by basis and result (recorded, repeated, rejected, failed). Supervisor verdicts are counted by reckon_triage_verdicts_total.",
			"basis", "result"),
	}
	m.MustRegister(reg)
	return m
}

// observeList records one listing.
func (m *Metrics) observeList(seconds float64, page Page, err error) {
	if err != nil {
		m.listSeconds.WithLabelValues("error").Observe(seconds)
		return
	}
	m.listSeconds.WithLabelValues("ok").Observe(seconds)
	for _, it := range page.Operations {
		m.listed.WithLabelValues(it.State).Inc()
	}
	if page.Degraded {
		m.degraded.Inc()
	}
}

// observeReconcile records one reconcile request's result.
func (m *Metrics) observeReconcile(basis string, repeated bool, err error) {
	result := "recorded"
	switch {
	case err != nil && kernel.ErrorCode(err) == kernel.EInternal:
		result = "failed"
	case err != nil:
		result = "rejected"
	case repeated:
		result = "repeated"
	}
	if !kernel.ValidBasis(basis) {
		basis = "invalid" // a label never carries unchecked input
	}
	m.reconciles.WithLabelValues(basis, result).Inc()
}

// MustRegister registers the metrics with reg (nothing when nil): a
// process registers them when it builds a service that moves them.
func (m *Metrics) MustRegister(reg prometheus.Registerer) {
	if reg != nil {
		reg.MustRegister(m.listSeconds, m.listed, m.degraded, m.reconciles)
	}
}
