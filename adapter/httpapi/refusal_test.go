package httpapi_test

import (
	"bufio"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/seed-7bc021c3/reckon/adapter/httpapi"
)

// TestQueryParameters: a route takes the query parameters openapi.json
// documents for it, each at most once; anything else is a 400 naming the
// parameter, before the route does any work.
func TestQueryParameters(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	_, ts := newAPI(t, e)
	for _, c := range []struct{ path, want string }{
		{httpapi.PathOperations + "?project=acme&projcet=x", `unknown query parameter "projcet"`},
		{httpapi.PathOperations + "?project=acme&b=1&a=2", `unknown query parameter "a", "b"`},
		{httpapi.PathOperations + "?project=acme&project=zeta", `query parameter "project" is given 2 times`},
		{httpapi.PathWhoami + "?verbose=1", `unknown query parameter "verbose"`},
		{httpapi.PathProjects + "?q=a&q=b", `query parameter "q" is given 2 times`},
	} {
		r := call(t, "GET", ts.URL+c.path, readerTok, "")
		if r.status != 400 || !strings.Contains(fmt.Sprint(r.body["error"]), c.want) {
			t.Errorf("GET %s: %d %s, want 400 with %q", c.path, r.status, r.raw, c.want)
		}
	}
	if r := call(t, "GET", ts.URL+httpapi.PathOperations+"?project=acme&run_id=&limit=5", readerTok, ""); r.status != 200 {
		t.Errorf("documented parameters: %d %s", r.status, r.raw)
	}
}

// TestEarlyRefusalDoesNotWaitForTheBody: a 401 or 403 answered before the
// body is read says "Connection: close" and arrives at once, though the
// client announced a body and stalled it (net/http would otherwise read
// up to 256 KiB of it first, waiting for the body deadline).
func TestEarlyRefusalDoesNotWaitForTheBody(t *testing.T) {
	t.Parallel()
	api := httpapi.New(httpapi.Config{Tokens: testTokens(t), BodyTimeout: time.Minute})
	ts := httptest.NewServer(api)
	t.Cleanup(ts.Close)
	for _, c := range []struct {
		name, path, auth string
		length, status   int
	}{
		{"no token, 1,000 bytes", httpapi.PathEvents, "", 1000, http.StatusUnauthorized},
		{"no token, 100,000 bytes", httpapi.PathEvents, "", 100000, http.StatusUnauthorized},
		{"reader on an operator route", httpapi.PathRuns, "Bearer " + readerTok, 1000, http.StatusForbidden},
		{"unknown query parameter", httpapi.PathEvents + "?x=1", "Bearer " + agentTok, 1000, http.StatusBadRequest},
	} {
		conn, err := net.Dial("tcp", ts.Listener.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		req := fmt.Sprintf("POST %s HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: %d\r\n", c.path, c.length)
		if c.auth != "" {
			req += "Authorization: " + c.auth + "\r\n"
		}
		if _, err := conn.Write([]byte(req + "\r\n{\"events\"")); err != nil {
			t.Fatal(err)
		}
		_ = conn.SetReadDeadline(time.Now().Add(10 * time.Second))
		start := time.Now()
		resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
		if err != nil {
			t.Fatalf("%s: no answer while the body stalls: %v", c.name, err)
		}
		if took := time.Since(start); resp.StatusCode != c.status || !resp.Close || took > 5*time.Second {
			t.Errorf("%s: %d close=%v after %v, want %d with Connection: close at once", c.name, resp.StatusCode, resp.Close, took, c.status)
		}
		_ = conn.Close()
	}
}
