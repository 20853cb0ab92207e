package httpapi_test

import (
	"encoding/json"
	"fmt"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/seed-7bc021c3/reckon/adapter/httpapi"
	"github.com/seed-7bc021c3/reckon/internal/reckontest"
)

// TestMain fails the package's tests when they leave goroutines running
// (they start the embedded Temporal server, whose own goroutines outlive
// it), and when any response a test observed has a status openapi.json
// does not list for its route.
func TestMain(m *testing.M) {
	httpapi.SetStatusObserver(observed.add)
	reckontest.Main(statusChecked{m}, reckontest.TemporalLeaks()...)
}

// observedStatuses is every (route, status) the tests saw.
type observedStatuses struct {
	mu   sync.Mutex
	seen map[string]map[int]bool
}

var observed = &observedStatuses{seen: map[string]map[int]bool{}}

func (o *observedStatuses) add(route string, status int) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.seen[route] == nil {
		o.seen[route] = map[int]bool{}
	}
	o.seen[route][status] = true
}

type statusChecked struct{ m *testing.M }

func (s statusChecked) Run() int {
	code := s.m.Run()
	if code != 0 {
		return code
	}
	undocumented, err := undocumentedStatuses(httpapi.OpenAPI, observed.seen)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	if len(undocumented) > 0 {
		fmt.Fprintf(os.Stderr, "FAIL: the tests observed statuses openapi.json does not list:\n  %s\n", strings.Join(undocumented, "\n  "))
		return 1
	}
	return 0
}

// undocumentedStatuses lists each observed "route status" that doc does
// not list among the route's responses.
func undocumentedStatuses(doc []byte, seen map[string]map[int]bool) ([]string, error) {
	var d struct {
		Paths map[string]map[string]struct {
			Responses map[string]json.RawMessage `json:"responses"`
		} `json:"paths"`
	}
	if err := json.Unmarshal(doc, &d); err != nil {
		return nil, fmt.Errorf("openapi document: %w", err)
	}
	var out []string
	for route, statuses := range seen {
		method, path, _ := strings.Cut(route, " ")
		op, ok := d.Paths[path][strings.ToLower(method)]
		for st := range statuses {
			if _, listed := op.Responses[strconv.Itoa(st)]; !ok || !listed {
				out = append(out, fmt.Sprintf("%s %d", route, st))
			}
		}
	}
	sort.Strings(out)
	return out, nil
}

// TestUndocumentedStatusesCheck: the check TestMain runs finds a status
// the document does not list, and passes a listed one.
func TestUndocumentedStatusesCheck(t *testing.T) {
	t.Parallel()
	got, err := undocumentedStatuses(httpapi.OpenAPI, map[string]map[int]bool{
		"POST /v1/events": {200: true, 413: true, 418: true},
		"GET /healthz":    {503: true},
	})
	if err != nil || len(got) != 1 || got[0] != "POST /v1/events 418" {
		t.Fatalf("undocumented = %v (%v), want [POST /v1/events 418]", got, err)
	}
}
