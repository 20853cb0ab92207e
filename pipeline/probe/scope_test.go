package probe

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/seed-7bc021c3/reckon/internal/mcpserver"
	"github.com/seed-7bc021c3/reckon/kernel"
	"github.com/seed-7bc021c3/reckon/pipeline"
	"github.com/seed-7bc021c3/reckon/tool/mcptool"
)

// countInit counts MCP initialize requests, i.e. new sessions.
func countInit(h http.Handler, n *atomic.Int32) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost {
			body, _ := io.ReadAll(r.Body)
			if bytes.Contains(body, []byte(`"method":"initialize"`)) {
				n.Add(1)
			}
			r.Body = io.NopCloser(bytes.NewReader(body))
		}
		h.ServeHTTP(w, r)
	})
}

// A wall's MCP lookups share one session per server; the unscoped Looker
// opens one per lookup; an unreachable server is dialled once per wall.
func TestMCPProbeOneSessionPerWall(t *testing.T) {
	t.Parallel()
	store, err := mcpserver.OpenStore(filepath.Join(t.TempDir(), "issues.json"))
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := store.CreateIssue(mcptool.IdempotencyKey("acme", "run-1", "op-1"), "Disk full", ""); err != nil {
		t.Fatal(err)
	}
	var inits atomic.Int32
	hs := httptest.NewServer(countInit(mcpserver.Handler(mcpserver.NewServer(store)), &inits))
	defer hs.Close()
	client := MCPClient{Servers: []mcptool.ServerConfig{{Name: "issues", URL: hs.URL + mcpserver.HTTPPath}}, Timeout: 10 * time.Second}
	run := clocked(Run{Project: "acme", RunID: "run-1"})
	set := Set{MCP{Looker: client}}
	op := func(id string) pipeline.WallOperation {
		return pipeline.WallOperation{OperationID: id, Tool: "mcp__create_issue", State: "failed_uncertain", StartedAt: t0, JournaledAt: journaled(t0),
			StartedKey: kernel.EventKey{SourceID: kernel.SourceKernel, EventID: id + "/started"}}
	}

	wall, done := set.ForWall(run)
	want := map[string]string{"op-1": pipeline.FindingOccurred, "op-2": pipeline.FindingNone, "op-3": pipeline.FindingNone}
	for _, id := range []string{"op-1", "op-2", "op-3"} {
		evs := wall.Probe(context.Background(), run, op(id))
		if len(evs) != 1 || evs[0].Finding != want[id] {
			t.Fatalf("%s: %+v, want %s", id, evs, want[id])
		}
	}
	done()
	if n := inits.Load(); n != 1 {
		t.Fatalf("a wall of 3 MCP operations opened %d sessions, want 1", n)
	}
	// After done, the scope's session is closed: the next wall opens its own.
	wall, done = set.ForWall(run)
	wall.Probe(context.Background(), run, op("op-1"))
	done()
	if n := inits.Load(); n != 2 {
		t.Fatalf("second wall: %d sessions in all, want 2", n)
	}
	// Unscoped, every lookup connects.
	for range 2 {
		set.Probe(context.Background(), run, op("op-1"))
	}
	if n := inits.Load(); n != 4 {
		t.Fatalf("unscoped lookups: %d sessions in all, want 4", n)
	}

	// A server that refuses connections: every operation of the wall gets
	// the failure as unavailable evidence, from one dial.
	var dials atomic.Int32
	refuse := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		dials.Add(1)
		http.Error(w, "down for maintenance", http.StatusServiceUnavailable)
	}))
	defer refuse.Close()
	down := Set{MCP{Looker: MCPClient{Servers: []mcptool.ServerConfig{{Name: "down", URL: refuse.URL}}, Timeout: 2 * time.Second}}}
	wall, done = down.ForWall(run)
	defer done()
	var afterFirst int32
	for i, id := range []string{"op-1", "op-2", "op-3"} {
		evs := wall.Probe(context.Background(), run, op(id))
		if len(evs) != 1 || evs[0].Finding != pipeline.FindingUnavailable || !strings.Contains(evs[0].Detail, "server down") {
			t.Fatalf("%s against a refusing server: %+v", id, evs)
		}
		if i == 0 {
			afterFirst = dials.Load() // one connection attempt (the SDK may send more than one request)
		}
	}
	if afterFirst == 0 || dials.Load() != afterFirst {
		t.Fatalf("refusing server: %d requests for the first operation, %d after three; later operations must not dial again", afterFirst, dials.Load())
	}
}
