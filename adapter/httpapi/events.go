package httpapi

import (
	"bytes"
	"encoding/json"
	"encoding/json/jsontext"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/rs/zerolog/hlog"

	"github.com/seed-7bc021c3/reckon/adapter/auth"
	"github.com/seed-7bc021c3/reckon/kernel"
)

// MaxBatch bounds the events of one ingest request.
const MaxBatch = 1000

// MaxBatchRuns bounds the runs one ingest request writes into, counting
// with each run every run its id descends from (kernel.RunAncestry: one
// more for each "." in the id). The journal's write takes a PostgreSQL
// advisory lock on each of them (reckon_refuse_kernel_runs), and those
// locks share one table with every session of the cluster: a batch of
// deeply nested run ids could exhaust it ("out of shared memory") for
// every other session too. Twice MaxBatch lets every event of a full
// batch lie in a child run of its own.
const MaxBatchRuns = 2 * MaxBatch

// MaxRunsInFlight bounds the run locks (MaxBatchRuns) that the ingest
// requests of one server hold at once; a request that would pass it waits
// for earlier ones to finish. MaxBatchRuns alone bounds one request, but
// the journal's group commit writes concurrent small calls in one
// transaction, and 60 callers of 4 events each in runs with 490 dots in
// their ids still exhausted the lock table (500s, and failures of other
// sessions' locks). Two full requests fit, well inside PostgreSQL's
// default table (64 locks x 100 connections).
const MaxRunsInFlight = 2 * MaxBatchRuns

// ingest serves POST /v1/events into the Journal. Every event of the batch
// is validated and authorized before anything is written, so nothing is
// half-written: a malformed event rejects the batch with a 400 naming the
// event and field, an event the token may not write with a 403 naming the
// event, the field and the rule (Authorize). Owners, when set, tells who
// writes each run (writersRefused): no caller writes into the runs reckon
// records itself (kernel runs, the MCP gateway's runs), and an agent's run
// takes only its owning source's events; production always sets it (nil
// only in tests of other rules).
func (s *Server) ingest(w http.ResponseWriter, r *http.Request) error {
	if s.cfg.Journal == nil {
		return unserved("ingest")
	}
	var req struct {
		Events json.RawMessage `json:"events"`
	}
	if err := ReadJSON(r, &req); err != nil {
		return err
	}
	batch, err := splitBatch(req.Events)
	if err != nil {
		return err
	}
	events := make([]kernel.Event, len(batch))
	for i, raw := range batch {
		ev, err := kernel.DecodeEvent(raw)
		if err == nil {
			// A new write is held to the whole event model, including
			// what stored events from earlier versions may lack.
			err = ev.ValidateNew()
		}
		if err == nil {
			err = s.inWindow(ev)
		}
		if err != nil {
			return refusedEvent(i, kernel.EInvalid, "%s", kernel.ErrorMessage(err))
		}
		events[i] = ev
	}
	p, _ := PrincipalFrom(r.Context())
	for i, ev := range events {
		if err := Authorize(p, ev); err != nil {
			return refusedEvent(i, kernel.EForbidden, "%s", kernel.ErrorMessage(err))
		}
	}
	runs, err := runsBounded(events)
	if err != nil {
		return err
	}
	if err := writersRefused(r, s.cfg.Owners, events); err != nil {
		return err
	}
	ingest := s.cfg.Journal.Ingest
	if g, ok := s.cfg.Journal.(kernel.GuardedJournal); ok && s.cfg.Owners != nil {
		// The check above names the event, and it keeps a caller who keeps
		// posting into others' runs out of group commit: refused in the write,
		// each such call would fail the combined batch it rode in and have it
		// written again in halves (journal's grouper.retry). This one, in the
		// write's own transaction, catches a run started, claimed or first
		// written since.
		ingest = g.IngestAgentEvents
	}
	if err := s.runLocks.Acquire(r.Context(), int64(runs)); err != nil {
		return kernel.Errorf(kernel.EUnavailable, "ingest: waited for other requests' writes until the request ended (%v); retry", err)
	}
	results, err := ingest(r.Context(), events)
	s.runLocks.Release(int64(runs))
	if err != nil {
		if kernel.ErrorCode(err) == kernel.EForbidden {
			// The write's own check refused the batch (a run claimed
			// since the check above); the error's text, unlike its
			// answer, names the run and its owner.
			hlog.FromRequest(r).Warn().Err(err).Msg("ingest refused in the write")
		}
		return fmt.Errorf("ingest: %w", err)
	}
	if results == nil {
		results = []kernel.IngestResult{}
	}
	WriteJSON(w, http.StatusOK, map[string]any{"results": results})
	return nil
}

