package httpapi

import (
	"context"
	"fmt"
	"net/http"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/rs/zerolog"
)

// PathReady is the readiness route: 200 when every dependency the process
// serves with answers, 503 naming the ones that do not. /healthz stays the
// liveness route.
const PathReady = "/readyz"

// ReadyTimeout bounds each readiness check: a dependency slower than that
// to answer a ping counts as down.
const ReadyTimeout = 3 * time.Second

// ReadyCheck is one dependency GET /readyz checks.
type ReadyCheck struct {
	// Name is how the answer names the dependency: "postgresql",
	// "temporal".
	Name string
	// Check returns nil when the dependency answers.
	Check func(ctx context.Context) error
}

// readiness is the answer of GET /readyz.
type readiness struct {
	Status string            `json:"status"`
	Error  string            `json:"error,omitempty"`
	Checks map[string]string `json:"checks"`
}

// checkReady runs every check at once, each bounded by ReadyTimeout, and
// returns the status code and answer. A failed check's error goes to log
// only: the route is public, and a ping's error names hosts, ports and
// users that are no business of a caller without a token.
func checkReady(ctx context.Context, checks []ReadyCheck, log zerolog.Logger) (int, readiness) {
	ans := readiness{Status: "ready", Checks: make(map[string]string, len(checks))}
	var mu sync.Mutex
	var wg sync.WaitGroup
	var down []string
	for _, c := range checks {
		wg.Add(1)
		go func() {
			defer wg.Done()
			cctx, cancel := context.WithTimeout(ctx, ReadyTimeout)
			err := c.Check(cctx)
			cancel()
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				ans.Checks[c.Name] = "unavailable"
				down = append(down, c.Name)
				log.Warn().Err(err).Str("dependency", c.Name).Msg("not ready: a dependency does not answer")
				return
			}
			ans.Checks[c.Name] = "ok"
		}()
	}
	wg.Wait()
	if len(down) == 0 {
		return http.StatusOK, ans
	}
	sort.Strings(down)
	ans.Status = "unavailable"
	ans.Error = fmt.Sprintf("not ready: %s unavailable; the server's log has the cause", strings.Join(down, " and "))
	return http.StatusServiceUnavailable, ans
}

// writeReady answers GET /readyz over checks.
func writeReady(w http.ResponseWriter, r *http.Request, checks []ReadyCheck, log zerolog.Logger) {
	code, ans := checkReady(r.Context(), checks, log)
	if code != http.StatusOK {
		w.Header().Set("Retry-After", fmt.Sprint(RetryAfterSeconds))
	}
	WriteJSON(w, code, ans)
}

// ready answers GET /readyz on the API: the Config's Ready checks.
func (s *Server) ready(w http.ResponseWriter, r *http.Request) error {
	writeReady(w, r, s.cfg.Ready, *zerolog.Ctx(r.Context()))
	return nil
}

// ProbeRoutes serves GET /healthz and GET /readyz on mux as the API
// answers them, for a listener of its own (RECKON_METRICS_ADDR), so that
// a process without the API (a worker, a publisher, a pipeline) can be
// probed too: health is the liveness check (nil: always live), checks the
// readiness checks.
func ProbeRoutes(mux *http.ServeMux, health func(context.Context) error, checks []ReadyCheck, log zerolog.Logger) {
	mux.HandleFunc("GET "+PathHealth, func(w http.ResponseWriter, r *http.Request) {
		if health != nil {
			if err := health(r.Context()); err != nil {
				log.Warn().Err(err).Msg("unhealthy: a dependency failed its health check")
				w.Header().Set("Retry-After", fmt.Sprint(RetryAfterSeconds))
				WriteJSON(w, http.StatusServiceUnavailable, map[string]string{"error": "unhealthy: a dependency of this server failed its health check; the server's log has the cause"})
				return
			}
		}
		WriteJSON(w, http.StatusOK, map[string]string{"status": "ok"})
	})
	mux.HandleFunc("GET "+PathReady, func(w http.ResponseWriter, r *http.Request) {
		writeReady(w, r, checks, log)
	})
}
