// Package httpapi is reckon's JSON-over-HTTP API, all of it: the one route
// table (routes.go) with every route, its method and its roles, the
// handlers over small service interfaces that the domain packages implement
// (services.go), bearer-token auth, the single mapping of kernel.Error codes
// to status codes, and the HTTP journal client. No other package registers
// a route.
package httpapi

import (
	"context"
	"crypto/rand"
	"crypto/tls"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/url"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-chi/chi/v5"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/rs/zerolog"
	"github.com/rs/zerolog/hlog"
	"golang.org/x/sync/semaphore"

	"github.com/seed-7bc021c3/reckon/adapter/auth"
	"github.com/seed-7bc021c3/reckon/kernel"
	"github.com/seed-7bc021c3/reckon/platform/defaults"
	"github.com/seed-7bc021c3/reckon/platform/httplimit"
	"github.com/seed-7bc021c3/reckon/platform/promx"
)

// MaxBodyBytes bounds every request body.
const MaxBodyBytes = 8 << 20

// BodyReadTimeout bounds how long a request may take to arrive, body
// included, counted from the start of the request: a client that trickles
// its body gets a 408 instead of holding a connection open forever.
const BodyReadTimeout = 30 * time.Second

// IdleTimeout bounds how long a kept-alive connection may wait for its
// next request. Without it net/http waits forever (ReadHeaderTimeout runs
// only once a request's first bytes arrive), so anyone who can reach the
// port could hold one file descriptor per connection after a single
// GET /healthz on each, until the process runs out of them.
const IdleTimeout = 2 * time.Minute

// ReadHeaderTimeout bounds how long a request's headers may take to
// arrive: a client that opens a connection and trickles its headers
// (slowloris) is cut off instead of holding a file descriptor and a
// goroutine for as long as it likes.
const ReadHeaderTimeout = 10 * time.Second

// WriteTimeout bounds a request from the end of its headers to the end of
// its answer. No route streams or long-polls (every answer is one JSON
// document or one console page), so one bound fits all: it cuts off a
// client that stops reading a large answer (a full listing page), whose
// handler would otherwise block in Write, holding its goroutine and
// connection, for as long as the client stays silent. It is generous
// beside BodyReadTimeout, which the body's arrival must meet first, so
// that a slow answer under load is not mistaken for a stalled reader.
// A route's handler gets a little less (handlerBound), so that one held up
// past it is answered rather than cut off.
const WriteTimeout = 2 * time.Minute

// RequestIDHeader carries a request's id: a client's own (up to 128
// printable ASCII characters) is kept, otherwise one is generated; it is
// echoed on every response and logged on the request's access-log line.
const RequestIDHeader = "X-Request-Id"

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
	// Ready are the dependencies GET /readyz checks (PostgreSQL, and
	// Temporal where the process uses it); none means always ready.
	Ready []ReadyCheck

	// Journal ingests POST /v1/events; Owners tells who writes each run:
	// no caller writes into the runs reckon records itself (kernel and
	// gateway runs), and an agent's run takes only its owning source's
	// events (production always sets it).
	Journal kernel.Journal
	Owners  kernel.RunOwners
	// OperationsWindow, when set (RECKON_OPERATIONS_WINDOW; production
	// sets it), makes POST /v1/events refuse a tool.started dated before
	// now minus the window: the listing and the triage sweep read the
	// open operations of the window by their ts, so an operation an agent
	// dates earlier (a wrong clock, or on purpose) would never be listed,
	// triaged or shown to an operator. The listing also counts one the
	// journal took inside the window, reading the index only from a
	// window (and an hour) before the window's start on the strength of
	// this refusal (operations.Service.window). Now is the clock it is
	// measured on; nil means time.Now.
	OperationsWindow time.Duration
	Now              func() time.Time
	// Runs starts and shows runs (*runner.Starter).
	Runs RunService
	// Operations is the listing, reconcile, history and the operator's
	// queue; Verdicts the supervisor's verdicts (*operations.Service
	// implements both).
	Operations OperationService
	Verdicts   VerdictService
	// Triage runs POST /v1/triage's sweep (the pipeline's sweeper).
	Triage TriageService
	// BodyTimeout bounds how long a request (body included) may take to
	// arrive; zero means BodyReadTimeout.
	BodyTimeout time.Duration
	// Console, when set, is the operator console (kernel/console), served
	// as pages at / and under console.AssetPrefix.
	Console http.Handler
	// TLS, when set, makes Listen serve HTTPS with it (RECKON_TLS_CERT_FILE
	// and RECKON_TLS_KEY_FILE: certfile.Pair.TLSConfig); nil serves plain
	// HTTP.
	TLS *tls.Config
	// IdleTimeout bounds how long Listen keeps an idle kept-alive
	// connection open; zero means IdleTimeout.
	IdleTimeout time.Duration
	// ReadHeaderTimeout and WriteTimeout are Listen's bounds on a
	// request's headers and on its answer; zero means ReadHeaderTimeout
	// and WriteTimeout.
	ReadHeaderTimeout time.Duration
	WriteTimeout      time.Duration
	// MaxConnsPerClient caps the connections one client address holds
	// open at once on Listen's listener (RECKON_HTTP_MAX_CONNS_PER_CLIENT);
	// zero means no cap.
	MaxConnsPerClient int
	// Watch reads the verdict stream (GET /v1/agent/operations/watch);
	// WatchPoll is how often an open stream reads the journal
	// (DefaultWatchPoll when zero), MaxStreamsPerClient how many streams
	// one client address holds open at once (DefaultMaxStreamsPerClient
	// when zero, no bound when negative).
	Watch               WatchService
	WatchPoll           time.Duration
	MaxStreamsPerClient int
}

