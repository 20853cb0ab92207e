package triage

import (
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

func TestMetricsRegisterTwiceShares(t *testing.T) {
	reg := prometheus.NewRegistry()
	a, b := NewMetrics(reg), NewMetrics(reg)
	a.InvalidOutput("x")
	b.InvalidOutput("x")
	if got := testutil.ToFloat64(b.invalid.WithLabelValues("x")); got != 2 {
		t.Fatalf("shared counter = %v", got)
	}
	a.ObserveModelCall(time.Second, "ok")
	fams, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	names := map[string]bool{}
	for _, f := range fams {
		names[f.GetName()] = true
	}
	for _, n := range []string{"reckon_supervisor_invalid_outputs_total", "reckon_supervisor_model_latency_seconds"} {
		if !names[n] {
			t.Fatalf("%s not exposed: %v", n, names)
		}
	}
}
