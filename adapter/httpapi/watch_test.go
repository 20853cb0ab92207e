package httpapi_test

import (
	"bufio"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"

	"github.com/seed-7bc021c3/reckon/adapter/httpapi"
)

// sse is one Server-Sent Event as read by a test.
type sse struct {
	id, event string
	data      map[string]any
}

// openStream opens the verdict stream; the caller closes it.
func openStream(t *testing.T, u, token, last string) (*http.Response, *bufio.Reader) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, u, nil)
	req.Header.Set("Authorization", "Bearer "+token)
	if last != "" {
		req.Header.Set(httpapi.LastEventIDHeader, last)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	return resp, bufio.NewReader(resp.Body)
}

// nextEvent reads the next event of a stream (comments skipped).
func nextEvent(t *testing.T, rd *bufio.Reader) (sse, error) {
	t.Helper()
	var ev sse
	for {
		line, err := rd.ReadString('\n')
		if err != nil {
			return ev, err
		}
		line = strings.TrimRight(line, "\n")
		switch {
		case line == "" && ev.event != "":
			return ev, nil
		case strings.HasPrefix(line, "id: "):
			ev.id = line[4:]
		case strings.HasPrefix(line, "event: "):
			ev.event = line[7:]
		case strings.HasPrefix(line, "data: "):
			if err := json.Unmarshal([]byte(line[6:]), &ev.data); err != nil {
				t.Fatalf("data %q: %v", line, err)
			}
		}
	}
}

// TestWatchRoute: the verdict stream opens with ready at the journal's
// head, delivers an operator's ruling once it is journaled, named by its
// type with its seq as id; a stream resumed with Last-Event-ID delivers
// what followed; a client holds at most MaxStreamsPerClient streams (503
// beyond); an agent may not watch (403); EndStreams ends every stream.
func TestWatchRoute(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	srv := httpapi.New(httpapi.Config{
		Tokens: testTokens(t), Log: zerolog.Nop(), Registry: prometheus.NewRegistry(),
		Journal: e.Journal, Operations: e.Ops, Verdicts: e.Ops, Watch: e.Ops,
		WatchPoll: 20 * time.Millisecond, MaxStreamsPerClient: 2,
	})
	base := newTestServer(t, srv)
	uncertainOp(e, "beta", "run-1", "agent-x")
	u := base + httpapi.PathWatch + "?project=beta"

	if r := call(t, http.MethodGet, u, agentTok, ""); r.status != http.StatusForbidden {
		t.Fatalf("agent: %d %s", r.status, r.raw)
	}
	if r := call(t, http.MethodGet, u, readerTok, "", httpapi.LastEventIDHeader, "yesterday"); r.status != http.StatusBadRequest {
		t.Fatalf("bad Last-Event-ID: %d %s", r.status, r.raw)
	}
	resp, rd := openStream(t, u, readerTok, "")
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "text/event-stream" {
		t.Fatalf("stream: %d %s", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	ready, err := nextEvent(t, rd)
	if err != nil || ready.event != "ready" || ready.data["project"] != "beta" || ready.id == "" || ready.data["cursor"] != ready.id {
		t.Fatalf("ready: %+v %v", ready, err)
	}
	if r := call(t, http.MethodPost, base+httpapi.PathReconcile, operatorTok,
		`{"project":"beta","run_id":"run-1","operation_id":"op-1","effect":"occurred","note":"proof.txt is there"}`); r.status != http.StatusCreated {
		t.Fatalf("reconcile: %d %s", r.status, r.raw)
	}
	e.Drain()
	ruling, err := nextEvent(t, rd)
	ev, _ := ruling.data["event"].(map[string]any)
	data, _ := ev["data"].(map[string]any)
	if err != nil || ruling.event != "operation.reconciled" || data["operation_id"] != "op-1" || ruling.data["cursor"] != ruling.id || ruling.data["attention"] != false {
		t.Fatalf("ruling: %+v %v", ruling, err)
	}

	_, again := openStream(t, u, readerTok, ready.id)
	if first, _ := nextEvent(t, again); first.event != "ready" || first.id != ready.id {
		t.Fatalf("resumed ready: %+v", first)
	}
	if resumed, err := nextEvent(t, again); err != nil || resumed.id != ruling.id || resumed.event != "operation.reconciled" {
		t.Fatalf("resumed: %+v %v", resumed, err)
	}
	if r := call(t, http.MethodGet, u, readerTok, ""); r.status != http.StatusServiceUnavailable || !strings.Contains(string(r.raw), "verdict streams") {
		t.Fatalf("third stream of one client: %d %s", r.status, r.raw)
	}

	srv.EndStreams()
	for _, s := range []*bufio.Reader{rd, again} {
		if _, err := nextEvent(t, s); err != io.EOF {
			t.Fatalf("stream after EndStreams: %v", err)
		}
	}
}