// Server is the API: the route table (routes.go) over the services of its
// Config, with authentication, the error mapping and request metrics.
type Server struct {
	mux    chi.Router
	cfg    Config
	routes []Route
	reqs   *prometheus.CounterVec
	prom   http.Handler // the registry's /metrics, nil without one
	outer  http.Handler // the router inside request id, access log
	// runLocks is the budget of run locks ingest writes hold at once
	// (MaxRunsInFlight).
	runLocks *semaphore.Weighted
	// streams bounds the verdict streams per client; ending is closed
	// (EndStreams) when the server shuts down.
	streams *httplimit.Slots
	ending  chan struct{}
	endOnce sync.Once
}

// New returns the API server with every route of the route table mounted.
func New(cfg Config) *Server {
	if cfg.Tokens == nil {
		cfg.Tokens = &auth.Tokens{}
	}
	cfg.BodyTimeout = defaults.Positive(cfg.BodyTimeout, BodyReadTimeout)
	cfg.IdleTimeout = defaults.Positive(cfg.IdleTimeout, IdleTimeout)
	cfg.ReadHeaderTimeout = defaults.Positive(cfg.ReadHeaderTimeout, ReadHeaderTimeout)
	cfg.WriteTimeout = defaults.Positive(cfg.WriteTimeout, WriteTimeout)
	s := &Server{mux: chi.NewRouter(), cfg: cfg, runLocks: semaphore.NewWeighted(MaxRunsInFlight), ending: make(chan struct{})}
	s.streams = httplimit.NewSlots(s.maxStreams())
	s.reqs = promx.CounterVec("reckon_http_requests_total", "API requests by route and status code.", "route", "code")
	if cfg.Registry != nil {
		cfg.Registry.MustRegister(s.reqs)
		s.prom = promhttp.HandlerFor(cfg.Registry, promhttp.HandlerOpts{})
	}
	s.mux.NotFound(func(w http.ResponseWriter, r *http.Request) {
		Error(w, r, kernel.Errorf(kernel.ENotFound, "no route %s %s; see /openapi.json", r.Method, r.URL.Path))
	})
	s.mux.MethodNotAllowed(func(w http.ResponseWriter, r *http.Request) {
		allow := s.allowed(r.URL.Path)
		w.Header().Set("Allow", strings.Join(allow, ", "))
		WriteJSON(w, http.StatusMethodNotAllowed, map[string]string{"error": fmt.Sprintf("method %s is not allowed on %s (allowed: %s); see /openapi.json", r.Method, r.URL.Path, strings.Join(allow, ", "))})
	})
	for _, rt := range s.table() {
		s.handle(rt)
	}
	for _, pg := range s.pages() {
		s.page(pg.pattern, pg.handler)
	}
	s.outer = s.wrap()
	return s
}

