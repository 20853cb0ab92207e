package httpapi_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/seed-7bc021c3/reckon/adapter/auth"
	"github.com/seed-7bc021c3/reckon/adapter/httpapi"
	"github.com/seed-7bc021c3/reckon/internal/reckontest"
	"github.com/seed-7bc021c3/reckon/kernel"
	"github.com/seed-7bc021c3/reckon/kernel/runner"
)

// hostileAPI is the API over a journal that writes nothing, with one agent
// token (agent-secret-1, source bot): enough for the boundary's checks.
func hostileAPI(t *testing.T, cfg httpapi.Config) *httpapi.Server {
	t.Helper()
	tokens, err := auth.Parse("bot:agent:agent-secret-1")
	if err != nil {
		t.Fatal(err)
	}
	cfg.Tokens = tokens // a zero cfg.Log logs nothing
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
// naming its size, refused without one allocation per element: decoded
// straight into a slice of raw events, a "[1,1,…]" within the 8 MiB body
// limit would cost hundreds of megabytes before the refusal. Not parallel:
// it counts the process's allocations.
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

// TestHealthKeepsItsCauseInTheLog: /healthz is public, and its 503 carried
// the health check's error verbatim, which for the database's ping names
// its host, port, user and database to any caller without a token. The
// cause now goes to the server's log, with the request id the 503 echoes.
func TestHealthKeepsItsCauseInTheLog(t *testing.T) {
	t.Parallel()
	const cause = "failed to connect to `user=reckon database=reckon`: 10.1.2.3:5432: dial error"
	var logs reckontest.Buffer
	api := hostileAPI(t, httpapi.Config{Log: zerolog.New(&logs),
		Health: func(context.Context) error { return errors.New(cause) }})
	rec := serveOnce(api, http.MethodGet, "/healthz", "", "")
	if rec.Code != http.StatusServiceUnavailable || rec.Header().Get("Retry-After") == "" {
		t.Fatalf("%d %s, want 503 with Retry-After", rec.Code, rec.Body)
	}
	if body := rec.Body.String(); strings.Contains(body, "10.1.2.3") || strings.Contains(body, "user=reckon") {
		t.Errorf("the public 503 carries the check's error: %s", body)
	}
	id := rec.Header().Get(httpapi.RequestIDHeader)
	var found bool
	for _, l := range logs.Lines() {
		if strings.Contains(l, "10.1.2.3:5432") && strings.Contains(l, id) {
			found = true
		}
	}
	if !found {
		t.Errorf("no log line carries the cause with request id %s: %v", id, logs.Lines())
	}
}

// TestIdleConnectionsAreClosed: after one request, a kept-alive connection
// was held open for as long as its client liked (net/http has no idle
// bound unless one is set), so anyone reaching the port could pile up
// connections, one GET /healthz each, until the server ran out of file
// descriptors. Listen closes a connection idle for IdleTimeout.
func TestIdleConnectionsAreClosed(t *testing.T) {
	t.Parallel()
	api := hostileAPI(t, httpapi.Config{IdleTimeout: 200 * time.Millisecond})
	ctx, cancel := context.WithCancel(context.Background())
	bound := make(chan string, 1)
	done := make(chan error, 1)
	go func() { done <- api.Listen(ctx, "127.0.0.1:0", bound) }()
	t.Cleanup(func() { cancel(); <-done })
	reckontest.IdleConnectionCloses(t, <-bound, http.StatusOK, "GET /healthz HTTP/1.1\r\nHost: reckon\r\n\r\n")
}

// listen serves api on a free port until the test ends and returns its
// address.
func listen(t *testing.T, api *httpapi.Server) string {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	bound := make(chan string, 1)
	done := make(chan error, 1)
	go func() { done <- api.Listen(ctx, "127.0.0.1:0", bound) }()
	t.Cleanup(func() { cancel(); <-done })
	return <-bound
}

// TestSlowHeadersAreCutOff: a client that opens a connection and sends its
// headers a byte at a time, never finishing them (slowloris), is cut off
// once ReadHeaderTimeout has passed, however steadily the bytes come.
func TestSlowHeadersAreCutOff(t *testing.T) {
	t.Parallel()
	addr := listen(t, hostileAPI(t, httpapi.Config{ReadHeaderTimeout: 200 * time.Millisecond}))
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	stop := make(chan struct{})
	defer close(stop)
	go func() {
		head := "GET /healthz HTTP/1.1\r\nHost: reckon\r\nX-Slow: "
		for i := 0; ; i++ {
			b := byte('a')
			if i < len(head) {
				b = head[i]
			}
			if _, err := conn.Write([]byte{b}); err != nil {
				return
			}
			select {
			case <-stop:
				return
			case <-time.After(20 * time.Millisecond):
			}
		}
	}()
	start := time.Now()
	_ = conn.SetReadDeadline(start.Add(5 * time.Second))
	// net/http may answer an error (400) before it closes; either way the
	// connection must end, and the request must not be served.
	got, err := io.ReadAll(conn)
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		t.Fatalf("the trickling connection is still open after %s (read %q), want it cut off after ReadHeaderTimeout", time.Since(start), got)
	}
	if err != nil && !errors.Is(err, syscall.ECONNRESET) {
		t.Fatalf("read: %v, want the connection closed", err)
	}
	if strings.HasPrefix(string(got), "HTTP/1.1 2") {
		t.Fatalf("answered %q, want the request refused unserved", got)
	}
}

