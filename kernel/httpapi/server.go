// Package httpapi is reckon's JSON-over-HTTP API: routing, bearer-token
// auth, the single mapping of kernel.Error codes to status codes, and the
// ingest endpoint. Other packages add their routes through Server.Handle.
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
	"sync"
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

// HandlerFunc is an API handler; a returned error is written by Error.
type HandlerFunc func(w http.ResponseWriter, r *http.Request) error

// Route describes one served route, for the OpenAPI cross-check.
type Route struct {
	Method, Pattern string
	Roles           []string
}

// Options configures a Server.
type Options struct {
	Tokens   *auth.Tokens
	Log      zerolog.Logger
	Registry *prometheus.Registry // served at /metrics; may be nil
	// Health is checked by /healthz; nil means always healthy.
	Health func(ctx context.Context) error
}

// Server is the API's router and shared plumbing.
type Server struct {
	mux    chi.Router
	o      Options
	mu     sync.Mutex
	routes []Route
	reqs   *prometheus.CounterVec
}

// New returns a server with /healthz, /metrics and /openapi.json mounted.
func New(o Options) *Server {
	if o.Tokens == nil {
		o.Tokens = &auth.Tokens{}
	}
	s := &Server{mux: chi.NewRouter(), o: o}
	s.reqs = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "reckon_http_requests_total", Help: "API requests by route and status code.",
	}, []string{"route", "code"})
	if o.Registry != nil {
		o.Registry.MustRegister(s.reqs)
	}
	s.mux.NotFound(func(w http.ResponseWriter, r *http.Request) {
		Error(w, r, kernel.Errorf(kernel.ENotFound, "no route %s %s; see /openapi.json", r.Method, r.URL.Path))
	})
	s.mux.MethodNotAllowed(func(w http.ResponseWriter, r *http.Request) {
		WriteJSON(w, http.StatusMethodNotAllowed, map[string]string{"error": fmt.Sprintf("method %s is not allowed on %s; see /openapi.json", r.Method, r.URL.Path)})
	})
	s.Handle(http.MethodGet, "/healthz", nil, func(w http.ResponseWriter, r *http.Request) error {
		if o.Health != nil {
			if err := o.Health(r.Context()); err != nil {
				return kernel.Errorf(kernel.EUnavailable, "unhealthy: %v", err)
			}
		}
		WriteJSON(w, http.StatusOK, map[string]string{"status": "ok"})
		return nil
	})
	if o.Registry != nil {
		h := promhttp.HandlerFor(o.Registry, promhttp.HandlerOpts{})
		s.Handle(http.MethodGet, "/metrics", nil, func(w http.ResponseWriter, r *http.Request) error {
			h.ServeHTTP(w, r)
			return nil
		})
	}
	s.Handle(http.MethodGet, "/openapi.json", nil, func(w http.ResponseWriter, r *http.Request) error {
		w.Header().Set("Content-Type", "application/json")
		_, err := w.Write(OpenAPI)
		return err
	})
	// Any known token may ask who it is: a client (the operator console)
	// tells an agent token from a reader's or an operator's without trying
	// an endpoint, and a bad token from a good one.
	s.Handle(http.MethodGet, PathWhoami, []string{auth.RoleAgent, auth.RoleReader}, func(w http.ResponseWriter, r *http.Request) error {
		p, _ := PrincipalFrom(r.Context())
		WriteJSON(w, http.StatusOK, map[string]string{"name": p.Name, "role": p.Role})
		return nil
	})
	return s
}

// PathWhoami answers {name, role} for the caller's token.
const PathWhoami = "/v1/whoami"

// Page serves h at pattern (chi syntax): a page for people, such as the
// operator console, rather than an operation of the JSON API. Pages are not
// listed by Routes nor described in /openapi.json; h sets its own headers
// and answers its own methods.
func (s *Server) Page(pattern string, h http.Handler) {
	s.mux.Handle(pattern, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		sw := &statusWriter{ResponseWriter: w, code: http.StatusOK}
		defer func() { s.reqs.WithLabelValues("page "+pattern, fmt.Sprint(sw.code)).Inc() }()
		h.ServeHTTP(sw, r)
	}))
}

// Handle mounts h at method+pattern. roles lists the roles that may call it
// (operator satisfies reader); nil roles make the route public.
func (s *Server) Handle(method, pattern string, roles []string, h HandlerFunc) {
	s.mu.Lock()
	s.routes = append(s.routes, Route{Method: method, Pattern: pattern, Roles: roles})
	s.mu.Unlock()
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
				s.o.Log.Error().Err(err).Str("route", method+" "+pattern).Msg("request failed")
			}
			Error(sw, r, err)
		}
	}))
}

// Routes lists the routes mounted so far.
func (s *Server) Routes() []Route {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Route(nil), s.routes...)
}

// ServeHTTP implements http.Handler.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) { s.mux.ServeHTTP(w, r) }

func (s *Server) authenticate(r *http.Request, roles []string) (auth.Principal, error) {
	h := r.Header.Get("Authorization")
	secret, ok := strings.CutPrefix(h, "Bearer ")
	if !ok || strings.TrimSpace(secret) == "" {
		return auth.Principal{}, kernel.Errorf(kernel.EUnauthorized, "missing bearer token: send Authorization: Bearer <token>")
	}
	p, ok := s.o.Tokens.Authenticate(strings.TrimSpace(secret))
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