// page serves h at pattern (chi syntax): a page for people, such as the
// operator console, rather than an operation of the JSON API. Pages are not
// listed by Routes nor described in /openapi.json; h sets its own headers
// and answers its own methods.
func (s *Server) page(pattern string, h http.Handler) {
	s.mux.Handle(pattern, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		infoFrom(r.Context()).route = "page " + pattern
		sw := &statusWriter{ResponseWriter: w, code: http.StatusOK}
		defer func() { s.reqs.WithLabelValues("page "+pattern, fmt.Sprint(sw.code)).Inc() }()
		h.ServeHTTP(sw, r)
	}))
}

// handle mounts one route of the table (a GET also answers HEAD): request
// metrics, authentication against its roles (nil roles: public), then the
// query check, both before any body is read, the body bound, the error
// mapping.
func (s *Server) handle(rt route) {
	s.routes = append(s.routes, rt.Route)
	method, pattern, roles, h := rt.Method, rt.Pattern, rt.Roles, rt.handler
	params := queryParams(method, pattern)
	serve := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		info := infoFrom(r.Context())
		info.route = method + " " + pattern
		// The handler's context ends a little before the connection's
		// write deadline (WriteTimeout): a request held up by the
		// database or a lock is stopped and answered, 503 saying so,
		// while the server can still answer, rather than run on past the
		// deadline with its client seeing only a closed connection.
		bound := s.handlerBound()
		ctx, cancel := context.WithTimeoutCause(r.Context(), bound, errOutOfTime)
		defer cancel()
		r = r.WithContext(ctx)
		sw := &statusWriter{ResponseWriter: w, code: http.StatusOK}
		defer func() {
			s.reqs.WithLabelValues(method+" "+pattern, fmt.Sprint(sw.code)).Inc()
			if f := statusObserver.Load(); f != nil {
				(*f)(method+" "+pattern, sw.code)
			}
		}()
		r, err := s.admit(r, roles, params)
		if err != nil {
			refuseUnread(sw, r, err)
			return
		}
		r.Body = http.MaxBytesReader(sw, r.Body, MaxBodyBytes)
		if err := h(sw, r); err != nil {
			if errors.Is(context.Cause(ctx), errOutOfTime) {
				err = outOfTime(bound, err)
			}
			err = classify(err)
			if code := kernel.ErrorCode(err); code == kernel.EInternal || code == kernel.EUnavailable {
				hlog.FromRequest(r).Error().Err(err).Str("route", method+" "+pattern).Msg("request failed")
			}
			Error(sw, r, err)
		}
	})
	s.mux.Method(method, pattern, serve)
	if method == http.MethodGet {
		s.mux.Method(http.MethodHead, pattern, serve)
	}
}

// admit checks what a request may be refused for before its body is
// read, and returns r with the caller's principal in its context. Authentication
// first: a missing or unknown token is a 401 and a too small role a 403
// whatever else the request holds, so a caller without the right token
// learns that, not what is wrong with its query.
func (s *Server) admit(r *http.Request, roles []string, params map[string]bool) (*http.Request, error) {
	if roles != nil {
		p, err := s.authenticate(r, roles)
		if err != nil {
			return r, err
		}
		infoFrom(r.Context()).token = p.Name
		r = r.WithContext(context.WithValue(r.Context(), principalKey{}, p))
	}
	if err := checkQuery(r, params); err != nil {
		return r, err
	}
	return r, mayQueryProject(r)
}

// refuseUnread answers err for a request whose body was not read, at once
// (httplimit.CloseIfUnread; TestEarlyRefusalDoesNotWaitForTheBody).
func refuseUnread(w http.ResponseWriter, r *http.Request, err error) {
	httplimit.CloseIfUnread(w, r)
	Error(w, r, err)
}

// errOutOfTime is the cause a handler's context ends with at its bound.
var errOutOfTime = errors.New("the request reached the server's time bound")

