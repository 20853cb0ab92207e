package httpapi

import (
	"context"
	"net/http"
	"strings"

	"github.com/seed-7bc021c3/reckon/kernel"
)

// TriageService runs a triage sweep now over a scope: every project, one
// project, or one run of a project (the pipeline's sweeper, under the same
// per-run locks as the scheduled sweep, so a run is never triaged twice at
// once).
type TriageService interface {
	TriageNow(ctx context.Context, req TriageRequest) (TriageAnswer, error)
}

// TriageRequest is the body of POST /v1/triage: the scope of the sweep.
// Both empty: every project with unsettled operations; run_id needs
// project.
type TriageRequest struct {
	Project string `json:"project,omitempty"`
	RunID   string `json:"run_id,omitempty"`
}

// TriageAnswer is what a sweep did: each wall (or run left alone) with
// its outcome, the operations it settled (effect occurred or none), and
// those it left for a person (effect unknown, or a verdict that asked for
// attention), as the operator's queue lists them.
type TriageAnswer struct {
	Walls     []TriageWall    `json:"walls"`
	Settled   []TriageOutcome `json:"settled"`
	Attention []TriageOutcome `json:"attention"`
}

// TriageWall is one wall of a sweep, or one run it left alone (outcome
// locked: another sweep holds the run; settled: nothing left to triage;
// budget, deferred: left for a later sweep; unavailable: a probe could not
// reach the operations' evidence, left unsettled for a later sweep, Error
// says why; failed: nothing written).
type TriageWall struct {
	Project        string           `json:"project"`
	RunID          string           `json:"run_id"`
	Part           int              `json:"part,omitempty"`
	Parts          int              `json:"parts,omitempty"`
	Operations     []string         `json:"operations"`
	Outcome        string           `json:"outcome"`
	Supervisor     string           `json:"supervisor,omitempty"`
	NeedsAttention bool             `json:"needs_attention"`
	Verdict        *kernel.EventKey `json:"verdict,omitempty"`
	Error          string           `json:"error,omitempty"`
}

// TriageOutcome is one operation a sweep reconciled.
type TriageOutcome struct {
	Project        string          `json:"project"`
	RunID          string          `json:"run_id"`
	OperationID    string          `json:"operation_id"`
	Effect         string          `json:"effect"`
	Basis          string          `json:"basis"`
	ProposedEffect string          `json:"proposed_effect,omitempty"`
	Reconciliation kernel.EventKey `json:"reconciliation"`
}

// postTriage serves POST /v1/triage (operator): the sweep over the body's
// scope now, answered with what it did.
func (s *Server) postTriage(w http.ResponseWriter, r *http.Request) error {
	if s.cfg.Triage == nil {
		return unserved("triage")
	}
	var req TriageRequest
	if err := readBody(r, &req, "triage body must be {project?, run_id?}"); err != nil {
		return err
	}
	if err := req.validate(); err != nil {
		return err
	}
	if err := mayTriage(r, req.Project); err != nil {
		return err
	}
	ans, err := s.cfg.Triage.TriageNow(r.Context(), req)
	if err != nil {
		return err
	}
	WriteJSON(w, http.StatusOK, ans)
	return nil
}

// mayTriage refuses, 403, a scope the caller's token may not see: another
// project, or every project for a token limited to some.
func mayTriage(r *http.Request, project string) error {
	if project != "" {
		return mayProject(r, project)
	}
	if p, _ := PrincipalFrom(r.Context()); p.Limited() {
		return kernel.Errorf(kernel.EForbidden, "project: token %q may see only the projects its RECKON_TOKENS entry lists (%s); name one of them to triage",
			p.Name, strings.Join(p.Projects, ", "))
	}
	return nil
}

func (req TriageRequest) validate() error {
	if req.RunID != "" && req.Project == "" {
		return kernel.Errorf(kernel.EInvalid, "project: required with run_id (run ids are unique per project only)")
	}
	if req.Project != "" {
		if err := kernel.ValidateKey("project", req.Project); err != nil {
			return err
		}
	}
	if req.RunID != "" {
		return kernel.ValidateKey("run_id", req.RunID)
	}
	return nil
}
