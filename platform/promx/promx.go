// Package promx builds the Prometheus collectors reckon's packages
// register: one call names a series and says what it counts, instead of
// an options struct per series.
package promx

import "github.com/prometheus/client_golang/prometheus"

// Counter returns a counter named name, documented by help.
func Counter(name, help string) prometheus.Counter {
	return prometheus.NewCounter(prometheus.CounterOpts{Name: name, Help: help})
}

// CounterVec returns a counter named name, documented by help, with one
// series per combination of the labels' values.
func CounterVec(name, help string, labels ...string) *prometheus.CounterVec {
	return prometheus.NewCounterVec(prometheus.CounterOpts{Name: name, Help: help}, labels)
}

// Histogram returns a histogram named name, documented by help, over
// buckets (upper bounds, in seconds for a latency).
func Histogram(name, help string, buckets []float64) prometheus.Histogram {
	return prometheus.NewHistogram(prometheus.HistogramOpts{Name: name, Help: help, Buckets: buckets})
}

// HistogramVec returns a histogram named name, documented by help, over
// buckets, with one series per combination of the labels' values.
func HistogramVec(name, help string, buckets []float64, labels ...string) *prometheus.HistogramVec {
	return prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: name, Help: help, Buckets: buckets}, labels)
}