// handlerBound is how long a route's handler may run: WriteTimeout less
// a tenth (at most 5 s), the time left to write the answer.
func (s *Server) handlerBound() time.Duration {
	return s.cfg.WriteTimeout - min(s.cfg.WriteTimeout/10, 5*time.Second)
}

// outOfTime is err, from a handler stopped at its bound, as the 503 its
// caller reads. A write may have landed before the stop; a retry is
// answered as any repeat is.
func outOfTime(bound time.Duration, err error) error {
	return fmt.Errorf("%w: %w", kernel.Errorf(kernel.EUnavailable,
		"the request did not finish within this server's bound of %v and was stopped; retry it (a write that had landed is answered as a repeat)", bound), err)
}

// allowed lists the methods served at path, for a 405's Allow header.
func (s *Server) allowed(path string) []string {
	var out []string
	for _, m := range []string{http.MethodGet, http.MethodHead, http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete} {
		if s.mux.Match(chi.NewRouteContext(), m, path) {
			out = append(out, m)
		}
	}
	return out
}

// checkQuery refuses a query string that does not parse, names a
// parameter the route does not take (known: the route's parameters in
// openapi.json) or names one twice, or whose names or values hold a NUL
// or invalid UTF-8 (%00, %ff), naming the parameter: PostgreSQL would
// refuse the byte later with a 500, and a misspelt or repeated parameter
// would otherwise be ignored or half-read in silence (TestQueryParameters).
func checkQuery(r *http.Request, known map[string]bool) error {
	q, err := url.ParseQuery(r.URL.RawQuery)
	if err != nil {
		return kernel.Errorf(kernel.EInvalid, "query string does not parse: %v", err)
	}
	var unknown []string
	for k, vs := range q {
		if err := kernel.CheckText("query parameter name", k); err != nil {
			return err
		}
		if !known[k] {
			unknown = append(unknown, strconv.Quote(k))
			continue
		}
		if len(vs) > 1 {
			return kernel.Errorf(kernel.EInvalid, "query parameter %q is given %d times; give it once", k, len(vs))
		}
		for _, v := range vs {
			if err := kernel.CheckText(fmt.Sprintf("query parameter %q", k), v); err != nil {
				return err
			}
		}
	}
	if len(unknown) > 0 {
		slices.Sort(unknown)
		return kernel.Errorf(kernel.EInvalid, "unknown query parameter %s for %s; see /openapi.json", strings.Join(unknown, ", "), infoFrom(r.Context()).route)
	}
	return nil
}

// mayQueryProject refuses, 403, a request whose project query parameter
// names a project the caller's token is not limited to. Routes that take
// the project in their body check it themselves.
func mayQueryProject(r *http.Request) error {
	p, ok := PrincipalFrom(r.Context())
	if !ok || !p.Limited() {
		return nil
	}
	if project := r.URL.Query().Get("project"); project != "" && !p.MaySee(project) {
		return forbiddenProject(p, project)
	}
	return nil
}

// mayProject refuses, 403, a project the caller's token may not see.
func mayProject(r *http.Request, project string) error {
	if p, ok := PrincipalFrom(r.Context()); ok && !p.MaySee(project) {
		return forbiddenProject(p, project)
	}
	return nil
}

func forbiddenProject(p auth.Principal, project string) error {
	return kernel.Errorf(kernel.EForbidden, "token %q may see only the projects its RECKON_TOKENS entry lists (%s), not %q",
		p.Name, strings.Join(p.Projects, ", "), project)
}

// statusObserver, when set, sees the status of every routed response: the
// package's tests record them all and check each against openapi.json
// (export_test.go). Production never sets it.
var statusObserver atomic.Pointer[func(route string, status int)]

// Routes lists every route the server serves, in table order.
func (s *Server) Routes() []Route { return append([]Route(nil), s.routes...) }

// ServeHTTP implements http.Handler: every request gets a request id
// (echoed in X-Request-Id), its path checked for NUL and invalid UTF-8, a
// deadline for its body, and one access-log line when it is answered;
// every answer carries X-Content-Type-Options: nosniff.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) { s.outer.ServeHTTP(w, r) }

