package httpapi_test

import (
	"encoding/json"
	"fmt"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/seed-7bc021c3/reckon/adapter/httpapi"
	"github.com/seed-7bc021c3/reckon/internal/reckontest"
)

// TestProjectsPaged: GET /v1/projects pages by name with a cursor and
// keeps the names that start with q; the last page says so, no page is
// cut without a cursor.
func TestProjectsPaged(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	_, ts := newAPI(t, e)
	for _, p := range []string{"acme", "acme-eu", "beta", "zeta"} {
		uncertainOp(e, p, "run-"+p, "agent-x")
	}
	get := func(query string) reply {
		t.Helper()
		r := call(t, "GET", ts.URL+httpapi.PathProjects+"?"+query, readerTok, "")
		if r.status != 200 {
			t.Fatalf("projects?%s: %d %s", query, r.status, r.raw)
		}
		return r
	}
	r := get("limit=2")
	if fmt.Sprint(r.body["projects"]) != "[acme acme-eu]" || r.body["next_cursor"] != "acme-eu" || r.body["truncated"] != true {
		t.Fatalf("first page: %s", r.raw)
	}
	r = get("limit=2&cursor=acme-eu")
	if fmt.Sprint(r.body["projects"]) != "[beta zeta]" || r.body["next_cursor"] != nil {
		t.Fatalf("second page: %s", r.raw)
	}
	r = get("limit=2&cursor=zeta")
	if fmt.Sprint(r.body["projects"]) != "[]" || r.body["next_cursor"] != nil || r.body["truncated"] != false {
		t.Fatalf("past the end: %s", r.raw)
	}
	r = get("q=acme")
	if fmt.Sprint(r.body["projects"]) != "[acme acme-eu]" || r.body["next_cursor"] != nil {
		t.Fatalf("q=acme: %s", r.raw)
	}
	r = get("q=acme&limit=1&cursor=acme")
	if fmt.Sprint(r.body["projects"]) != "[acme-eu]" {
		t.Fatalf("q=acme after acme: %s", r.raw)
	}
	if r := get("q=b"); fmt.Sprint(r.body["projects"]) != "[beta]" {
		t.Fatalf("q=b: %s", r.raw)
	}
}

// TestProjectScopedTokens: a token whose entry lists projects reads and
// writes only those (403 naming the project elsewhere), sees only them in
// GET /v1/projects however many projects other agents made, and whoami
// says which; tokens without a list behave as before.
func TestProjectScopedTokens(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	_, ts := newAPI(t, e)
	acmeKey := uncertainOp(e, "acme", "run-1", "agent-x")
	zetaKey := uncertainOp(e, "zeta", "run-2", "agent-x")
	// Another agent crowds the journal with new projects.
	var crowd []string
	for i := range 30 {
		run := reckontest.Run{Project: fmt.Sprintf("crowd-%02d", i), RunID: fmt.Sprintf("r-%02d", i), Source: "bot"}
		crowd = append(crowd, string(mustJSON(t, run.RunStarted(ago(time.Minute)))))
	}
	if r := call(t, "POST", ts.URL+httpapi.PathEvents, agentTok, `{"events":[`+strings.Join(crowd, ",")+`]}`); r.status != 200 {
		t.Fatalf("crowd: %d %s", r.status, r.raw)
	}

	r := call(t, "GET", ts.URL+httpapi.PathProjects, acmeOperatorTok, "")
	if r.status != 200 || fmt.Sprint(r.body["projects"]) != "[acme beta]" || r.body["next_cursor"] != nil {
		t.Fatalf("projects of a limited token: %d %s", r.status, r.raw)
	}
	if r := call(t, "GET", ts.URL+httpapi.PathWhoami, acmeOperatorTok, ""); fmt.Sprint(r.body["projects"]) != "[acme beta]" {
		t.Errorf("whoami of a limited token: %s", r.raw)
	}
	if r := call(t, "GET", ts.URL+httpapi.PathWhoami, operatorTok, ""); r.body["projects"] != nil {
		t.Errorf("whoami of an unlimited token: %s", r.raw)
	}

	list := func(token, project string) reply {
		return call(t, "GET", ts.URL+httpapi.PathOperations+"?project="+url.QueryEscape(project), token, "")
	}
	if r := list(acmeOperatorTok, "acme"); r.status != 200 || !strings.Contains(string(r.raw), acmeKey.EventID) {
		t.Errorf("limited operator lists acme: %d %s", r.status, r.raw)
	}
	if r := list(acmeOperatorTok, "zeta"); r.status != 403 || !strings.Contains(string(r.raw), `not \"zeta\"`) {
		t.Errorf("limited operator lists zeta: %d %s", r.status, r.raw)
	}
	if r := list(operatorTok, "zeta"); r.status != 200 || !strings.Contains(string(r.raw), zetaKey.EventID) {
		t.Errorf("unlimited operator lists zeta: %d %s", r.status, r.raw)
	}
	for _, path := range []string{httpapi.PathHistory + "?project=zeta&run_id=run-2&operation_id=op-1", httpapi.PathAttention + "?project=zeta", httpapi.PathVerdicts + "?project=zeta"} {
		if r := call(t, "GET", ts.URL+path, acmeOperatorTok, ""); r.status != 403 {
			t.Errorf("limited operator GET %s: %d %s", path, r.status, r.raw)
		}
	}
	rule := func(project string) reply {
		return call(t, "POST", ts.URL+httpapi.PathReconcile, acmeOperatorTok,
			`{"project":"`+project+`","run_id":"run-1","operation_id":"op-1","effect":"occurred","note":"checked"}`)
	}
	if r := rule("zeta"); r.status != 403 || !strings.Contains(string(r.raw), "zeta") {
		t.Errorf("limited operator rules on zeta: %d %s", r.status, r.raw)
	}
	if r := rule("acme"); r.status != 201 {
		t.Errorf("limited operator rules on acme: %d %s", r.status, r.raw)
	}

	write := func(project string) reply {
		run := reckontest.Run{Project: project, RunID: "bot-run", Source: "acme-bot"}
		return call(t, "POST", ts.URL+httpapi.PathEvents, acmeAgentTok, `{"events":[`+string(mustJSON(t, run.RunStarted(ago(time.Minute))))+`]}`)
	}
	if r := write("acme"); r.status != 200 {
		t.Errorf("limited agent writes acme: %d %s", r.status, r.raw)
	}
	if r := write("beta"); r.status != 403 || !strings.Contains(string(r.raw), `field \"project\"`) {
		t.Errorf("limited agent writes beta: %d %s", r.status, r.raw)
	}
}

// mustJSON is v as JSON.
func mustJSON(t *testing.T, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
