package httpapi_test

import (
	"net/http"
	"net/http/httptest"
	"runtime"
	"strconv"
	"strings"
	"testing"

	"github.com/rs/zerolog"

	"github.com/seed-7bc021c3/reckon/kernel/auth"
	"github.com/seed-7bc021c3/reckon/kernel/httpapi"
)

// hostileAPI is the API over a journal that writes nothing, with one agent
// token (agent-secret-1, source bot): enough for the boundary's checks.
func hostileAPI(t *testing.T, cfg httpapi.Config) *httpapi.Server {
	t.Helper()
	tokens, err := auth.Parse("bot:agent:agent-secret-1")
	if err != nil {
		t.Fatal(err)
	}
	cfg.Tokens, cfg.Log = tokens, zerolog.Nop()
	if cfg.Journal == nil {
		cfg.Journal = nopJournal{}
	}
	return httpapi.New(cfg)
}

func serveOnce(api http.Handler, method, path, token, body string) *httptest.ResponseRecorder {
	req := httptest.NewRequest(method, path, strings.NewReader(body))
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	rec := httptest.NewRecorder()
	api.ServeHTTP(rec, req)
	return rec
}

// TestOversizedBatchIsCountedNotKept: a batch over MaxBatch is a 413
// naming its size, refused without one allocation per element. The body
// was decoded straight into a slice of raw events before its length was
// checked, so within the 8 MiB body limit an agent token made the server
// allocate some 650 MB for "[1,1,…]" before the refusal. Not parallel: it
// counts the process's allocations.
func TestOversizedBatchIsCountedNotKept(t *testing.T) {
	api := hostileAPI(t, httpapi.Config{})
	const n = 200_000
	body := `{"events":[` + strings.Repeat("{},", n-1) + `{}]}`
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	rec := serveOnce(api, http.MethodPost, "/v1/events", "agent-secret-1", body)
	runtime.ReadMemStats(&after)
	if rec.Code != http.StatusRequestEntityTooLarge || !strings.Contains(rec.Body.String(), "batch has "+strconv.Itoa(n)+" events") {
		t.Fatalf("%d %s, want 413 naming the batch's %d events", rec.Code, rec.Body, n)
	}
	if mallocs := after.Mallocs - before.Mallocs; mallocs > n/10 {
		t.Errorf("refusing a batch of %d events took %d allocations: its elements were kept", n, mallocs)
	}
	for body, want := range map[string]int{
		`{"events":[` + strings.Repeat("{},", httpapi.MaxBatch) + `{}]}`: http.StatusRequestEntityTooLarge,
		`{"events":[]}`:   http.StatusOK,
		`{"events":null}`: http.StatusBadRequest,
		`{"events":3}`:    http.StatusBadRequest,
		`{"events":{}}`:   http.StatusBadRequest,
		`{"events":[3]}`:  http.StatusBadRequest,
	} {
		if rec := serveOnce(api, http.MethodPost, "/v1/events", "agent-secret-1", body); rec.Code != want {
			t.Errorf("%.40s: %d %s, want %d", body, rec.Code, rec.Body, want)
		}
	}
}
