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
	"github.com/seed-7bc021c3/reckon/kernel/operations"
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

// Decisions reads operations' newest reconciliations
// (*operations.Service implements it).
type Decisions interface {
	NewestDecisions(ctx context.Context, project string, refs []operations.OperationRef) (map[operations.OperationRef]operations.Decision, error)
}

var _ Decisions = (*operations.Service)(nil)

// Resolution says what became of one verdict's operations since: those an
// operator has decided after it (their newest reconciliation is the
// operator's, recorded after the verdict), and whether that is all of them.
type Resolution struct {
	Verdict           kernel.EventKey    `json:"verdict"`
	DecidedByOperator []OperatorDecision `json:"decided_by_operator"`
	// Resolved is true when an operator has since decided every operation
	// of the verdict: nothing of it waits for a person any more.
	Resolved bool `json:"resolved"`
}

// OperatorDecision is an operator's reconciliation of one operation.
type OperatorDecision struct {
	OperationID string `json:"operation_id"`
	operations.Decision
}

// MountVerdicts serves GET /v1/supervisor/verdicts?project=P[&run_id=R]
// [&since=RFC3339][&limit=N] (reader): {"verdicts": [<supervisor.verdict
// events>], "resolutions": [<Resolution>]}, newest first, one resolution
// per verdict in the same order.
func MountVerdicts(srv *httpapi.Server, j VerdictReader, d Decisions) {
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
		res, err := Resolutions(r.Context(), d, project, evs)
		if err != nil {
			return err
		}
		httpapi.WriteJSON(w, http.StatusOK, map[string]any{"verdicts": evs, "resolutions": res})
		return nil
	})
}

// Resolutions says, for each verdict, which of its operations an operator
// has decided since (one query for the whole page).
func Resolutions(ctx context.Context, d Decisions, project string, verdicts []kernel.Event) ([]Resolution, error) {
	out := make([]Resolution, len(verdicts))
	decoded := make([]kernel.Verdict, len(verdicts))
	var refs []operations.OperationRef
	seen := map[operations.OperationRef]bool{}
	for i, ev := range verdicts {
		if err := ev.DecodeData(&decoded[i]); err != nil {
			return nil, err
		}
		for _, id := range decoded[i].OperationIDs {
			ref := operations.OperationRef{RunID: ev.RunID, OperationID: id}
			if !seen[ref] {
				seen[ref] = true
				refs = append(refs, ref)
			}
		}
	}
	newest, err := d.NewestDecisions(ctx, project, refs)
	if err != nil {
		return nil, err
	}
	for i, ev := range verdicts {
		r := Resolution{Verdict: ev.Key(), DecidedByOperator: []OperatorDecision{}}
		for _, id := range decoded[i].OperationIDs {
			dec, ok := newest[operations.OperationRef{RunID: ev.RunID, OperationID: id}]
			if ok && dec.ByOperator() && !dec.TS.Before(ev.TS) {
				r.DecidedByOperator = append(r.DecidedByOperator, OperatorDecision{OperationID: id, Decision: dec})
			}
		}
		r.Resolved = len(decoded[i].OperationIDs) > 0 && len(r.DecidedByOperator) == len(decoded[i].OperationIDs)
		out[i] = r
	}
	return out, nil
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