// inWindow refuses a tool.started dated before the operations window
// (Config.OperationsWindow): stored, it would be an operation nobody
// lists. Settling and lifecycle events may be old (a backfill, a late
// completion): they hide nothing.
func (s *Server) inWindow(ev kernel.Event) error {
	if s.cfg.OperationsWindow <= 0 || ev.Type != kernel.TypeToolStarted {
		return nil
	}
	now := time.Now
	if s.cfg.Now != nil {
		now = s.cfg.Now
	}
	start := now().Add(-s.cfg.OperationsWindow)
	if !ev.TS.Before(start) {
		return nil
	}
	return kernel.Errorf(kernel.EInvalid,
		"field \"ts\": %s is before the operations window (RECKON_OPERATIONS_WINDOW=%s, which starts at %s): an operation started then would never be listed, triaged or shown to an operator; report the time it started by a clock in sync with the server's, or widen the window",
		ev.TS.UTC().Format(time.RFC3339Nano), s.cfg.OperationsWindow, start.UTC().Format(time.RFC3339))
}

// splitBatch splits the "events" list of an ingest body into its events,
// in one walk that keeps at most MaxBatch of them and only counts the
// rest: decoded straight into a slice, the 8 MiB body limit allows some
// 4 million one-byte elements ("[1,1,…]"), and one request could make the
// server allocate hundreds of megabytes before it is refused.
func splitBatch(raw json.RawMessage) ([]json.RawMessage, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || bytes.Equal(raw, []byte("null")) {
		return nil, kernel.Errorf(kernel.EInvalid, "field \"events\" is required: {\"events\": [...]}")
	}
	if raw[0] != '[' {
		return nil, kernel.Errorf(kernel.EInvalid, "field \"events\" must be a list of events: {\"events\": [...]}")
	}
	bad := func(err error) error {
		return kernel.Errorf(kernel.EInvalid, "field \"events\" is not a JSON list: %v", err)
	}
	dec := jsontext.NewDecoder(bytes.NewReader(raw))
	if _, err := dec.ReadToken(); err != nil {
		return nil, bad(err)
	}
	var events []json.RawMessage
	n := 0
	for dec.PeekKind() != ']' {
		if n >= MaxBatch {
			if err := dec.SkipValue(); err != nil {
				return nil, bad(err)
			}
		} else {
			v, err := dec.ReadValue()
			if err != nil {
				return nil, bad(err)
			}
			// ReadValue's bytes are the decoder's until its next read.
			events = append(events, bytes.Clone(v))
		}
		n++
	}
	if n > MaxBatch {
		return nil, kernel.Errorf(kernel.ETooLarge, "batch has %d events; at most %d per request", n, MaxBatch)
	}
	return events, nil
}

// runsBounded counts the runs of a batch with the runs their ids descend
// from: the locks its write takes. It refuses a batch with more than
// MaxBatchRuns, naming the event that goes over.
func runsBounded(events []kernel.Event) (int, error) {
	seen := map[kernel.RunKey]bool{}
	for i, ev := range events {
		if seen[kernel.RunKey{Project: ev.Project, RunID: ev.RunID}] {
			continue // its ancestors were counted with it
		}
		for _, id := range kernel.RunAncestry(ev.RunID) {
			seen[kernel.RunKey{Project: ev.Project, RunID: id}] = true
		}
		if len(seen) > MaxBatchRuns {
			return 0, kernel.Errorf(kernel.ETooLarge,
				"events[%d]: the batch writes into more than %d runs, counting with each run every run its id descends from (one more for each %q in the id); send the events of fewer runs per request",
				i, MaxBatchRuns, kernel.ChildSeparator)
		}
	}
	return len(seen), nil
}

