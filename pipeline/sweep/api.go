package sweep

import (
	"context"
	"net/http"
	"strconv"
	"time"

	"github.com/seed-7bc021c3/reckon/kernel"
	"github.com/seed-7bc021c3/reckon/kernel/auth"
	"github.com/seed-7bc021c3/reckon/kernel/httpapi"
	"github.com/seed-7bc021c3/reckon/kernel/journal"
)

// PathVerdicts is the verdicts endpoint.
const PathVerdicts = "/v1/supervisor/verdicts"

// Verdict page sizes.
const (
	DefaultVerdictLimit = 100
	MaxVerdictLimit     = 1000
)

// VerdictReader reads supervisor verdicts from the journal (journal.Store
// implements it).
type VerdictReader interface {
	EventsOfType(ctx context.Context, project, typ string, since time.Time, limit int) ([]journal.StoredEvent, error)
	RunEvents(ctx context.Context, project, runID string) ([]journal.StoredEvent, error)
}

// MountVerdicts serves GET /v1/supervisor/verdicts?project=P[&run_id=R]
// [&since=RFC3339][&limit=N] (reader): {"verdicts": [<supervisor.verdict
// events>]}, newest first.
func MountVerdicts(srv *httpapi.Server, j VerdictReader) {
	srv.Handle(http.MethodGet, PathVerdicts, []string{auth.RoleReader}, func(w http.ResponseWriter, r *http.Request) error {
		q := r.URL.Query()
		project := q.Get("project")
		if project == "" {
			return kernel.Errorf(kernel.EInvalid, "query parameter project is required")
		}
		limit := DefaultVerdictLimit
		if v := q.Get("limit"); v != "" {
			n, err := strconv.Atoi(v)
			if err != nil || n < 1 || n > MaxVerdictLimit {
				return kernel.Errorf(kernel.EInvalid, "limit must be an integer between 1 and %d, got %q", MaxVerdictLimit, v)
			}
			limit = n
		}
		var since time.Time
		if v := q.Get("since"); v != "" {
			t, err := time.Parse(time.RFC3339, v)
			if err != nil {
				return kernel.Errorf(kernel.EInvalid, "since must be an RFC 3339 time, got %q", v)
			}
			since = t
		}
		evs, err := Verdicts(r.Context(), j, project, q.Get("run_id"), since, limit)
		if err != nil {
			return err
		}
		httpapi.WriteJSON(w, http.StatusOK, map[string]any{"verdicts": evs})
		return nil
	})
}

// Verdicts returns a project's (or one run's) supervisor verdicts at or
// after since, newest first, at most limit.
func Verdicts(ctx context.Context, j VerdictReader, project, runID string, since time.Time, limit int) ([]kernel.Event, error) {
	out := []kernel.Event{}
	if runID == "" {
		evs, err := j.EventsOfType(ctx, project, kernel.TypeSupervisorVerdict, since, limit)
		if err != nil {
			return nil, err
		}
		for _, e := range evs {
			out = append(out, e.Event)
		}
		return out, nil
	}
	evs, err := j.RunEvents(ctx, project, runID)
	if err != nil {
		return nil, err
	}
	for i := len(evs) - 1; i >= 0 && len(out) < limit; i-- {
		if e := evs[i]; e.Type == kernel.TypeSupervisorVerdict && !e.TS.Before(since) {
			out = append(out, e.Event)
		}
	}
	return out, nil
}
