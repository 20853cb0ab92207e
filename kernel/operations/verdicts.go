package operations

import (
	"context"
	"time"

	"github.com/seed-7bc021c3/reckon/kernel"
)

// Verdict page sizes.
const (
	DefaultVerdictLimit = 100
	MaxVerdictLimit     = 1000
)

// VerdictParams selects the supervisor's verdicts of a project (or one
// run), newest first.
type VerdictParams struct {
	Project string
	// RunID restricts the verdicts to one run when set.
	RunID string
	// Since keeps verdicts at or after it; zero keeps all.
	Since time.Time
	// Limit bounds the page; 0 means DefaultVerdictLimit, at most
	// MaxVerdictLimit.
	Limit int
}

// VerdictPage is the supervisor's verdicts with, for each, what operators
// have ruled since.
type VerdictPage struct {
	// Verdicts are supervisor.verdict events, newest first.
	Verdicts []kernel.Event `json:"verdicts"`
	// Resolutions has one entry per verdict, in the same order.
	Resolutions []Resolution `json:"resolutions"`
}

// Resolution says what became of one verdict's operations since: those an
// operator has ruled on after it (their newest reconciliation is an
// operator's ruling, recorded after the verdict), and whether that is all
// of them.
type Resolution struct {
	Verdict           kernel.EventKey `json:"verdict"`
	DecidedByOperator []Ruling        `json:"decided_by_operator"`
	// Resolved is true when an operator has since ruled on every operation
	// of the verdict: nothing of it waits for a person any more.
	Resolved bool `json:"resolved"`
}

// Ruling is an operator's ruling on one operation: an operation.reconciled
// with basis operator, by actor operator:<name>.
type Ruling struct {
	OperationID string `json:"operation_id"`
	LastReconciliation
}

// Verdicts returns a page of the supervisor's verdicts, newest first, each
// with its Resolution.
func (s *Service) Verdicts(ctx context.Context, p VerdictParams) (VerdictPage, error) {
	if p.Project == "" {
		return VerdictPage{}, kernel.Errorf(kernel.EInvalid, "query parameter project is required")
	}
	if p.Limit == 0 {
		p.Limit = DefaultVerdictLimit
	}
	if p.Limit < 0 || p.Limit > MaxVerdictLimit {
		return VerdictPage{}, kernel.Errorf(kernel.EInvalid, "limit must be an integer between 1 and %d, got %d", MaxVerdictLimit, p.Limit)
	}
	evs, err := s.verdictEvents(ctx, p)
	if err != nil {
		return VerdictPage{}, err
	}
	res, err := s.resolutions(ctx, p.Project, evs)
	if err != nil {
		return VerdictPage{}, err
	}
	return VerdictPage{Verdicts: evs, Resolutions: res}, nil
}

// verdictEvents reads the journal's supervisor.verdict events of p.
func (s *Service) verdictEvents(ctx context.Context, p VerdictParams) ([]kernel.Event, error) {
	out := []kernel.Event{}
	if p.RunID == "" {
		evs, err := s.journal.EventsOfType(ctx, p.Project, kernel.TypeSupervisorVerdict, p.Since, p.Limit)
		if err != nil {
			return nil, err
		}
		for _, e := range evs {
			out = append(out, e.Event)
		}
		return out, nil
	}
	evs, err := s.journal.RunEvents(ctx, p.Project, p.RunID)
	if err != nil {
		return nil, err
	}
	for i := len(evs) - 1; i >= 0 && len(out) < p.Limit; i-- {
		if e := evs[i]; e.Type == kernel.TypeSupervisorVerdict && !e.TS.Before(p.Since) {
			out = append(out, e.Event)
		}
	}
	return out, nil
}

// resolutions says, for each verdict, which of its operations an operator
// has ruled on since (one query for the whole page).
func (s *Service) resolutions(ctx context.Context, project string, verdicts []kernel.Event) ([]Resolution, error) {
	out := make([]Resolution, len(verdicts))
	decoded := make([]kernel.Verdict, len(verdicts))
	var refs []OperationRef
	seen := map[OperationRef]bool{}
	for i, ev := range verdicts {
		if err := ev.DecodeData(&decoded[i]); err != nil {
			return nil, err
		}
		for _, id := range decoded[i].OperationIDs {
			ref := OperationRef{RunID: ev.RunID, OperationID: id}
			if !seen[ref] {
				seen[ref] = true
				refs = append(refs, ref)
			}
		}
	}
	last, err := s.LastReconciliations(ctx, project, refs)
	if err != nil {
		return nil, err
	}
	for i, ev := range verdicts {
		r := Resolution{Verdict: ev.Key(), DecidedByOperator: []Ruling{}}
		for _, id := range decoded[i].OperationIDs {
			rec, ok := last[OperationRef{RunID: ev.RunID, OperationID: id}]
			if ok && rec.IsRuling() && !rec.TS.Before(ev.TS) {
				r.DecidedByOperator = append(r.DecidedByOperator, Ruling{OperationID: id, LastReconciliation: rec})
			}
		}
		r.Resolved = len(decoded[i].OperationIDs) > 0 && len(r.DecidedByOperator) == len(decoded[i].OperationIDs)
		out[i] = r
	}
	return out, nil
}