// TestStalledReaderIsCutOff: a client that sends a request and then reads
// none of a large answer leaves its handler blocked in Write; WriteTimeout
// makes that write fail, so the handler returns and its connection goes.
func TestStalledReaderIsCutOff(t *testing.T) {
	t.Parallel()
	wrote := make(chan error, 1)
	chunk := make([]byte, 1<<20)
	api := hostileAPI(t, httpapi.Config{WriteTimeout: 300 * time.Millisecond,
		Console: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			// 256 MiB: far more than the sockets' buffers hold.
			for range 256 {
				if _, err := w.Write(chunk); err != nil {
					wrote <- err
					return
				}
			}
			wrote <- nil
		})})
	addr := listen(t, api)
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := io.WriteString(conn, "GET / HTTP/1.1\r\nHost: reckon\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-wrote:
		if err == nil {
			t.Fatal("the handler wrote 256 MiB to a client that read nothing")
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the handler is still blocked writing to a client that stopped reading, 5 s on")
	}
}

// echoRuns is a RunService that answers every View with the ids it was
// asked for.
type echoRuns struct{}

func (echoRuns) Start(context.Context, runner.StartParams) (string, bool, error) {
	return "", false, errors.New("echoRuns starts nothing")
}

func (echoRuns) View(_ context.Context, project, runID string, _ runner.EventPage) (runner.RunView, error) {
	return runner.RunView{RunID: runID, Project: project, Events: []kernel.Event{}}, nil
}

// TestRunPathIsUnescaped: GET /v1/runs/{run_id} takes any run id ingest
// takes, and an agent's may hold "/" ("agent/session-1"), which a client
// sends escaped (the console's encodeURIComponent: agent%2Fsession-1).
// The router matches such a path on its escaped form and handed the
// handler "agent%2Fsession-1", a run nobody wrote: the run was out of
// reach. Ids that need no escaping, "%" of "50%" included, are unchanged.
func TestRunPathIsUnescaped(t *testing.T) {
	t.Parallel()
	tokens, err := auth.Parse("ro:reader:reader-secret-1")
	if err != nil {
		t.Fatal(err)
	}
	api := httpapi.New(httpapi.Config{Tokens: tokens, Runs: echoRuns{}})
	for _, id := range []string{"agent/session-1", "session:42", "50%", "a b", "a%2Fb", "ü/ß"} {
		rec := serveOnce(api, http.MethodGet, "/v1/runs/"+url.PathEscape(id)+"?project=acme", "reader-secret-1", "")
		var v runner.RunView
		if err := json.Unmarshal(rec.Body.Bytes(), &v); rec.Code != http.StatusOK || err != nil || v.RunID != id {
			t.Errorf("run %q: %d %s, want 200 for that run id", id, rec.Code, rec.Body)
		}
	}
}

