// Package httpapi is reckon's JSON-over-HTTP API, all of it: the one route
// table (routes.go) with every route, its method and its roles, the
// handlers over small service interfaces that the domain packages implement
// (services.go), bearer-token auth, the single mapping of kernel.Error codes
// to status codes, and the HTTP journal client. No other package registers
// a route.
package httpapi

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"time"

	"github.com/go-chi/chi/v5"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/rs/zerolog"

	"github.com/seed-7bc021c3/reckon/kernel"
	"github.com/seed-7bc021c3/reckon/kernel/auth"
)

// MaxBodyBytes bounds every request body.
const MaxBodyBytes = 8 << 20

// handlerFunc is an API handler; a returned error is written by Error.
type handlerFunc func(w http.ResponseWriter, r *http.Request) error

// Config configures a Server: its plumbing and the services behind its
// routes. A nil service makes its routes answer 503 (this process does not
// serve them), so a test can build the API over the services it has.
type Config struct {
	Tokens   *auth.Tokens
	Log      zerolog.Logger
	Registry *prometheus.Registry // served at /metrics; may be nil
	// Health is checked by /healthz; nil means always healthy.
	Health func(ctx context.Context) error

	// Journal ingests POST /v1/events; Owners tells the kernel's own
	// runs, into which no caller may write (production always sets it).
	Journal kernel.Journal
	Owners  kernel.RunOwners
	// Runs starts and shows runs (*runner.Starter).
	Runs RunService
	// Operations is the listing, reconcile, history and the operator's
	// queue; Verdicts the supervisor's verdicts (*operations.Service
	// implements both).
	Operations OperationService
	Verdicts   VerdictService
	// Console, when set, is the operator console (kernel/console), served
	// as pages at / and under console.AssetPrefix.
	Console http.Handler
}

// Server is the API: the route table (routes.go) over the services of its
// Config, with authentication, the error mapping and request metrics.
type Server struct {
	mux    chi.Router
	cfg    Config
	routes []Route
	reqs   *prometheus.CounterVec
	prom   http.Handler // the registry's /metrics, nil without one
}

// New returns the API server with every route of the route table mounted.
func New(cfg Config) *Server {
	if cfg.Tokens == nil {
		cfg.Tokens = &auth.Tokens{}
	}
	s := &Server{mux: chi.NewRouter(), cfg: cfg}
	s.reqs = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "reckon_http_requests_total", Help: "API requests by route and status code.",
	}, []string{"route", "code"})
	if cfg.Registry != nil {
		cfg.Registry.MustRegister(s.reqs)
		s.prom = promhttp.HandlerFor(cfg.Registry, promhttp.HandlerOpts{})
	}
	s.mux.NotFound(func(w http.ResponseWriter, r *http.Request) {
		Error(w, r, kernel.Errorf(kernel.ENotFound, "no route %s %s; see /openapi.json", r.Method, r.URL.Path))
	})
	s.mux.MethodNotAllowed(func(w http.ResponseWriter, r *http.Request) {
		WriteJSON(w, http.StatusMethodNotAllowed, map[string]string{"error": fmt.Sprintf("method %s is not allowed on %s; see /openapi.json", r.Method, r.URL.Path)})
	})
	for _, rt := range s.table() {
		s.handle(rt)
	}
	for _, pg := range s.pages() {
		s.page(pg.pattern, pg.handler)
	}
	return s
}

// page serves h at pattern (chi syntax): a page for people, such as the
// operator console, rather than an operation of the JSON API. Pages are not
// listed by Routes nor described in /openapi.json; h sets its own headers
// and answers its own methods.
func (s *Server) page(pattern string, h http.Handler) {
	s.mux.Handle(pattern, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		sw := &statusWriter{ResponseWriter: w, code: http.StatusOK}
		defer func() { s.reqs.WithLabelValues("page "+pattern, fmt.Sprint(sw.code)).Inc() }()
		h.ServeHTTP(sw, r)
	}))
}

// handle mounts one route of the table: request metrics, the body bound,
// authentication against its roles (nil roles: public), the error mapping.
func (s *Server) handle(rt route) {
	s.routes = append(s.routes, rt.Route)
	method, pattern, roles, h := rt.Method, rt.Pattern, rt.Roles, rt.handler
	s.mux.Method(method, pattern, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		sw := &statusWriter{ResponseWriter: w, code: http.StatusOK}
		defer func() { s.reqs.WithLabelValues(method+" "+pattern, fmt.Sprint(sw.code)).Inc() }()
		r.Body = http.MaxBytesReader(sw, r.Body, MaxBodyBytes)
		if roles != nil {
			p, err := s.authenticate(r, roles)
			if err != nil {
				Error(sw, r, err)
				return
			}
			r = r.WithContext(context.WithValue(r.Context(), principalKey{}, p))
		}
		if err := h(sw, r); err != nil {
			if kernel.ErrorCode(err) == kernel.EInternal {
				s.cfg.Log.Error().Err(err).Str("route", method+" "+pattern).Msg("request failed")
			}
			Error(sw, r, err)
		}
	}))
}

