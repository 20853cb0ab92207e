package httpapi_test

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/seed-7bc021c3/reckon/internal/reckontest"
	"github.com/seed-7bc021c3/reckon/kernel"
	"github.com/seed-7bc021c3/reckon/kernel/operations"
)

// TestListingBoundsArgs: 8 unresolved operations whose args are 6 MB
// each (a 50 MB listing unbounded) list in a page of kilobytes, each item
// saying args_truncated with the size; the history still has the args.
func TestListingBoundsArgs(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	_, ts := newAPI(t, e)
	big := strings.Repeat("x", 6<<20)
	total := 0
	for i := range 8 {
		b := reckontest.Run{Project: "acme", RunID: fmt.Sprintf("big-%d", i), Source: "agent-x"}
		s := b.Event("op-1/started", kernel.TypeToolStarted, ago(time.Hour), map[string]any{
			"operation_id": "op-1", "tool": "run_command", "args": map[string]any{"command": big}})
		total += len(s.Data)
		e.Ingest(b.RunStarted(ago(2*time.Hour)), s, b.Failed("op-1", kernel.EffectUncertain, ago(59*time.Minute)), b.RunFailed(ago(58*time.Minute)))
	}
	r := call(t, http.MethodGet, ts.URL+"/v1/agent/operations?project=acme", readerTok, "")
	if r.status != http.StatusOK {
		t.Fatalf("listing: %d %s", r.status, r.raw)
	}
	ops, _ := r.body["operations"].([]any)
	if len(ops) != 8 {
		t.Fatalf("%d operations listed, want 8", len(ops))
	}
	for _, o := range ops {
		m := o.(map[string]any)
		if m["args_truncated"] != true || m["args"] != nil || m["args_bytes"].(float64) < 6<<20 {
			t.Fatalf("item with 6 MB args: truncated=%v bytes=%v args present=%v", m["args_truncated"], m["args_bytes"], m["args"] != nil)
		}
	}
	if len(r.raw) > 64<<10 {
		t.Fatalf("listing of 8 operations is %d bytes", len(r.raw))
	}
	t.Logf("listing of 8 operations with 6 MiB args each: %d bytes (the args alone: %d bytes)", len(r.raw), total)
	// Small args are listed as before.
	e2 := newEnv(t)
	_, ts2 := newAPI(t, e2)
	uncertainOp(e2, "acme", "small", "agent-x")
	r = call(t, http.MethodGet, ts2.URL+"/v1/agent/operations?project=acme", readerTok, "")
	if !strings.Contains(string(r.raw), `"args":{"command":"echo ok > proof.txt"}`) || strings.Contains(string(r.raw), "args_truncated") {
		t.Fatalf("small args: %s", r.raw)
	}
	// The history keeps the full event.
	evs := history(t, ts.URL, "acme", "big-0", "op-1")
	if len(evs) == 0 || !strings.Contains(string(evs[0].Data), big) {
		t.Fatalf("history lost the args")
	}
}

// TestReconcileEvidenceCap: evidence over MaxEvidenceBytes is a 413
// naming the field and the cap.
func TestReconcileEvidenceCap(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	_, ts := newAPI(t, e)
	uncertainOp(e, "acme", "r1", "agent-x")
	body := fmt.Sprintf(`{"project":"acme","run_id":"r1","operation_id":"op-1","effect":"occurred","note":"seen","evidence":{"blob":%q}}`,
		strings.Repeat("y", operations.MaxEvidenceBytes))
	r := call(t, http.MethodPost, ts.URL+"/v1/agent/operations/reconcile", operatorTok, body)
	if msg, _ := r.body["error"].(string); r.status != http.StatusRequestEntityTooLarge || !strings.Contains(msg, `"evidence"`) {
		t.Fatalf("big evidence: %d %s", r.status, r.raw)
	}
}
