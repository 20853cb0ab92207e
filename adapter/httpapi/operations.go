package httpapi

import (
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/seed-7bc021c3/reckon/kernel"
	"github.com/seed-7bc021c3/reckon/kernel/operations"
)

// limitParam reads an optional limit query parameter in [1, max].
func limitParam(v string, max int) (int, error) {
	if v == "" {
		return 0, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 || n > max {
		return 0, kernel.Errorf(kernel.EInvalid, "limit must be an integer between 1 and %d, got %q", max, v)
	}
	return n, nil
}

// nextCursor is a page's next_cursor as served: null on the last page.
func nextCursor(c string) *string {
	if c == "" {
		return nil
	}
	return &c
}

// listOperations serves GET /v1/agent/operations (reader): a page of the
// project's unresolved operations.
func (s *Server) listOperations(w http.ResponseWriter, r *http.Request) error {
	if s.cfg.Operations == nil {
		return unserved("operations")
	}
	p, err := pageQuery(r)
	if err != nil {
		return err
	}
	page, err := s.cfg.Operations.List(r.Context(), operations.ListParams(p))
	if err != nil {
		return err
	}
	WriteJSON(w, http.StatusOK, map[string]any{
		"operations": page.Operations, "next_cursor": nextCursor(page.NextCursor), "degraded": page.Degraded,
	})
	return nil
}

// attention serves GET /v1/agent/operations/attention (reader): a page of
// the operator's queue.
func (s *Server) attention(w http.ResponseWriter, r *http.Request) error {
	if s.cfg.Operations == nil {
		return unserved("operations")
	}
	p, err := pageQuery(r)
	if err != nil {
		return err
	}
	page, err := s.cfg.Operations.Attention(r.Context(), operations.AttentionParams(p))
	if err != nil {
		return err
	}
	WriteJSON(w, http.StatusOK, map[string]any{"operations": page.Operations, "next_cursor": nextCursor(page.NextCursor)})
	return nil
}

// pageQuery reads the query of a paged operations route: project, run_id,
// cursor and limit (its upper bound the service checks, naming
// operations.MaxLimit).
func pageQuery(r *http.Request) (operations.ListParams, error) {
	q := r.URL.Query()
	p := operations.ListParams{Project: q.Get("project"), RunID: q.Get("run_id"), Cursor: q.Get("cursor")}
	if v := q.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			return p, kernel.Errorf(kernel.EInvalid, "limit must be an integer between 1 and %d, got %q", operations.MaxLimit, v)
		}
		p.Limit = n
	}
	return p, nil
}

// postReconcile serves POST /v1/agent/operations/reconcile (operator): an
// operator's ruling, recorded as operation.reconciled with basis operator.
func (s *Server) postReconcile(w http.ResponseWriter, r *http.Request) error {
	if s.cfg.Operations == nil {
		return unserved("operations")
	}
	var b kernel.ReconcileRequest
	if err := readBody(r, &b, "reconcile body must be {project, run_id, operation_id, effect, note, evidence?}"); err != nil {
		return err
	}
	if err := mayProject(r, b.Project); err != nil {
		return err
	}
	p, _ := PrincipalFrom(r.Context())
	rec, err := s.cfg.Operations.Reconcile(r.Context(), operations.ReconcileParams{
		Project: b.Project, RunID: b.RunID, OperationID: b.OperationID,
		Effect: b.Effect, Note: b.Note, Evidence: b.Evidence,
		Basis: kernel.BasisOperator, Actor: kernel.OperatorActor(p.Name),
		IdempotencyKey: r.Header.Get(IdempotencyKeyHeader),
	})
	if err != nil {
		return err
	}
	if rec.Repeated {
		w.Header().Set(ReplayedHeader, "true")
	}
	WriteJSON(w, http.StatusCreated, rec.Event)
	return nil
}

// history serves GET /v1/agent/operations/history (reader): an operation's
// events and reconciliations in order.
func (s *Server) history(w http.ResponseWriter, r *http.Request) error {
	if s.cfg.Operations == nil {
		return unserved("operations")
	}
	q := r.URL.Query()
	evs, err := s.cfg.Operations.History(r.Context(), q.Get("project"), q.Get("run_id"), q.Get("operation_id"))
	if err != nil {
		return err
	}
	WriteJSON(w, http.StatusOK, map[string]any{"events": evs})
	return nil
}

// verdicts serves GET /v1/supervisor/verdicts?project=P[&run_id=R]
// [&since=RFC3339][&limit=N] (reader): {"verdicts": [<supervisor.verdict
// events>], "resolutions": [<Resolution>]}, newest first, one resolution
// per verdict in the same order.
func (s *Server) verdicts(w http.ResponseWriter, r *http.Request) error {
	if s.cfg.Verdicts == nil {
		return unserved("verdicts")
	}
	q := r.URL.Query()
	p := operations.VerdictParams{Project: q.Get("project"), RunID: q.Get("run_id")}
	if p.Project == "" {
		return kernel.Errorf(kernel.EInvalid, "query parameter project is required")
	}
	limit, err := limitParam(q.Get("limit"), operations.MaxVerdictLimit)
	if err != nil {
		return err
	}
	p.Limit = limit
	if v := q.Get("since"); v != "" {
		t, err := time.Parse(time.RFC3339, v)
		if err != nil {
			return kernel.Errorf(kernel.EInvalid, "since must be an RFC 3339 time, got %q", v)
		}
		p.Since = t
	}
	page, err := s.cfg.Verdicts.Verdicts(r.Context(), p)
	if err != nil {
		return err
	}
	WriteJSON(w, http.StatusOK, page)
	return nil
}

// projects serves GET /v1/projects[?q=prefix][&cursor=][&limit=]
// (reader): a page of the projects the caller may see, sorted by name —
// the journal's projects, or the list a limited token names — with the
// cursor of the next page; a page is never cut without one.
func (s *Server) projects(w http.ResponseWriter, r *http.Request) error {
	if s.cfg.Operations == nil {
		return unserved("operations")
	}
	q := r.URL.Query()
	limit, err := limitParam(q.Get("limit"), operations.MaxKnownProjects)
	if err != nil {
		return err
	}
	params := operations.ProjectsParams{After: q.Get("cursor"), Prefix: q.Get("q"), Limit: limit}
	var page operations.ProjectsPage
	if p, _ := PrincipalFrom(r.Context()); p.Limited() {
		page = limitedProjects(p.Projects, params)
	} else if page, err = s.cfg.Operations.KnownProjects(r.Context(), params); err != nil {
		return err
	}
	WriteJSON(w, http.StatusOK, map[string]any{
		"projects": page.Projects, "next_cursor": nextCursor(page.Next), "truncated": page.Next != "",
	})
	return nil
}

// limitedProjects is the page of a limited token's own projects.
func limitedProjects(mine []string, p operations.ProjectsParams) operations.ProjectsPage {
	limit := p.Limit
	if limit <= 0 {
		limit = operations.MaxKnownProjects
	}
	names := slices.Sorted(slices.Values(mine))
	var out []string
	for _, n := range names {
		if n > p.After && strings.HasPrefix(n, p.Prefix) && len(out) <= limit {
			out = append(out, n)
		}
	}
	return operations.PageOfProjects(out, limit)
}