// TestForgedCursorTimeIs400: a listing's cursor is opaque but unsigned, so
// a reader can make one. One whose position lies before the earliest
// timestamp PostgreSQL holds must not reach the query and be answered 500
// (logged as a server fault); it is a 400 like any cursor the API did not
// issue.
func TestForgedCursorTimeIs400(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	_, ts := newAPI(t, e)
	uncertainOp(e, "acme", "r1", "agent-x")
	for _, c := range []struct{ path, prefix string }{{"/v1/agent/operations", "v1:"}, {"/v1/agent/operations/attention", "a1:"}} {
		for _, us := range []int64{math.MinInt64, -210866803200000001} {
			cur := kernel.EncodeCursor(c.prefix, time.UnixMicro(us), 5)
			if r := call(t, http.MethodGet, ts.URL+c.path+"?project=acme&cursor="+url.QueryEscape(cur), readerTok, ""); r.status != http.StatusBadRequest {
				t.Errorf("%s, cursor at %d µs: %d %s, want 400", c.path, us, r.status, r.raw)
			}
		}
		// The earliest instant PostgreSQL holds is still a position.
		cur := kernel.EncodeCursor(c.prefix, time.UnixMicro(-210866803200000000), 5)
		if r := call(t, http.MethodGet, ts.URL+c.path+"?project=acme&cursor="+url.QueryEscape(cur), readerTok, ""); r.status != http.StatusOK {
			t.Errorf("%s, cursor at PostgreSQL's earliest instant: %d %s, want 200", c.path, r.status, r.raw)
		}
	}
}

// TestIngestBoundsTheRunsItLocks: the journal's write takes an advisory
// lock on every run of the batch and every run their ids descend from, in
// a lock table the whole PostgreSQL cluster shares. 100 events in runs
// whose ids held 253 dots took 25,400 locks: the request failed with "out
// of shared memory" (500), and other sessions' locks failed alike while
// it ran. Such a batch is now a 413 naming the event that goes over, with
// nothing written; a full batch whose every event lies in a child run of
// its own (2,000 runs with their parents) is still written.
func TestIngestBoundsTheRunsItLocks(t *testing.T) {
	t.Parallel()
	srv := newServer(t)
	event := func(id, run string) string {
		return fmt.Sprintf(`{"source_id":"agent-x","event_id":%q,"project":"acme","run_id":%q,"type":"run.started","ts":"2026-11-30T10:00:00Z","actor":"agent","data":{}}`, id, run)
	}
	var deep []string
	for i := range 100 {
		deep = append(deep, event(fmt.Sprint("d-", i), fmt.Sprintf("d%03d", i)+strings.Repeat(".a", 253)))
	}
	code, out := post(t, srv, "agent-secret-1", `{"events":[`+strings.Join(deep, ",")+`]}`)
	if msg, _ := out["error"].(string); code != http.StatusRequestEntityTooLarge || !strings.Contains(msg, "events[7]") {
		t.Fatalf("100 runs 254 deep: %d %v, want 413 naming events[7], the event past %d runs", code, out, httpapi.MaxBatchRuns)
	}
	var wide []string
	for i := range httpapi.MaxBatch {
		wide = append(wide, event(fmt.Sprint("w-", i), fmt.Sprintf("w%04d.op-1", i)))
	}
	if code, out := post(t, srv, "agent-secret-1", `{"events":[`+strings.Join(wide, ",")+`]}`); code != http.StatusOK {
		t.Fatalf("%d events each in a child run of its own: %d %.300v, want 200", httpapi.MaxBatch, code, out)
	}
	// Nothing of the refused batch was written: its first event is new.
	if code, out := post(t, srv, "agent-secret-1", `{"events":[`+deep[0]+`]}`); code != http.StatusOK ||
		out["results"].([]any)[0].(map[string]any)["status"] != "accepted" {
		t.Fatalf("the refused batch was half-written: %d %v", code, out)
	}
}

// gateJournal holds every Ingest until the test releases one, reporting
// each call as it arrives.
type gateJournal struct {
	entered chan struct{}
	release chan struct{}
}

