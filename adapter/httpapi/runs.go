package httpapi

import (
	"encoding/json"
	"net/http"
	"net/url"

	"github.com/go-chi/chi/v5"

	"github.com/seed-7bc021c3/reckon/kernel"
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
	}
	if err := ReadJSON(r, &body); err != nil {
		return err
	}
	if err := mayProject(r, body.Project); err != nil {
		return err
	}
	plan, err := runner.DecodePlan(body.Plan)
	if err != nil {
		return err
	}
	runID, created, err := s.cfg.Runs.Start(r.Context(), runner.StartParams{Project: body.Project, RunID: body.RunID, Plan: plan})
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

// getRun serves GET /v1/runs/{run_id}?project=[&cursor=][&limit=]
// (reader): status and a page of events (runner.DefaultEventLimit,
// at most runner.MaxEventLimit, at most runner.MaxEventPageBytes of data).
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
	runID := chi.URLParam(r, "run_id")
	if r.URL.RawPath != "" {
		// chi routes on the escaped path when there is one (a run id
		// holding "/" arrives as %2F) and leaves its parameters escaped;
		// r.URL.Path, which the server checked for NUL and invalid UTF-8,
		// holds the same id decoded.
		if runID, err = url.PathUnescape(runID); err != nil {
			return kernel.Errorf(kernel.EInvalid, "run id in the path is not a valid escaped path segment: %v", err)
		}
	}
	v, err := s.cfg.Runs.View(r.Context(), project, runID,
		runner.EventPage{Cursor: r.URL.Query().Get("cursor"), Limit: limit})
	if err != nil {
		return err
	}
	WriteJSON(w, http.StatusOK, v)
	return nil
}
