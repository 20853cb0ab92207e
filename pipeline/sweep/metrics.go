package sweep

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Metrics of the triage pipeline.
type Metrics struct {
	walls    *prometheus.CounterVec
	verdicts *prometheus.CounterVec
	invalid  *prometheus.CounterVec
	decide   *prometheus.HistogramVec
	calls    *prometheus.HistogramVec
	sweeps   prometheus.Histogram
}

// NewMetrics registers the pipeline metrics with reg (when not nil).
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		walls: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "reckon_triage_walls_total",
			Help: "Walls triaged, by outcome (journaled, failed, locked, settled, dry_run, budget).",
		}, []string{"outcome"}),
		verdicts: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "reckon_triage_verdicts_total",
			Help: "Supervisor operation verdicts journaled, by effect and basis.",
		}, []string{"effect", "basis"}),
		invalid: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "reckon_supervisor_invalid_outputs_total",
			Help: "Supervisor outputs rejected by validation, by supervisor.",
		}, []string{"supervisor"}),
		decide: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "reckon_supervisor_decide_seconds",
			Help:    "Time for a supervisor to decide one wall, retries included.",
			Buckets: []float64{.001, .01, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 120},
		}, []string{"supervisor", "outcome"}),
		calls: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "reckon_supervisor_model_latency_seconds",
			Help:    "Latency of single model calls (chat completions), by outcome.",
			Buckets: []float64{.05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 120},
		}, []string{"outcome"}),
		sweeps: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "reckon_triage_sweep_duration_seconds",
			Help:    "Duration of whole triage sweeps.",
			Buckets: []float64{.01, .05, .1, .5, 1, 5, 10, 30, 60, 300, 900},
		}),
	}
	if reg != nil {
		reg.MustRegister(m.walls, m.verdicts, m.invalid, m.decide, m.calls, m.sweeps)
	}
	return m
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
