package gateway

import (
	"context"
	"strings"
	"sync"
	"testing"

	"github.com/seed-7bc021c3/reckon/kernel"
	"github.com/seed-7bc021c3/reckon/kernel/operations"
	"github.com/seed-7bc021c3/reckon/tool/mcptool"
)

// TestGatewayGuard: with a 1 s timeout, a slow_create_issue that times out
// is uncertain; the identical second call is held (an isError result
// naming the earlier operation, a triage of its run asked for) and never
// reaches the upstream; after an operator's ruling occurred a third
// identical call is answered "already happened" without reaching it
// either; a call with other arguments goes through. The upstream holds one
// issue for the three identical calls, and the journal a tool.blocked for
// each call that was stopped, naming the earlier operation. Read-only and
// idempotent tools, and RECKON_GUARD_EXEMPT's, are not guarded.
func TestGatewayGuard(t *testing.T) {
	t.Parallel()
	up := newHTTPIssues(t)
	pool := newSchema(t)
	slow := up.config("issues")
	slow.Timeout = "1s"
	ops := operations.New(pool, operations.Config{})
	var (
		mu      sync.Mutex
		triaged []string
	)
	f := newFixture(t, pool, Config{Project: "acme", Servers: []mcptool.ServerConfig{slow}, Guard: ops,
		GuardExempt: []string{"create_issue_confirmed"},
		Triage: func(_ context.Context, project, runID string) {
			mu.Lock()
			triaged = append(triaged, project+"/"+runID)
			mu.Unlock()
		}})
	cs := f.client()
	args := map[string]any{"title": "duplicate me", "delay_ms": 3000}

	res := callTool(t, cs, "slow_create_issue", args, nil)
	if !res.IsError || !strings.Contains(mcptool.ContentText(res.Content), "may have reached the server") {
		t.Fatalf("first call: %+v", mcptool.ContentText(res.Content))
	}
	run := events(t, pool, "acme")[0].RunID
	up.mu.Lock()
	sent := len(up.keys)
	up.mu.Unlock()

	res = callTool(t, cs, "slow_create_issue", map[string]any{"delay_ms": 3000, "title": "duplicate me"}, nil)
	text := mcptool.ContentText(res.Content)
	if !res.IsError || !strings.Contains(text, "operation op-1 of run "+run) || !strings.Contains(text, "reconciling") || !strings.Contains(text, "Do not retry") {
		t.Fatalf("held call: %s", text)
	}
	mu.Lock()
	if len(triaged) != 1 || triaged[0] != "acme/"+run {
		t.Errorf("triage asked for %v, want acme/%s", triaged, run)
	}
	mu.Unlock()

	if _, err := ops.Reconcile(context.Background(), operations.ReconcileParams{Project: "acme", RunID: run, OperationID: "op-1",
		Effect: kernel.EffectOccurred, Note: "issue I-1 is in the tracker", Basis: kernel.BasisOperator, Actor: "operator:ann"}); err != nil {
		t.Fatal(err)
	}
	res = callTool(t, cs, "slow_create_issue", args, nil)
	text = mcptool.ContentText(res.Content)
	if res.IsError || !strings.Contains(text, "already happened") || !strings.Contains(text, "operation op-1 of run "+run) ||
		!strings.Contains(text, "decided by operator:ann, basis operator): issue I-1 is in the tracker") {
		t.Fatalf("answered call: %v %s", res.IsError, text)
	}
	up.mu.Lock()
	if len(up.keys) != sent {
		t.Errorf("the held and answered calls reached the upstream: %v", up.keys[sent:])
	}
	up.mu.Unlock()

	res = callTool(t, cs, "slow_create_issue", map[string]any{"title": "another", "delay_ms": 0}, nil)
	if res.IsError {
		t.Fatalf("other arguments: %s", mcptool.ContentText(res.Content))
	}
	issues, err := up.store.Issues()
	if err != nil {
		t.Fatal(err)
	}
	count := map[string]int{}
	for _, is := range issues {
		count[is.Title]++
	}
	if count["duplicate me"] != 1 || count["another"] != 1 || len(issues) != 2 {
		t.Fatalf("upstream issues: %+v", issues)
	}

	blocked := map[string]string{}
	for _, r := range events(t, pool, "acme") {
		var d kernel.ToolBlocked
		if r.Type == kernel.TypeToolBlocked && r.DecodeData(&d) == nil {
			blocked[d.OperationID] = d.Reason
			if d.Guard == "" || d.EarlierRunID != run || d.EarlierOperationID != "op-1" {
				t.Errorf("tool.blocked of %s does not name the earlier operation: %+v", d.OperationID, d)
			}
		}
	}
	if !strings.HasPrefix(blocked["op-2"], "held by the retry guard: operation op-1 of run "+run) ||
		!strings.HasPrefix(blocked["op-3"], "answered by the retry guard: operation op-1 of run "+run) || len(blocked) != 2 {
		t.Fatalf("tool.blocked: %v", blocked)
	}

	for name, want := range map[string]bool{"slow_create_issue": true, "get_issue": false, "lookup_operation": false, "create_issue_confirmed": false} {
		if got := f.g.guarded(f.g.tools[name]); got != want {
			t.Errorf("%s guarded %v, want %v", name, got, want)
		}
	}
}
