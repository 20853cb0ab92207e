package httpapi_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/seed-7bc021c3/reckon/adapter/httpapi"
)

// TestIngestRefusesDotSegmentRunIDs: a run's events are read at GET
// /v1/runs/{run_id}, but browsers (the operator console's fetch) and most
// HTTP clients resolve a path segment "." or ".." (or "%2e", "%2E%2E") away
// before sending, so a run named so is not addressable there. An agent
// that named its run ".." had every detail panel of its operations in the
// console fail ("no route GET /v1/"), its history and the verdict cards
// with it: the operator decided blind. Such a run id is a 400 at ingest;
// ids merely holding dots are not.
func TestIngestRefusesDotSegmentRunIDs(t *testing.T) {
	t.Parallel()
	api := hostileAPI(t, httpapi.Config{})
	for _, id := range []string{".", ".."} {
		body := `{"events":[` + event("run_id", mustQuote(id)) + `]}`
		body = strings.Replace(body, `"source_id":"agent-x"`, `"source_id":"bot"`, 1)
		rec := serveOnce(api, http.MethodPost, "/v1/events", "agent-secret-1", body)
		if rec.Code != http.StatusBadRequest || !strings.Contains(rec.Body.String(), `events[0]`) || !strings.Contains(rec.Body.String(), `run_id`) {
			t.Errorf("run id %q: %d %s, want 400 naming events[0] and run_id", id, rec.Code, rec.Body)
		}
	}
	for _, id := range []string{"...", ".a", "a..", "run.42", "a/.."} {
		body := `{"events":[` + event("run_id", mustQuote(id)) + `]}`
		body = strings.Replace(body, `"source_id":"agent-x"`, `"source_id":"bot"`, 1)
		if rec := serveOnce(api, http.MethodPost, "/v1/events", "agent-secret-1", body); rec.Code != http.StatusOK {
			t.Errorf("run id %q: %d %s, want 200", id, rec.Code, rec.Body)
		}
	}
}

func mustQuote(s string) string {
	b, err := json.Marshal(s)
	if err != nil {
		panic(err)
	}
	return string(b)
}