// wrap is the middleware around the router: zerolog's hlog puts the
// logger (with the request id) in the context and times the access log.
func (s *Server) wrap() http.Handler {
	inner := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// The handlers' logger carries the request id.
		l := hlog.FromRequest(r).With().Str("request_id", infoFrom(r.Context()).id).Logger()
		r = r.WithContext(l.WithContext(r.Context()))
		if err := kernel.CheckText("path", r.URL.Path); err != nil {
			Error(w, r, err)
			return
		}
		s.mux.ServeHTTP(w, r)
	})
	return s.withRequestID(httplimit.BodyDeadline(s.cfg.BodyTimeout, hlog.NewHandler(s.cfg.Log)(hlog.AccessHandler(s.accessLog)(inner))))
}

// accessLog writes the one line per request: never the token's secret,
// only its name.
func (s *Server) accessLog(r *http.Request, status, size int, d time.Duration) {
	info := infoFrom(r.Context())
	route := info.route
	if route == "" {
		route = "unmatched"
	}
	ev := s.cfg.Log.Info()
	if status >= 500 {
		ev = s.cfg.Log.Warn()
	}
	ev.Str("method", r.Method).Str("route", route).Str("path", r.URL.Path).
		Int("status", status).Int("bytes", size).
		Float64("duration_ms", float64(d.Microseconds())/1000).
		Str("request_id", info.id).Str("token", info.token).Msg("http request")
}

// reqInfo is what the layers of one request learn for its access-log
// line: the id, the matched route, the token's name.
type reqInfo struct{ id, route, token string }

type reqInfoKey struct{}

func infoFrom(ctx context.Context) *reqInfo {
	if i, ok := ctx.Value(reqInfoKey{}).(*reqInfo); ok {
		return i
	}
	return &reqInfo{}
}

// withRequestID keeps a client's X-Request-Id when it is sane, else makes
// one, echoes it and puts it on the request's logger.
func (s *Server) withRequestID(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id := r.Header.Get(RequestIDHeader)
		if !saneRequestID(id) {
			var b [12]byte
			_, _ = rand.Read(b[:])
			id = hex.EncodeToString(b[:])
		}
		w.Header().Set(RequestIDHeader, id)
		// Answers echo text a caller chose (a 404 names the path; listings
		// carry agents' args), so no browser may read one as anything but
		// its declared type. The console's pages set the same.
		w.Header().Set("X-Content-Type-Options", "nosniff")
		info := &reqInfo{id: id}
		next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), reqInfoKey{}, info)))
	})
}

func saneRequestID(id string) bool {
	if id == "" || len(id) > 128 {
		return false
	}
	for i := 0; i < len(id); i++ {
		if id[i] <= ' ' || id[i] > '~' {
			return false
		}
	}
	return true
}

func (s *Server) authenticate(r *http.Request, roles []string) (auth.Principal, error) {
	secret, ok := httplimit.Bearer(r)
	if !ok {
		return auth.Principal{}, kernel.Errorf(kernel.EUnauthorized, "missing bearer token: send Authorization: Bearer <token>")
	}
	p, ok := s.cfg.Tokens.Authenticate(secret)
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
	kernel.ETimeout:      http.StatusRequestTimeout,
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
	switch code {
	case kernel.EUnauthorized:
		w.Header().Set("WWW-Authenticate", `Bearer realm="reckon"`)
	case kernel.EUnavailable:
		w.Header().Set("Retry-After", strconv.Itoa(RetryAfterSeconds))
	case kernel.ETimeout:
		// The connection's read side is past its deadline: close it.
		w.Header().Set("Connection", "close")
	}
	if i, ok := kernel.RefusedEventIndex(err); ok {
		WriteJSON(w, status, refusal{Error: kernel.ErrorMessage(err), EventIndex: i})
		return
	}
	WriteJSON(w, status, map[string]string{"error": kernel.ErrorMessage(err)})
}

// refusal is the error answer that names the one event of a batch it
// refused: "event_index" counts from 0, and the events before it passed
// the check that refused it.
type refusal struct {
	Error      string `json:"error"`
	EventIndex int    `json:"event_index"`
}

