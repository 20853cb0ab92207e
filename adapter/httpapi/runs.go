package httpapi

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/url"

	"github.com/go-chi/chi/v5"

	"github.com/seed-7bc021c3/reckon/kernel"
	"github.com/seed-7bc021c3/reckon/kernel/operations"
	"github.com/seed-7bc021c3/reckon/kernel/plan"
	"github.com/seed-7bc021c3/reckon/kernel/runner"
)

// startRun serves POST /v1/runs (operator): start a run from a plan; 201
// when started, 200 when the same run_id and plan already exist, 409 when
// the run_id exists with a different plan, 400 naming the bad field.
func (s *Server) startRun(w http.ResponseWriter, r *http.Request) error {
	if s.cfg.Runs == nil {
		return unserved("runs")
	}
	var body struct {
		Project string          `json:"project"`
		RunID   string          `json:"run_id"`
		Plan    json.RawMessage `json:"plan"`
		Agent   json.RawMessage `json:"agent"`
	}
	if err := ReadJSON(r, &body); err != nil {
		return err
	}
	if err := mayProject(r, body.Project); err != nil {
		return err
	}
	params, err := startParams(body.Project, body.RunID, body.Plan, body.Agent)
	if err != nil {
		return err
	}
	runID, created, err := s.cfg.Runs.Start(r.Context(), params)
	if err != nil {
		return err
	}
	status := http.StatusOK
	if created {
		status = http.StatusCreated
	}
	WriteJSON(w, status, map[string]string{"run_id": runID, "project": body.Project})
	return nil
}

// startParams decodes the body of POST /v1/runs: exactly one of plan
// and agent.
func startParams(project, runID string, planRaw, agentRaw json.RawMessage) (runner.StartParams, error) {
	p := runner.StartParams{Project: project, RunID: runID}
	if present(agentRaw) {
		if present(planRaw) {
			return p, kernel.Errorf(kernel.EInvalid, "plan: a run carries a plan or an agent, not both")
		}
		a, err := plan.DecodeAgent(agentRaw)
		if err != nil {
			return p, err
		}
		p.Agent = &a
		return p, nil
	}
	var err error
	p.Plan, err = runner.DecodePlan(planRaw)
	return p, err
}

// present reports whether a JSON member was given other than null.
func present(raw json.RawMessage) bool {
	t := bytes.TrimSpace(raw)
	return len(t) > 0 && string(t) != "null"
}

// getRun serves GET /v1/runs/{run_id}?project=[&cursor=][&limit=]
// (reader): status and a page of events (runner.DefaultEventLimit,
// at most runner.MaxEventLimit, at most runner.MaxEventPageBytes of data),
// with the run's summary from the runs index (null while the journal
// holds none of its events).
func (s *Server) getRun(w http.ResponseWriter, r *http.Request) error {
	if s.cfg.Runs == nil {
		return unserved("runs")
	}
	project := r.URL.Query().Get("project")
	if project == "" {
		return kernel.Errorf(kernel.EInvalid, "query parameter \"project\" is required: /v1/runs/{run_id}?project=...")
	}
	limit, err := limitParam(r.URL.Query().Get("limit"), runner.MaxEventLimit)
	if err != nil {
		return err
	}
	runID, err := runIDParam(r)
	if err != nil {
		return err
	}
	v, err := s.cfg.Runs.View(r.Context(), project, runID,
		runner.EventPage{Cursor: r.URL.Query().Get("cursor"), Limit: limit})
	if err != nil {
		return err
	}
	answer := runAnswer{RunView: v}
	if s.cfg.Operations != nil {
		if answer.Summary, err = s.cfg.Operations.RunSummary(r.Context(), project, runID); err != nil {
			return err
		}
	}
	WriteJSON(w, http.StatusOK, answer)
	return nil
}

// runAnswer is GET /v1/runs/{run_id}'s body: the run's view and its
// summary in the runs index.
type runAnswer struct {
	runner.RunView
	Summary *operations.RunSummary `json:"summary"`
}

// runIDParam is the path's run id. chi routes on the escaped path when
// there is one (a run id holding "/" arrives as %2F) and leaves its
// parameters escaped; r.URL.Path, which the server checked for NUL and
// invalid UTF-8, holds the same id decoded.
func runIDParam(r *http.Request) (string, error) {
	runID := chi.URLParam(r, "run_id")
	if r.URL.RawPath == "" {
		return runID, nil
	}
	id, err := url.PathUnescape(runID)
	if err != nil {
		return "", kernel.Errorf(kernel.EInvalid, "run id in the path is not a valid escaped path segment: %v", err)
	}
	return id, nil
}

// listRuns serves GET /v1/runs?project=[&status=][&parent_run_id=]
// [&cursor=][&limit=] (reader): a page of the project's runs from the
// runs index, newest first.
func (s *Server) listRuns(w http.ResponseWriter, r *http.Request) error {
	if s.cfg.Operations == nil {
		return unserved("runs")
	}
	q := r.URL.Query()
	limit, err := limitParam(q.Get("limit"), operations.MaxRunsLimit)
	if err != nil {
		return err
	}
	page, err := s.cfg.Operations.Runs(r.Context(), operations.RunsParams{
		Project: q.Get("project"), Status: q.Get("status"), ParentRunID: q.Get("parent_run_id"),
		Cursor: q.Get("cursor"), Limit: limit,
	})
	if err != nil {
		return err
	}
	WriteJSON(w, http.StatusOK, map[string]any{"runs": page.Runs, "next_cursor": nextCursor(page.NextCursor)})
	return nil
}

// runOperations serves GET /v1/runs/{run_id}/operations?project=
// [&cursor=][&limit=] (reader): a page of the run's operations in every
// state, in the order they started.
func (s *Server) runOperations(w http.ResponseWriter, r *http.Request) error {
	if s.cfg.Operations == nil {
		return unserved("operations")
	}
	q := r.URL.Query()
	limit, err := limitParam(q.Get("limit"), operations.MaxLimit)
	if err != nil {
		return err
	}
	runID, err := runIDParam(r)
	if err != nil {
		return err
	}
	page, err := s.cfg.Operations.RunOperations(r.Context(), operations.RunOperationsParams{
		Project: q.Get("project"), RunID: runID, Cursor: q.Get("cursor"), Limit: limit,
	})
	if err != nil {
		return err
	}
	WriteJSON(w, http.StatusOK, map[string]any{
		"operations": page.Operations, "next_cursor": nextCursor(page.NextCursor), "degraded": page.Degraded,
	})
	return nil
}
