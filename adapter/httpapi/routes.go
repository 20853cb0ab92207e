package httpapi

import (
	"net/http"

	"github.com/seed-7bc021c3/reckon/adapter/auth"
	"github.com/seed-7bc021c3/reckon/adapter/console"
	"github.com/seed-7bc021c3/reckon/kernel"
)

// Paths of the API's routes (the contract is docs/design.md and
// openapi.json).
const (
	PathHealth     = "/healthz"
	PathMetrics    = "/metrics"
	PathOpenAPI    = "/openapi.json"
	PathEvents     = "/v1/events"
	PathRuns       = "/v1/runs"
	PathRun        = "/v1/runs/{run_id}"
	PathOperations = "/v1/agent/operations"
	PathReconcile  = "/v1/agent/operations/reconcile"
	PathHistory    = "/v1/agent/operations/history"
	PathAttention  = "/v1/agent/operations/attention"
	// PathGuard is the retry guard (operations.Service.Guard).
	PathGuard = "/v1/agent/operations/guard"
	// PathWatch is the verdict stream (Server-Sent Events).
	PathWatch    = "/v1/agent/operations/watch"
	PathVerdicts = "/v1/supervisor/verdicts"
	PathProjects = "/v1/projects"
	// PathTriage runs a triage sweep now (TriageService).
	PathTriage = "/v1/triage"
	// PathWhoami answers {name, role} for the caller's token.
	PathWhoami = "/v1/whoami"
	// PathRunOperations lists a run's operations in every state.
	PathRunOperations = "/v1/runs/{run_id}/operations"
)

// IdempotencyKeyHeader carries a reconcile's idempotency key.
const IdempotencyKeyHeader = "Idempotency-Key"

// ReplayedHeader is set to "true" on a reconcile answer that returns the
// event an earlier request with the same idempotency key recorded.
const ReplayedHeader = "Idempotent-Replayed"

// Route describes one served route: what the OpenAPI cross-check reads.
type Route struct {
	Method, Pattern string
	// Roles may call the route (operator satisfies reader); nil is public.
	Roles []string
}

type route struct {
	Route
	handler handlerFunc
}

// Roles of the route table.
var (
	public          []string
	reader          = []string{auth.RoleReader}
	operator        = []string{auth.RoleOperator}
	agentOrOperator = []string{auth.RoleAgent, auth.RoleOperator}
	anyRole         = []string{auth.RoleAgent, auth.RoleReader}
)

// table is THE route table: every route of the API, its method, the roles
// that may call it and its handler. Nothing else registers a route.
func (s *Server) table() []route {
	return []route{
		{Route{http.MethodGet, PathHealth, public}, s.health},
		{Route{http.MethodGet, PathReady, public}, s.ready},
		{Route{http.MethodGet, PathMetrics, public}, s.metrics},
		{Route{http.MethodGet, PathOpenAPI, public}, s.openapi},
		{Route{http.MethodPost, PathEvents, agentOrOperator}, s.ingest},
		{Route{http.MethodPost, PathRuns, operator}, s.startRun},
		{Route{http.MethodGet, PathRuns, reader}, s.listRuns},
		{Route{http.MethodGet, PathRun, reader}, s.getRun},
		{Route{http.MethodGet, PathRunOperations, reader}, s.runOperations},
		{Route{http.MethodGet, PathOperations, reader}, s.listOperations},
		{Route{http.MethodPost, PathReconcile, operator}, s.postReconcile},
		{Route{http.MethodGet, PathHistory, reader}, s.history},
		{Route{http.MethodGet, PathAttention, reader}, s.attention},
		{Route{http.MethodPost, PathGuard, agentOrOperator}, s.postGuard},
		{Route{http.MethodGet, PathWatch, reader}, s.watch},
		{Route{http.MethodGet, PathVerdicts, reader}, s.verdicts},
		{Route{http.MethodPost, PathTriage, operator}, s.postTriage},
		{Route{http.MethodGet, PathProjects, reader}, s.projects},
		{Route{http.MethodGet, PathWhoami, anyRole}, s.whoami},
	}
}

// page is a page for people served beside the API (not in Routes, not in
// openapi.json).
type page struct {
	pattern string
	handler http.Handler
}

// pages are the pages the server serves: the operator console, when set.
func (s *Server) pages() []page {
	if s.cfg.Console == nil {
		return nil
	}
	return []page{{"/", s.cfg.Console}, {console.AssetPrefix + "*", s.cfg.Console}}
}

// unserved answers for a route whose service this process does not have.
func unserved(what string) error {
	return kernel.Errorf(kernel.EUnavailable, "this server does not serve %s", what)
}
