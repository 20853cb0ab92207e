package reckontest

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"
)

// Sample is the value of the counter or gauge name whose labels are
// exactly labels (none for nil) in reg, and whether reg exports that
// series: a vector's series appear at their first count.
func Sample(t testing.TB, reg prometheus.Gatherer, name string, labels map[string]string) (float64, bool) {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
	metrics:
		for _, m := range mf.GetMetric() {
			if len(m.GetLabel()) != len(labels) {
				continue
			}
			for _, l := range m.GetLabel() {
				if v, ok := labels[l.GetName()]; !ok || v != l.GetValue() {
					continue metrics
				}
			}
			if m.GetCounter() != nil {
				return m.GetCounter().GetValue(), true
			}
			return m.GetGauge().GetValue(), true
		}
	}
	return 0, false
}

// Value is Sample of a series the test needs: one reg does not export
// fails the test.
func Value(t testing.TB, reg prometheus.Gatherer, name string, labels map[string]string) float64 {
	t.Helper()
	v, ok := Sample(t, reg, name, labels)
	if !ok {
		t.Fatalf("%s%v not exported", name, labels)
	}
	return v
}