func (g gateJournal) Ingest(ctx context.Context, events []kernel.Event) ([]kernel.IngestResult, error) {
	g.entered <- struct{}{}
	select {
	case <-g.release:
		return []kernel.IngestResult{}, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// TestIngestWritesShareARunLockBudget: MaxBatchRuns bounds one request, but the
// journal's group commit writes concurrent calls in one transaction, and
// concurrent writes add up in the lock table PostgreSQL shares: 60 callers
// of 4 events in runs with 490 dots in their ids, each within the bound,
// still failed with "out of shared memory" and failed other sessions'
// locks. A server's ingest writes now hold at most MaxRunsInFlight run
// locks at once: a third full request waits for one of two in flight.
func TestIngestWritesShareARunLockBudget(t *testing.T) {
	t.Parallel()
	g := gateJournal{entered: make(chan struct{}, 3), release: make(chan struct{})}
	api := hostileAPI(t, httpapi.Config{Journal: g})
	full := func(n int) string { // MaxBatchRuns runs: MaxBatch child runs and their parents
		var evs []string
		for i := range httpapi.MaxBatch {
			evs = append(evs, fmt.Sprintf(`{"source_id":"bot","event_id":"e-%d","project":"acme","run_id":"r%d-%d.op-1","type":"run.started","ts":"2026-11-30T10:00:00Z","actor":"agent","data":{}}`, i, n, i))
		}
		return `{"events":[` + strings.Join(evs, ",") + `]}`
	}
	codes := make(chan int, 3)
	for n := range 3 {
		body := full(n)
		go func() { codes <- serveOnce(api, http.MethodPost, "/v1/events", "agent-secret-1", body).Code }()
	}
	for range 2 {
		select {
		case <-g.entered:
		case <-time.After(10 * time.Second):
			t.Fatal("two full requests did not both reach the journal")
		}
	}
	select {
	case <-g.entered:
		t.Fatalf("a third request of %d runs reached the journal while two held %d run locks", httpapi.MaxBatchRuns, 2*httpapi.MaxBatchRuns)
	case <-time.After(300 * time.Millisecond):
	}
	g.release <- struct{}{}
	select {
	case <-g.entered:
	case <-time.After(10 * time.Second):
		t.Fatal("the third request did not proceed once one of the first two was written")
	}
	g.release <- struct{}{}
	g.release <- struct{}{}
	for range 3 {
		if code := <-codes; code != http.StatusOK {
			t.Errorf("status %d, want 200", code)
		}
	}
}

// TestAnswersAreNotSniffed: the API's answers echo text callers chose (a
// 404 names the path to anyone, a listing carries agents' args to
// readers); only the console's pages said X-Content-Type-Options: nosniff,
// so a browser that sniffs could render an API answer as HTML. Every
// answer says it now, from a route, a 404 or the public endpoints.
func TestAnswersAreNotSniffed(t *testing.T) {
	t.Parallel()
	api := hostileAPI(t, httpapi.Config{})
	for _, c := range []struct{ method, path, token string }{
		{http.MethodGet, "/%3Cimg%20src=x%20onerror=alert(1)%3E", ""},
		{http.MethodGet, "/healthz", ""},
		{http.MethodGet, "/openapi.json", ""},
		{http.MethodGet, "/v1/whoami", "agent-secret-1"},
		{http.MethodGet, "/v1/whoami", "wrong-secret"},
		{http.MethodDelete, "/v1/events", "agent-secret-1"},
	} {
		rec := serveOnce(api, c.method, c.path, c.token, "")
		if got := rec.Header().Get("X-Content-Type-Options"); got != "nosniff" {
			t.Errorf("%s %s (%d): X-Content-Type-Options %q, want nosniff", c.method, c.path, rec.Code, got)
		}
	}
}

// stuckRuns is a RunService whose View waits for its request to end, as
// a read held up by a lock or a stalled database does.
type stuckRuns struct{ echoRuns }

func (stuckRuns) View(ctx context.Context, _, _ string, _ runner.EventPage) (runner.RunView, error) {
	<-ctx.Done()
	return runner.RunView{}, fmt.Errorf("view: %w", ctx.Err())
}

// TestStuckRequestIsAnsweredBeforeTheWriteDeadline: a handler held up past
// the server's bound is stopped and answered 503 saying so, before the
// connection's write deadline, which cancels nothing by itself: the
// client would wait on, to get at best a closed connection.
func TestStuckRequestIsAnsweredBeforeTheWriteDeadline(t *testing.T) {
	t.Parallel()
	tokens, err := auth.Parse("ro:reader:reader-secret-1")
	if err != nil {
		t.Fatal(err)
	}
	addr := listen(t, httpapi.New(httpapi.Config{Tokens: tokens, Runs: stuckRuns{}, WriteTimeout: 500 * time.Millisecond}))
	req, err := http.NewRequest(http.MethodGet, "http://"+addr+"/v1/runs/r1?project=acme", nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer reader-secret-1")
	start := time.Now()
	resp, err := (&http.Client{Timeout: 5 * time.Second}).Do(req)
	if err != nil {
		t.Fatalf("no answer to a stuck request: %v", err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusServiceUnavailable || !strings.Contains(string(body), "did not finish within this server's bound of 450ms") {
		t.Fatalf("answered %d %s, want 503 naming the bound", resp.StatusCode, body)
	}
	// Written past the connection's write deadline, the answer would
	// not have arrived at all: its arrival is the proof it was in time.
	t.Logf("answered after %v", time.Since(start))
}
