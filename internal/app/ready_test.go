package app

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/seed-7bc021c3/reckon/adapter/httpapi"
	"github.com/seed-7bc021c3/reckon/internal/pgtest"
	"github.com/seed-7bc021c3/reckon/internal/reckontest"
)

// readyAnswer is GET url's status and decoded /readyz answer.
func readyAnswer(t *testing.T, url string) (int, map[string]any) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var m map[string]any
	if err := json.NewDecoder(resp.Body).Decode(&m); err != nil {
		t.Fatalf("%s: %v", url, err)
	}
	return resp.StatusCode, m
}

// TestReadyzNamesWhatIsDown: GET /readyz, on the API and on the metrics
// listener of a role without it, answers 200 while PostgreSQL and the
// Temporal frontend answer, and 503 naming the one that does not (its
// cause in the log only); /healthz stays the liveness check, still 200
// with Temporal gone.
func TestReadyzNamesWhatIsDown(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	s := pgtest.New(t)
	core, err := NewCore(ctx, testConfig(t, map[string]string{"DATABASE_URL": s.URL, "RECKON_DATA_DIR": t.TempDir()}), false)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(core.Close)
	k, err := core.StartKernel(ctx, KernelConfig{InMemory: true, NoWorker: true})
	if err != nil {
		t.Fatal(err)
	}
	api, err := core.NewAPI(k, core.OperationsService(k.Conn.Client))
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(api)
	t.Cleanup(srv.Close)
	mctx, stopMetrics := context.WithCancel(ctx)
	bound, done := make(chan string, 1), make(chan error, 1)
	go func() { done <- core.ServeMetrics(mctx, "127.0.0.1:0", k, bound) }()
	metrics := "http://" + <-bound
	defer func() { stopMetrics(); <-done }()

	for _, base := range []string{srv.URL, metrics} {
		code, m := readyAnswer(t, base+httpapi.PathReady)
		checks, _ := m["checks"].(map[string]any)
		if code != http.StatusOK || m["status"] != "ready" || checks["postgresql"] != "ok" || checks["temporal"] != "ok" {
			t.Fatalf("%s/readyz with everything up: %d %v", base, code, m)
		}
	}

	k.Close() // the embedded Temporal server stops
	for _, base := range []string{srv.URL, metrics} {
		code, m := readyAnswer(t, base+httpapi.PathReady)
		checks, _ := m["checks"].(map[string]any)
		if code != http.StatusServiceUnavailable || m["status"] != "unavailable" || checks["temporal"] != "unavailable" ||
			checks["postgresql"] != "ok" || !strings.Contains(m["error"].(string), "temporal unavailable") {
			t.Fatalf("%s/readyz with Temporal down: %d %v", base, code, m)
		}
		if code, _ := readyAnswer(t, base+httpapi.PathHealth); code != http.StatusOK {
			t.Fatalf("%s/healthz with Temporal down: %d, want liveness 200", base, code)
		}
	}
}

// TestReadyzNamesPostgreSQL: with PostgreSQL unreachable, a publisher's
// /readyz (no Temporal to check) answers 503 naming postgresql, and the
// cause (the address) only in the log.
func TestReadyzNamesPostgreSQL(t *testing.T) {
	t.Parallel()
	pool := pgtest.DeadPool(t)
	logs := &reckontest.Buffer{}
	c := &Core{Pool: pool, Log: zerolog.New(logs)}
	mux := http.NewServeMux()
	httpapi.ProbeRoutes(mux, pool.Ping, c.ReadyChecks(nil), c.Log)
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	code, m := readyAnswer(t, srv.URL+httpapi.PathReady)
	checks, _ := m["checks"].(map[string]any)
	if code != http.StatusServiceUnavailable || checks["postgresql"] != "unavailable" || len(checks) != 1 ||
		!strings.Contains(m["error"].(string), "postgresql unavailable") || strings.Contains(m["error"].(string), "127.0.0.1") {
		t.Fatalf("/readyz with PostgreSQL down: %d %v", code, m)
	}
	if !strings.Contains(logs.String(), "127.0.0.1") || !strings.Contains(logs.String(), `"dependency":"postgresql"`) {
		t.Fatalf("the log does not hold the cause: %s", logs.String())
	}
}
