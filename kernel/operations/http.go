package operations

import (
	"bytes"
	"encoding/json"
	"net/http"
	"strconv"

	"github.com/seed-7bc021c3/reckon/kernel"
	"github.com/seed-7bc021c3/reckon/kernel/auth"
	"github.com/seed-7bc021c3/reckon/kernel/httpapi"
)

// Routes served by Mount.
const (
	PathOperations = "/v1/agent/operations"
	PathReconcile  = "/v1/agent/operations/reconcile"
	PathHistory    = "/v1/agent/operations/history"
	PathAttention  = "/v1/agent/operations/attention"
	PathProjects   = "/v1/projects"
)

// IdempotencyKeyHeader carries a reconcile's idempotency key.
const IdempotencyKeyHeader = "Idempotency-Key"

// ReplayedHeader is set to "true" on a reconcile answer that returns the
// event an earlier request with the same idempotency key recorded.
const ReplayedHeader = "Idempotent-Replayed"

// Mount serves the listing, reconcile, history, attention and projects
// endpoints on srv.
func (s *Service) Mount(srv *httpapi.Server) {
	srv.Handle(http.MethodGet, PathOperations, []string{auth.RoleReader}, s.handleList)
	srv.Handle(http.MethodPost, PathReconcile, []string{auth.RoleOperator}, s.handleReconcile)
	srv.Handle(http.MethodGet, PathHistory, []string{auth.RoleReader}, s.handleHistory)
	srv.Handle(http.MethodGet, PathAttention, []string{auth.RoleReader}, s.handleAttention)
	srv.Handle(http.MethodGet, PathProjects, []string{auth.RoleReader}, s.handleProjects)
}

func (s *Service) handleProjects(w http.ResponseWriter, r *http.Request) error {
	ps, truncated, err := s.KnownProjects(r.Context())
	if err != nil {
		return err
	}
	httpapi.WriteJSON(w, http.StatusOK, map[string]any{"projects": ps, "truncated": truncated})
	return nil
}

// limitParam reads an optional limit query parameter.
func limitParam(v string) (int, error) {
	if v == "" {
		return 0, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 {
		return 0, kernel.Errorf(kernel.EInvalid, "limit must be an integer between 1 and %d, got %q", MaxLimit, v)
	}
	return n, nil
}

func (s *Service) handleAttention(w http.ResponseWriter, r *http.Request) error {
	q := r.URL.Query()
	limit, err := limitParam(q.Get("limit"))
	if err != nil {
		return err
	}
	page, err := s.Attention(r.Context(), AttentionParams{Project: q.Get("project"), RunID: q.Get("run_id"), Cursor: q.Get("cursor"), Limit: limit})
	if err != nil {
		return err
	}
	var next *string
	if page.NextCursor != "" {
		next = &page.NextCursor
	}
	httpapi.WriteJSON(w, http.StatusOK, map[string]any{"operations": page.Operations, "next_cursor": next})
	return nil
}

func (s *Service) handleList(w http.ResponseWriter, r *http.Request) error {
	q := r.URL.Query()
	p := ListParams{Project: q.Get("project"), RunID: q.Get("run_id"), Cursor: q.Get("cursor")}
	limit, err := limitParam(q.Get("limit"))
	if err != nil {
		return err
	}
	p.Limit = limit
	page, err := s.List(r.Context(), p)
	if err != nil {
		return err
	}
	var next *string
	if page.NextCursor != "" {
		next = &page.NextCursor
	}
	httpapi.WriteJSON(w, http.StatusOK, map[string]any{
		"operations": page.Operations, "next_cursor": next, "degraded": page.Degraded,
	})
	return nil
}

// reconcileBody is the reconcile request as the API accepts it; unknown
// fields are rejected so that a caller who sends basis or actor learns
// that the server decides those.
type reconcileBody struct {
	Project     string          `json:"project"`
	RunID       string          `json:"run_id"`
	OperationID string          `json:"operation_id"`
	Effect      string          `json:"effect"`
	Note        string          `json:"note"`
	Evidence    json.RawMessage `json:"evidence"`
}

func (s *Service) handleReconcile(w http.ResponseWriter, r *http.Request) error {
	var raw json.RawMessage
	if err := httpapi.ReadJSON(r, &raw); err != nil {
		return err
	}
	var b reconcileBody
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&b); err != nil {
		return kernel.Errorf(kernel.EInvalid, "reconcile body must be {project, run_id, operation_id, effect, note, evidence?}: %v", err)
	}
	p, _ := httpapi.PrincipalFrom(r.Context())
	req := ReconcileRequest{
		Project: b.Project, RunID: b.RunID, OperationID: b.OperationID,
		Effect: b.Effect, Note: b.Note, Evidence: b.Evidence,
		Basis: kernel.BasisOperator, Actor: "operator:" + p.Name,
		IdempotencyKey: r.Header.Get(IdempotencyKeyHeader),
	}
	ev, repeated, err := s.reconcile(r.Context(), req)
	if err != nil {
		return err
	}
	if repeated {
		w.Header().Set(ReplayedHeader, "true")
	}
	httpapi.WriteJSON(w, http.StatusCreated, ev)
	return nil
}

func (s *Service) handleHistory(w http.ResponseWriter, r *http.Request) error {
	q := r.URL.Query()
	evs, err := s.History(r.Context(), q.Get("project"), q.Get("run_id"), q.Get("operation_id"))
	if err != nil {
		return err
	}
	httpapi.WriteJSON(w, http.StatusOK, map[string]any{"events": evs})
	return nil
}