// Authorize applies the ingest endpoint's provenance rules to one event
// written by p: its project one p may see (a token limited to projects),
// its source_id one p may write (its own name or a source granted in its
// token entry, never kernel, supervisor or operator…), its type agent-authored (run.* or tool.*), its actor
// "agent". operation.reconciled comes only from POST
// /v1/agent/operations/reconcile and the triage sweep, supervisor.verdict
// only from the sweep; both are written in-process under the kernel's
// source. The error is an EForbidden naming the field and the rule.
func Authorize(p auth.Principal, ev kernel.Event) error {
	switch {
	case auth.Reserved(ev.SourceID):
		return kernel.Errorf(kernel.EForbidden, "field \"source_id\": %q may not be written through this endpoint: %s", ev.SourceID, auth.ReservedRule)
	case !p.MaySee(ev.Project):
		return kernel.Errorf(kernel.EForbidden,
			"field \"project\": token %q may write only the projects its RECKON_TOKENS entry lists (%s), got %q",
			p.Name, strings.Join(p.Projects, ", "), ev.Project)
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

// writersRefused refuses the batch when an event lies in a run its source
// may not write: a run reckon records itself (a kernel run's events come
// from the kernel's workflow, a gateway run's from the MCP gateway), or an
// agent's run owned by another source (the source of its first event; the
// batch's first event of a run nobody owns yet makes its source the
// owner), or a run nobody owns whose id descends from another source's
// run (the child runs of an agent's run are its owner's; the nearest
// owned ancestor decides). A foreign event there (a forged failure, a
// settling tool.completed, a delegation's child made up) would rewrite
// another writer's record.
func writersRefused(r *http.Request, owners kernel.RunOwners, events []kernel.Event) error {
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
	writers, err := owners.RunWriters(r.Context(), runs)
	if err != nil {
		return fmt.Errorf("ingest: %w", err)
	}
	claimed := map[kernel.RunKey]string{} // runs this batch's events claim, and their sources
	for i, ev := range events {
		k := kernel.RunKey{Project: ev.Project, RunID: ev.RunID}
		w := writers[k]
		switch {
		case w.Recorder == kernel.RecorderGateway:
			return refusedEvent(i, kernel.EForbidden,
				"field \"run_id\": run %q of project %q is a run of the MCP gateway (reckon mcp-gateway), or a child run of one; only the gateway writes its events",
				ev.RunID, ev.Project)
		case w.Recorder != "":
			return refusedEvent(i, kernel.EForbidden,
				"field \"run_id\": run %q of project %q is a kernel run (started through POST /v1/runs, or a child run of one); only the kernel writes its events",
				ev.RunID, ev.Project)
		case w.Source == "":
			// Nobody owns the run or a run it descends from, unless an
			// earlier event of this batch claimed one of those: the
			// nearest such claim decides, else this event claims it.
			w = kernel.RunWriter{Source: ev.SourceID, SourceRun: ev.RunID}
			anc := kernel.RunAncestry(ev.RunID)
			for j := len(anc) - 2; j >= 0; j-- {
				if c, ok := claimed[kernel.RunKey{Project: ev.Project, RunID: anc[j]}]; ok {
					w = kernel.RunWriter{Source: c, SourceRun: anc[j]}
					break
				}
			}
			writers[k] = w
			if w.SourceRun == ev.RunID {
				claimed[k] = w.Source
			}
			if w.Source != ev.SourceID {
				return childRefused(r, i, ev, w)
			}
		case w.Source != ev.SourceID && w.SourceRun != "" && w.SourceRun != ev.RunID:
			return childRefused(r, i, ev, w)
		case w.Source != ev.SourceID:
			logForeignWrite(r, i, ev, w)
			return refusedEvent(i, kernel.EForbidden,
				"field \"source_id\": run %q of project %q belongs to another source (the source of its first event), and only that source writes its events; got %q — report this run's operations under a run id of your own",
				ev.RunID, ev.Project, ev.SourceID)
		}
	}
	return nil
}

// refusedEvent is the refusal of the batch's event i, with code and the
// message format says, named "events[i]: ..." and answered with
// event_index (kernel.RefusedEvent).
func refusedEvent(i int, code, format string, args ...any) error {
	return kernel.RefusedEvent(i, kernel.Errorf(code, "events[%d]: %s", i, fmt.Sprintf(format, args...)))
}

// childRefused is writersRefused's refusal of event i, in a run nobody has
// claimed whose id descends from w.SourceRun, an agent's run of another
// source: the child runs of an agent's run (kernel.ChildRunID, a
// delegation's) are its owner's, so that no one else makes up what the
// listing counts of a delegation's child.
func childRefused(r *http.Request, i int, ev kernel.Event, w kernel.RunWriter) error {
	logForeignWrite(r, i, ev, w)
	return refusedEvent(i, kernel.EForbidden,
		"field \"source_id\": run %q of project %q is a child run of run %q, which belongs to another source (the source of its first event), and only that source writes the events of that run and of its child runs; got %q — report this run's operations under a run id of your own",
		ev.RunID, ev.Project, w.SourceRun, ev.SourceID)
}

// logForeignWrite logs the refusal of event i, written by ev.SourceID into
// a run w.Source owns, with the owner: the answer leaves the owner out,
// since the writer may be a hostile agent mapping whose runs are whose,
// but whoever operates the server needs it to sort out the clash.
func logForeignWrite(r *http.Request, i int, ev kernel.Event, w kernel.RunWriter) {
	hlog.FromRequest(r).Warn().Int("event_index", i).Str("project", ev.Project).Str("run_id", ev.RunID).
		Str("source_id", ev.SourceID).Str("owner", w.Source).Str("owner_run_id", w.SourceRun).
		Msg("ingest refused an event into a run another source owns")
}
