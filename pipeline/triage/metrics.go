package triage

import (
	"errors"
	"fmt"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/seed-7bc021c3/reckon/platform/promx"
)

// Metrics of the triage pipeline.
type Metrics struct {
	walls    *prometheus.CounterVec
	verdicts *prometheus.CounterVec
	invalid  *prometheus.CounterVec
	decide   *prometheus.HistogramVec
	calls    *prometheus.HistogramVec
	sweeps   prometheus.Histogram
	writes   *prometheus.CounterVec
	// The on-call gauges (oncall.go): refreshed by the pipeline, never
	// read from the database at scrape time.
	unresolved  *prometheus.GaugeVec
	lastSuccess *prometheus.GaugeVec
	outcomes    *prometheus.CounterVec
	backlog     *backlogCollector
}

// How a wall was written (reckon_triage_wall_writes_total's path).
const (
	writeOnRead  = "on_read" // in one round trip, on the run as read under its lock
	writeReread  = "reread"  // the run changed since: written the checked way (counted also as checked)
	writeChecked = "checked" // read again under the operations' locks, then written
)

// NewMetrics registers the pipeline metrics with reg (when not nil).
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		walls: promx.CounterVec("reckon_triage_walls_total",
			"Walls triaged, by outcome (journaled, failed, locked, settled, dry_run, budget; deferred and unavailable count runs with operations left for a later sweep).",
			"outcome"),
		verdicts: promx.CounterVec("reckon_triage_verdicts_total",
			"Supervisor operation verdicts journaled, by effect and basis.",
			"effect", "basis"),
		invalid: promx.CounterVec("reckon_supervisor_invalid_outputs_total",
			"Supervisor outputs rejected by validation, by supervisor.",
			"supervisor"),
		decide: promx.HistogramVec("reckon_supervisor_decide_seconds",
			"Time for a supervisor to decide one wall, retries included.",
			[]float64{.001, .01, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 120},
			"supervisor", "outcome"),
		calls: promx.HistogramVec("reckon_supervisor_model_latency_seconds",
			"Latency of single model calls (chat completions), by outcome.",
			[]float64{.05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 120},
			"outcome"),
		writes: promx.CounterVec("reckon_triage_wall_writes_total",
			"Walls written, by path: on_read (one round trip, on the run as read under its triage lock), checked (read again under the operations' locks first); reread counts the on_read attempts that found the run changed (an operator's ruling, a late event) and went the checked way.",
			"path"),
		sweeps: promx.Histogram("reckon_triage_sweep_duration_seconds",
			"Duration of whole triage sweeps.",
			[]float64{.01, .05, .1, .5, 1, 5, 10, 30, 60, 300, 900}),
	}
	m.newOncall()
	if reg != nil {
		// A second sweeper in the same process (demo's on-demand sweep
		// beside the scheduled one) shares the collectors already there.
		m.walls = register(reg, m.walls)
		m.verdicts = register(reg, m.verdicts)
		m.invalid = register(reg, m.invalid)
		m.decide = register(reg, m.decide)
		m.calls = register(reg, m.calls)
		m.sweeps = register(reg, m.sweeps)
		m.writes = register(reg, m.writes)
		m.unresolved = register(reg, m.unresolved)
		m.lastSuccess = register(reg, m.lastSuccess)
		m.outcomes = register(reg, m.outcomes)
		m.backlog = register(reg, m.backlog)
	}
	return m
}

// register registers c, or returns the identical collector registered
// before.
func register[C prometheus.Collector](reg prometheus.Registerer, c C) C {
	if err := reg.Register(c); err != nil {
		var are prometheus.AlreadyRegisteredError
		if errors.As(err, &are) {
			if existing, ok := are.ExistingCollector.(C); ok {
				return existing
			}
		}
		panic(fmt.Sprintf("register triage metrics: %v", err))
	}
	return c
}

// ObserveModelCall records one model call; hand it to the OpenAI
// supervisor's Observe hook.
func (m *Metrics) ObserveModelCall(d time.Duration, outcome string) {
	m.calls.WithLabelValues(outcome).Observe(d.Seconds())
}

// InvalidOutput counts a rejected supervisor output; hand it to the OpenAI
// supervisor's OnInvalid hook.
func (m *Metrics) InvalidOutput(supervisor string) {
	m.invalid.WithLabelValues(supervisor).Inc()
}
