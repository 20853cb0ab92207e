package app

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/seed-7bc021c3/reckon/internal/pgtest"
	"github.com/seed-7bc021c3/reckon/kernel/outbox"
)

// TestMetricsPerRole: a publisher-only process serves its own /metrics on
// RECKON_METRICS_ADDR with the outbox series it moves and none of the
// API's or the listing's; a process that builds the API and the
// operations service shows those, and no outbox series.
func TestMetricsPerRole(t *testing.T) {
	t.Parallel()
	s := pgtest.New(t)
	scrape := func(core *Core) string {
		t.Helper()
		ctx, cancel := context.WithCancel(context.Background())
		bound := make(chan string, 1)
		done := make(chan error, 1)
		go func() { done <- core.ServeMetrics(ctx, "127.0.0.1:0", nil, bound) }()
		addr := <-bound
		resp, err := http.Get("http://" + addr + "/metrics")
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		cancel()
		if err := <-done; err != nil {
			t.Fatal(err)
		}
		return string(body)
	}
	newCore := func() *Core {
		core, err := NewCore(context.Background(), testConfig(t, map[string]string{"DATABASE_URL": s.URL, "RECKON_DATA_DIR": t.TempDir()}), false)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(core.Close)
		return core
	}

	pub := newCore()
	pub.NewPublisher(outbox.Config{})
	body := scrape(pub)
	for _, want := range []string{"reckon_outbox_backlog ", "reckon_outbox_parked_total", "reckon_outbox_publish_errors_total"} {
		if !strings.Contains(body, want) {
			t.Errorf("publisher's metrics lack %s", want)
		}
	}
	for _, not := range []string{"reckon_operations_", "reckon_http_requests_total"} {
		if strings.Contains(body, not) {
			t.Errorf("publisher's metrics show %s, which it never moves", not)
		}
	}

	api := newCore()
	ops := api.OperationsService(nil)
	if _, err := api.NewAPI(nil, ops); err != nil {
		t.Fatal(err)
	}
	body = scrape(api)
	if !strings.Contains(body, "reckon_operations_degraded_listings_total") {
		t.Errorf("API process lacks the operations series:\n%s", body)
	}
	if strings.Contains(body, "reckon_outbox_") {
		t.Errorf("API process shows outbox series it never moves")
	}
}
