package httpapi

import (
	"net/http"

	"github.com/seed-7bc021c3/reckon/kernel/operations"
)

// postGuard serves POST /v1/agent/operations/guard (agent, operator): the
// retry guard's answer for a call (operations.Service.Guard). It writes
// nothing: a caller that is held or answered records its call itself
// (tool.started and tool.blocked naming the earlier operation).
func (s *Server) postGuard(w http.ResponseWriter, r *http.Request) error {
	if s.cfg.Operations == nil {
		return unserved("operations")
	}
	var p operations.GuardParams
	if err := readBody(r, &p, "guard body must be {project, run_id?, tool, args, scope?}"); err != nil {
		return err
	}
	if err := mayProject(r, p.Project); err != nil {
		return err
	}
	ans, err := s.cfg.Operations.Guard(r.Context(), p)
	if err != nil {
		return err
	}
	WriteJSON(w, http.StatusOK, ans)
	return nil
}
