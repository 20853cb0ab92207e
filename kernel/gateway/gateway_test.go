package gateway

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/seed-7bc021c3/reckon/kernel"
	"github.com/seed-7bc021c3/reckon/kernel/mcptool"
)

// A call through the gateway: the client gets the upstream's result
// unchanged; the outbox holds run.started, tool.started, tool.completed in
// that order; the upstream got the operation's idempotency key in _meta
// (its own record answers lookup_operation for it) and as the HTTP header.
func TestCallRecordedAroundUpstream(t *testing.T) {
	t.Parallel()
	up := newHTTPIssues(t)
	f := newFixture(t, newSchema(t), Options{Project: "acme", Servers: []mcptool.ServerConfig{up.config("issues")}})
	cs := f.client()

	tools, err := cs.ListTools(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, tl := range tools.Tools {
		names = append(names, tl.Name)
		if tl.Name == "create_issue" && (tl.Annotations == nil || tl.Annotations.DestructiveHint == nil || *tl.Annotations.DestructiveHint) {
			t.Errorf("create_issue annotations not passed through: %+v", tl.Annotations)
		}
	}
	if strings.Join(names, ",") != "create_issue,get_issue,lookup_operation,slow_create_issue" {
		t.Fatalf("served tools %v", names)
	}

	before := time.Now()
	res := callTool(t, cs, "create_issue", map[string]any{"title": "Disk full on db-3"}, nil)
	out := structured(t, res)
	iss, _ := out["issue"].(map[string]any)
	if res.IsError || iss["title"] != "Disk full on db-3" || out["replayed"] != false {
		t.Fatalf("result: %+v", res)
	}

	rows := events(t, f.pool, "acme")
	if got := strings.Join(summary(rows), ", "); got != "run.started, tool.started op-1, tool.completed op-1" {
		t.Fatalf("outbox: %s", got)
	}
	runID := rows[0].RunID
	for _, r := range rows {
		if r.SourceID != DefaultSource || r.Actor != "agent" || r.RunID != runID || !strings.HasPrefix(r.EventID, "acme/"+runID+"/") {
			t.Fatalf("event %+v: want source mcp-gateway, actor agent, id acme/<run>/…", r.Event)
		}
	}
	var started startedData
	if err := rows[1].DecodeData(&started); err != nil {
		t.Fatal(err)
	}
	var args map[string]any
	_ = json.Unmarshal(started.Args, &args)
	if started.Tool != "mcp__create_issue" || started.Server != "issues" || started.UpstreamTool != "create_issue" || len(args) != 1 || args["title"] != "Disk full on db-3" {
		t.Fatalf("tool.started data %+v args %s", started, started.Args)
	}

	key := mcptool.IdempotencyKey("acme", runID, "op-1")
	op, _, found, err := up.store.Lookup(key)
	if err != nil || !found {
		t.Fatalf("upstream has no record of key %s (%v)", key, err)
	}
	if !up.sawKey(key) {
		t.Errorf("no Idempotency-Key %s header reached the upstream", key)
	}
	// The upstream's own record of when it acted lies between tool.started
	// and the terminal event.
	if op.CreatedAt.Before(rows[1].TS) || rows[2].TS.Before(op.CreatedAt) || rows[1].TS.Before(before.Add(-time.Second)) {
		t.Errorf("order: tool.started %s, upstream acted %s, tool.completed %s", rows[1].TS, op.CreatedAt, rows[2].TS)
	}

	// The same call through a plain session with the upstream gives the
	// same shape of result: nothing was added or removed.
	direct, err := mcp.NewClient(&mcp.Implementation{Name: "direct"}, nil).Connect(context.Background(), &mcp.StreamableClientTransport{Endpoint: up.config("x").URL}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer direct.Close()
	dres := callTool(t, direct, "create_issue", map[string]any{"title": "Disk full on db-3"}, mcp.Meta{mcptool.IdempotencyKeyMeta: key})
	a, _ := json.Marshal(res)
	b, _ := json.Marshal(dres)
	if !strings.Contains(string(b), `"replayed":true`) || strings.ReplaceAll(string(b), ":true", ":false") != string(a) {
		t.Errorf("through the gateway %s\ndirect (replayed) %s", a, b)
	}

	// The client ends its session: the run completes.
	if err := cs.Close(); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "run.completed", func() bool {
		r := ofRun(events(t, f.pool, "acme"), runID)
		return len(r) == 4 && r[3].Type == kernel.TypeRunCompleted
	})
}
