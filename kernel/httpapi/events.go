package httpapi

import (
	"encoding/json"
	"fmt"
	"net/http"

	"github.com/seed-7bc021c3/reckon/kernel"
	"github.com/seed-7bc021c3/reckon/kernel/auth"
)

// MaxBatch bounds the events of one ingest request.
const MaxBatch = 1000

// MountIngest serves POST /v1/events into j. Every event of the batch is
// validated before anything is written: one bad event rejects the batch with
// a 400 naming the event and field, so nothing is half-written.
func (s *Server) MountIngest(j kernel.Journal) {
	s.Handle(http.MethodPost, "/v1/events", []string{auth.RoleAgent, auth.RoleOperator}, func(w http.ResponseWriter, r *http.Request) error {
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
		results, err := j.Ingest(r.Context(), events)
		if err != nil {
			return fmt.Errorf("ingest: %w", err)
		}
		if results == nil {
			results = []kernel.IngestResult{}
		}
		WriteJSON(w, http.StatusOK, map[string]any{"results": results})
		return nil
	})
}
