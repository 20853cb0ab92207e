package httpapi_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"

	"github.com/seed-7bc021c3/reckon/internal/reckontest"
	"github.com/seed-7bc021c3/reckon/kernel/httpapi"
	"github.com/seed-7bc021c3/reckon/kernel/operations"
)

// TestMetricsThroughAPI drives listings and reconciles through the HTTP API
// and reads the figures back from GET /metrics, as a dashboard would.
func TestMetricsThroughAPI(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	reg := prometheus.NewRegistry()
	svc := operations.New(e.Schema.Pool, operations.Config{
		Window: 168 * time.Hour, StaleAfter: 10 * time.Minute, Now: e.Clock.Now,
		Metrics: operations.NewMetrics(reg),
		// A liveness that always fails: listings that need it answer degraded.
		Liveness: failingLiveness{},
	})
	srv := httpapi.New(httpapi.Config{Tokens: testTokens(t), Log: zerolog.Nop(), Registry: reg, Operations: svc})
	url := newTestServer(t, srv)

	uncertainOp(e, "acme", "run-1", "kernel")
	// A kernel run still going, whose liveness the listing must ask.
	b := reckontest.Run{Project: "acme", RunID: "run-2", Source: "kernel"}
	e.Ingest(b.RunStarted(ago(time.Hour)), b.Started("op-1", "run_command", ago(30*time.Minute)))
	list := url + httpapi.PathOperations + "?project=acme"
	for range 2 {
		if r := call(t, "GET", list, readerTok, ""); r.status != 200 {
			t.Fatalf("list: %d %s", r.status, r.raw)
		}
	}
	if r := call(t, "GET", url+httpapi.PathOperations, readerTok, ""); r.status != 400 {
		t.Fatalf("list without project: %d", r.status)
	}
	rec := url + httpapi.PathReconcile
	good := `{"project":"acme","run_id":"run-1","operation_id":"op-1","effect":"occurred","note":"checked by hand"}`
	for i, want := range []int{201, 201, 404, 400} {
		body := good
		switch i {
		case 2:
			body = strings.Replace(good, `"op-1"`, `"op-404"`, 1)
		case 3:
			body = strings.Replace(good, `"occurred"`, `"maybe"`, 1)
		}
		if r := call(t, "POST", rec, operatorTok, body); r.status != want {
			t.Fatalf("reconcile %d: %d %s, want %d", i, r.status, r.raw, want)
		}
	}

	m := string(call(t, "GET", url+"/metrics", readerTok, "").raw)
	for _, want := range []string{
		`reckon_operations_list_seconds_count{outcome="ok"} 2`,
		`reckon_operations_listed_total{state="failed_uncertain"} 2`,
		`reckon_operations_degraded_listings_total 2`,
		`reckon_operations_reconciles_total{basis="operator",result="recorded"} 1`,
		`reckon_operations_reconciles_total{basis="operator",result="repeated"} 1`,
		`reckon_operations_reconciles_total{basis="operator",result="rejected"} 2`,
	} {
		if !strings.Contains(m, want) {
			t.Errorf("metrics lack %q", want)
		}
	}
	if strings.Contains(m, `outcome="error"`) {
		t.Errorf("a malformed listing was counted as a listing:\n%s", m)
	}
}

// failingLiveness is a Temporal that never answers.
type failingLiveness struct{}

func (failingLiveness) Running(context.Context, string, string) (bool, error) {
	return false, errors.New("temporal unavailable")
}
