package runner

import (
	"encoding/json"
	"net/http"

	"github.com/go-chi/chi/v5"

	"github.com/seed-7bc021c3/reckon/kernel"
	"github.com/seed-7bc021c3/reckon/kernel/auth"
	"github.com/seed-7bc021c3/reckon/kernel/httpapi"
)

// Mount serves the runs API on srv:
//
//	POST /v1/runs (operator): start a run from a plan; 201 when started,
//	  200 when the same run_id and plan already exist, 409 when the run_id
//	  exists with a different plan, 400 naming the bad field.
//	GET /v1/runs/{run_id}?project= (reader): status and events.
func Mount(srv *httpapi.Server, s *Starter) {
	srv.Handle(http.MethodPost, "/v1/runs", []string{auth.RoleOperator}, func(w http.ResponseWriter, r *http.Request) error {
		var body struct {
			Project string          `json:"project"`
			RunID   string          `json:"run_id"`
			Plan    json.RawMessage `json:"plan"`
		}
		if err := httpapi.ReadJSON(r, &body); err != nil {
			return err
		}
		plan, err := DecodePlan(body.Plan)
		if err != nil {
			return err
		}
		runID, created, err := s.Start(r.Context(), StartRequest{Project: body.Project, RunID: body.RunID, Plan: plan})
		if err != nil {
			return err
		}
		status := http.StatusOK
		if created {
			status = http.StatusCreated
		}
		httpapi.WriteJSON(w, status, map[string]string{"run_id": runID, "project": body.Project})
		return nil
	})
	srv.Handle(http.MethodGet, "/v1/runs/{run_id}", []string{auth.RoleReader}, func(w http.ResponseWriter, r *http.Request) error {
		project := r.URL.Query().Get("project")
		if project == "" {
			return kernel.Errorf(kernel.EInvalid, "query parameter \"project\" is required: /v1/runs/{run_id}?project=...")
		}
		v, err := s.View(r.Context(), project, chi.URLParam(r, "run_id"))
		if err != nil {
			return err
		}
		httpapi.WriteJSON(w, http.StatusOK, v)
		return nil
	})
}