// WriteJSON writes v as JSON with status.
func WriteJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(v)
}

// readBody is ReadJSON for a route whose invalid body is refused with
// the body's shape, shape ("guard body must be {...}") before the
// decoder's own message.
func readBody(r *http.Request, v any, shape string) error {
	err := ReadJSON(r, v)
	if err != nil && kernel.ErrorCode(err) == kernel.EInvalid {
		return kernel.Errorf(kernel.EInvalid, "%s: %s", shape, kernel.ErrorMessage(err))
	}
	return err
}

// ReadJSON is the one strict decoder of request bodies: the body must be
// one JSON value without a NUL, invalid UTF-8 or a duplicate key anywhere
// (kernel.CheckJSON, naming the field), and every field must be one v
// declares (a misspelt "runId" is a 400, not a silently ignored field).
// Every route with a body decodes it here.
func ReadJSON(r *http.Request, v any) error {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			return kernel.Errorf(kernel.ETooLarge, "request body is larger than %d bytes", mbe.Limit)
		}
		if errors.Is(err, os.ErrDeadlineExceeded) {
			return kernel.Errorf(kernel.ETimeout, "request body not received in time (the server's body deadline, %s by default)", BodyReadTimeout)
		}
		return kernel.Errorf(kernel.EInvalid, "read request body: %v", err)
	}
	return kernel.DecodeStrict("request body", body, v)
}

type statusWriter struct {
	http.ResponseWriter
	code int
}

// Unwrap lets http.ResponseController reach the connection.
func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

func (w *statusWriter) WriteHeader(code int) {
	w.code = code
	w.ResponseWriter.WriteHeader(code)
}

// Scheme is how the API is reached: https when it serves TLS, else http.
func (s *Server) Scheme() string {
	if s.cfg.TLS != nil {
		return "https"
	}
	return "http"
}

// serverLog takes net/http's server log lines to the API's log: a failed
// TLS handshake at debug (a line for every connection that did not
// complete one: load balancers' TCP checks, scanners, a client speaking
// plain HTTP), a handler's panic (net/http recovers it and logs it with
// its stack) at error, anything else at warn.
type serverLog struct{ log zerolog.Logger }

func (h serverLog) Write(p []byte) (int, error) {
	msg := strings.TrimRight(string(p), "\n")
	ev := h.log.Warn()
	switch {
	case strings.Contains(msg, "TLS handshake error"):
		ev = h.log.Debug()
	case strings.HasPrefix(msg, "http: panic serving"):
		ev = h.log.Error()
	}
	ev.Str("component", "http").Msg(msg)
	return len(p), nil
}

// Listen binds addr (127.0.0.1:0 picks a free port) and serves s until ctx
// ends, over TLS when the config has it. The bound address is sent on
// bound before serving starts.
func (s *Server) Listen(ctx context.Context, addr string, bound chan<- string) error {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("listen on %s (RECKON_HTTP_ADDR): %w", addr, err)
	}
	ln = httplimit.PerClient(ln, s.cfg.MaxConnsPerClient)
	srv := &http.Server{Handler: s, ReadHeaderTimeout: s.cfg.ReadHeaderTimeout, WriteTimeout: s.cfg.WriteTimeout, IdleTimeout: s.cfg.IdleTimeout}
	// net/http's own lines go to the API's log rather than to stderr.
	srv.ErrorLog = log.New(serverLog{s.cfg.Log}, "", 0)
	if s.cfg.TLS != nil {
		srv.TLSConfig = s.cfg.TLS.Clone()
	}
	if bound != nil {
		bound <- ln.Addr().String()
	}
	errc := make(chan error, 1)
	go func() {
		if s.cfg.TLS != nil {
			errc <- srv.ServeTLS(ln, "", "")
			return
		}
		errc <- srv.Serve(ln)
	}()
	select {
	case <-ctx.Done():
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		s.EndStreams()
		_ = srv.Shutdown(sctx)
		return nil
	case err := <-errc:
		if errors.Is(err, http.ErrServerClosed) {
			return nil
		}
		return err
	}
}
