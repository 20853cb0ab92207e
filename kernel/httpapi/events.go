package httpapi

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"

	"github.com/seed-7bc021c3/reckon/kernel"
	"github.com/seed-7bc021c3/reckon/kernel/auth"
)

// MaxBatch bounds the events of one ingest request.
const MaxBatch = 1000

// ingest serves POST /v1/events into the Journal. Every event of the batch
// is validated and authorized before anything is written, so nothing is
// half-written: a malformed event rejects the batch with a 400 naming the
// event and field, an event the token may not write with a 403 naming the
// event, the field and the rule (Authorize). Owners, when set, tells the
// runs reckon records itself (kernel runs, the MCP gateway's runs), into
// which no caller may write; production always sets it (nil only in tests
// of other rules).
func (s *Server) ingest(w http.ResponseWriter, r *http.Request) error {
	if s.cfg.Journal == nil {
		return unserved("ingest")
	}
	var req struct {
		Events []json.RawMessage `json:"events"`
	}
	if err := ReadJSON(r, &req); err != nil {
		return err
	}
	if req.Events == nil {
		return kernel.Errorf(kernel.EInvalid, "field \"events\" is required: {\"events\": [...]}")
	}
	if len(req.Events) > MaxBatch {
		return kernel.Errorf(kernel.ETooLarge, "batch has %d events; at most %d per request", len(req.Events), MaxBatch)
	}
	events := make([]kernel.Event, len(req.Events))
	for i, raw := range req.Events {
		ev, err := kernel.DecodeEvent(raw)
		if err != nil {
			return kernel.Errorf(kernel.EInvalid, "events[%d]: %s", i, kernel.ErrorMessage(err))
		}
		events[i] = ev
	}
	p, _ := PrincipalFrom(r.Context())
	for i, ev := range events {
		if err := Authorize(p, ev); err != nil {
			return kernel.Errorf(kernel.EForbidden, "events[%d]: %s", i, kernel.ErrorMessage(err))
		}
	}
	if err := recordedRunsRefused(r, s.cfg.Owners, events); err != nil {
		return err
	}
	ingest := s.cfg.Journal.Ingest
	if g, ok := s.cfg.Journal.(kernel.GuardedJournal); ok && s.cfg.Owners != nil {
		// The check above names the event, and it keeps a caller who
		// keeps posting into reckon's runs out of group commit: refused in
		// the write, each such call would fail the combined batch it rode
		// in and send every other caller's events back one by one. This
		// one, in the write's own transaction, catches a run started or
		// claimed since.
		ingest = g.IngestOutsideRecordedRuns
	}
	results, err := ingest(r.Context(), events)
	if err != nil {
		return fmt.Errorf("ingest: %w", err)
	}
	if results == nil {
		results = []kernel.IngestResult{}
	}
	WriteJSON(w, http.StatusOK, map[string]any{"results": results})
	return nil
}

// Authorize applies the ingest endpoint's provenance rules to one event
// written by p: its source_id must be one p may write (its own name or a
// source granted in its token entry, never kernel, supervisor or
// operator…), its type agent-authored (run.* or tool.*), its actor
// "agent". operation.reconciled comes only from POST
// /v1/agent/operations/reconcile and the triage sweep, supervisor.verdict
// only from the sweep; both are written in-process under the kernel's
// source. The error is an EForbidden naming the field and the rule.
func Authorize(p auth.Principal, ev kernel.Event) error {
	switch {
	case auth.Reserved(ev.SourceID):
		return kernel.Errorf(kernel.EForbidden, "field \"source_id\": %q may not be written through this endpoint: %s", ev.SourceID, auth.ReservedRule)
	case !p.MayWrite(ev.SourceID):
		granted := "none"
		if len(p.Sources) > 0 {
			granted = strings.Join(p.Sources, ", ")
		}
		return kernel.Errorf(kernel.EForbidden,
			"field \"source_id\": token %q may write only its own name and the sources its RECKON_TOKENS entry grants (granted: %s), got %q",
			p.Name, granted, ev.SourceID)
	case !strings.HasPrefix(ev.Type, "run.") && !strings.HasPrefix(ev.Type, "tool."):
		return kernel.Errorf(kernel.EForbidden,
			"field \"type\": this endpoint accepts only agent-authored run.* and tool.* events, got %q (operation.reconciled is written by POST /v1/agent/operations/reconcile and the triage sweep, supervisor.verdict by the sweep)",
			ev.Type)
	case ev.Actor != "agent":
		return kernel.Errorf(kernel.EForbidden,
			"field \"actor\": must be \"agent\" on this endpoint (kernel, supervisor and operator:<name> are recorded by reckon itself), got %q", ev.Actor)
	}
	return nil
}

// recordedRunsRefused refuses the batch when an event lies in a run reckon
// records itself: a kernel run's events come from the kernel's workflow, a
// gateway run's from the MCP gateway, and a foreign event there (a forged
// failure, a settling tool.completed) would rewrite its record.
func recordedRunsRefused(r *http.Request, owners kernel.RunOwners, events []kernel.Event) error {
	if owners == nil || len(events) == 0 {
		return nil
	}
	var runs []kernel.RunKey
	seen := map[kernel.RunKey]bool{}
	for _, ev := range events {
		k := kernel.RunKey{Project: ev.Project, RunID: ev.RunID}
		if !seen[k] {
			seen[k] = true
			runs = append(runs, k)
		}
	}
	recorded, err := owners.RecordedRuns(r.Context(), runs)
	if err != nil {
		return fmt.Errorf("ingest: %w", err)
	}
	for i, ev := range events {
		switch recorded[kernel.RunKey{Project: ev.Project, RunID: ev.RunID}] {
		case "":
		case kernel.RecorderGateway:
			return kernel.Errorf(kernel.EForbidden,
				"events[%d]: field \"run_id\": run %q of project %q is a run of the MCP gateway (reckon mcp-gateway), or a child run of one; only the gateway writes its events",
				i, ev.RunID, ev.Project)
		default:
			return kernel.Errorf(kernel.EForbidden,
				"events[%d]: field \"run_id\": run %q of project %q is a kernel run (started through POST /v1/runs, or a child run of one); only the kernel writes its events",
				i, ev.RunID, ev.Project)
		}
	}
	return nil
}