// Routes lists every route the server serves, in table order.
func (s *Server) Routes() []Route { return append([]Route(nil), s.routes...) }

// ServeHTTP implements http.Handler.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) { s.mux.ServeHTTP(w, r) }

func (s *Server) authenticate(r *http.Request, roles []string) (auth.Principal, error) {
	h := r.Header.Get("Authorization")
	secret, ok := strings.CutPrefix(h, "Bearer ")
	if !ok || strings.TrimSpace(secret) == "" {
		return auth.Principal{}, kernel.Errorf(kernel.EUnauthorized, "missing bearer token: send Authorization: Bearer <token>")
	}
	p, ok := s.cfg.Tokens.Authenticate(strings.TrimSpace(secret))
	if !ok {
		return auth.Principal{}, kernel.Errorf(kernel.EUnauthorized, "unknown token")
	}
	if !p.Allows(roles...) {
		return auth.Principal{}, kernel.Errorf(kernel.EForbidden, "token %q has role %s; this endpoint needs %s", p.Name, p.Role, strings.Join(roles, " or "))
	}
	return p, nil
}

type principalKey struct{}

// PrincipalFrom returns the authenticated caller of the request.
func PrincipalFrom(ctx context.Context) (auth.Principal, bool) {
	p, ok := ctx.Value(principalKey{}).(auth.Principal)
	return p, ok
}

// statusCodes is the one mapping of error codes to HTTP status.
var statusCodes = map[string]int{
	kernel.EInvalid:      http.StatusBadRequest,
	kernel.EUnauthorized: http.StatusUnauthorized,
	kernel.EForbidden:    http.StatusForbidden,
	kernel.ENotFound:     http.StatusNotFound,
	kernel.EConflict:     http.StatusConflict,
	kernel.ETooLarge:     http.StatusRequestEntityTooLarge,
	kernel.EUnavailable:  http.StatusServiceUnavailable,
	kernel.EInternal:     http.StatusInternalServerError,
}

// Error writes err as {"error": "..."} with the status its code maps to.
func Error(w http.ResponseWriter, r *http.Request, err error) {
	var mbe *http.MaxBytesError
	if errors.As(err, &mbe) {
		err = kernel.Errorf(kernel.ETooLarge, "request body is larger than %d bytes", mbe.Limit)
	}
	code := kernel.ErrorCode(err)
	status, ok := statusCodes[code]
	if !ok {
		status = http.StatusInternalServerError
	}
	if code == kernel.EUnauthorized {
		w.Header().Set("WWW-Authenticate", `Bearer realm="reckon"`)
	}
	WriteJSON(w, status, map[string]string{"error": kernel.ErrorMessage(err)})
}

// WriteJSON writes v as JSON with status.
func WriteJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(v)
}

// ReadJSON decodes the request body into v; a malformed body is EInvalid
// with the decoder's explanation.
func ReadJSON(r *http.Request, v any) error {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			return kernel.Errorf(kernel.ETooLarge, "request body is larger than %d bytes", mbe.Limit)
		}
		return kernel.Errorf(kernel.EInvalid, "read request body: %v", err)
	}
	if len(bytes.TrimSpace(body)) == 0 {
		return kernel.Errorf(kernel.EInvalid, "request body is empty; expected a JSON object")
	}
	if err := json.Unmarshal(body, v); err != nil {
		return kernel.Errorf(kernel.EInvalid, "request body is not valid JSON for this endpoint: %v", err)
	}
	return nil
}

type statusWriter struct {
	http.ResponseWriter
	code int
}

func (w *statusWriter) WriteHeader(code int) {
	w.code = code
	w.ResponseWriter.WriteHeader(code)
}

// Listen binds addr (127.0.0.1:0 picks a free port) and serves s until ctx
// ends. The bound address is sent on bound before serving starts.
func (s *Server) Listen(ctx context.Context, addr string, bound chan<- string) error {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("listen on %s (RECKON_HTTP_ADDR): %w", addr, err)
	}
	srv := &http.Server{Handler: s, ReadHeaderTimeout: 10 * time.Second}
	if bound != nil {
		bound <- ln.Addr().String()
	}
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	select {
	case <-ctx.Done():
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(sctx)
		return nil
	case err := <-errc:
		if errors.Is(err, http.ErrServerClosed) {
			return nil
		}
		return err
	}
}
