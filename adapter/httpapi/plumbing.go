package httpapi

import (
	"fmt"
	"net/http"

	"github.com/seed-7bc021c3/reckon/kernel"
)

// health answers GET /healthz: ok, or 503 when the Health check fails.
// The route is public, so the check's error stays in the server's log (the
// 503 is logged with it): a failed database ping names the database's
// host, port, user and database, which are no business of a caller
// without a token.
func (s *Server) health(w http.ResponseWriter, r *http.Request) error {
	if s.cfg.Health != nil {
		if err := s.cfg.Health(r.Context()); err != nil {
			return fmt.Errorf("%w: %w", kernel.Errorf(kernel.EUnavailable,
				"unhealthy: a dependency of this server failed its health check; the server's log has the cause under this response's %s", RequestIDHeader), err)
		}
	}
	WriteJSON(w, http.StatusOK, map[string]string{"status": "ok"})
	return nil
}

// metrics serves the Prometheus registry at GET /metrics.
func (s *Server) metrics(w http.ResponseWriter, r *http.Request) error {
	if s.prom == nil {
		return kernel.Errorf(kernel.ENotFound, "this server exports no metrics")
	}
	s.prom.ServeHTTP(w, r)
	return nil
}

// openapi serves the API description at GET /openapi.json.
func (s *Server) openapi(w http.ResponseWriter, _ *http.Request) error {
	w.Header().Set("Content-Type", "application/json")
	_, err := w.Write(OpenAPI)
	return err
}

// whoami answers GET /v1/whoami (any known token): the caller's name and
// role (and the projects a limited token may see), so a client (the operator console) tells an agent token from a
// reader's or an operator's without trying an endpoint, and a bad token
// from a good one.
func (s *Server) whoami(w http.ResponseWriter, r *http.Request) error {
	p, _ := PrincipalFrom(r.Context())
	me := map[string]any{"name": p.Name, "role": p.Role}
	if p.Limited() {
		me["projects"] = p.Projects
	}
	WriteJSON(w, http.StatusOK, me)
	return nil
}
