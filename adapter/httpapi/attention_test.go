package httpapi_test

import (
	"encoding/json"
	"net/url"
	"testing"
	"time"

	"github.com/seed-7bc021c3/reckon/adapter/httpapi"
	"github.com/seed-7bc021c3/reckon/internal/reckontest"
	"github.com/seed-7bc021c3/reckon/kernel"
	"github.com/seed-7bc021c3/reckon/kernel/operations"
	"github.com/seed-7bc021c3/reckon/pipeline/triage"
)

// attention reads every page of the operator's queue through the API, as
// a reader, following next_cursor with the given page size.
func attention(t *testing.T, base, project string, limit int) []operations.AttentionItem {
	t.Helper()
	var out []operations.AttentionItem
	cursor := ""
	for page := 0; page < 100; page++ {
		q := url.Values{"project": {project}, "limit": {itoa(limit)}}
		if cursor != "" {
			q.Set("cursor", cursor)
		}
		r := call(t, "GET", base+httpapi.PathAttention+"?"+q.Encode(), readerTok, "")
		var p struct {
			Operations []operations.AttentionItem `json:"operations"`
			NextCursor *string                    `json:"next_cursor"`
		}
		if err := json.Unmarshal(r.raw, &p); r.status != 200 || err != nil || p.Operations == nil {
			t.Fatalf("attention: %d %s %v", r.status, r.raw, err)
		}
		out = append(out, p.Operations...)
		if p.NextCursor == nil {
			return out
		}
		if len(p.Operations) != limit {
			t.Fatalf("a page of %d items continues: %s", len(p.Operations), r.raw)
		}
		cursor = *p.NextCursor
	}
	t.Fatal("the queue never ended")
	return nil
}

func itoa(n int) string {
	b, _ := json.Marshal(n)
	return string(b)
}

// TestAttentionQueue triages real walls with the built-in supervisor and
// reads the operator's queue: what the supervisor left unknown is listed,
// with the verdict's other operations when the verdict asked for attention;
// an operator's reconcile takes an operation off at once (still in the
// outbox) and for good; agents may not read it; the window bounds it.
func TestAttentionQueue(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	_, ts := newAPI(t, e)
	// run-1: an agent's uncertain failure (nothing proves it: unknown).
	uncertainOp(e, "acme", "run-1", "agent-x")
	// run-2: the kernel's uncertain failure (unknown) and the kernel's
	// legacy pre-boundary failure (proved none), in one wall that asks for
	// attention; run-3: only a kernel pre-boundary failure (settled none,
	// nothing asks for attention).
	for _, run := range []string{"run-2", "run-3"} {
		b := reckontest.Run{Project: "acme", RunID: run, Source: kernel.SourceKernel}
		evs := []kernel.Event{b.RunStarted(ago(2 * time.Hour))}
		if run == "run-2" {
			evs = append(evs, b.Started("op-1", "run_command", ago(time.Hour)), b.Failed("op-1", kernel.EffectUncertain, ago(59*time.Minute)))
		}
		evs = append(evs, b.Started("op-2", "run_command", ago(50*time.Minute)),
			b.Event("op-2/failed", kernel.TypeToolFailed, ago(49*time.Minute), map[string]any{"operation_id": "op-2", "error_type": kernel.ErrorTypeValidation, "error": "bad args"}),
			b.RunFailed(ago(48*time.Minute)))
		e.Ingest(evs...)
	}
	sw := triage.New(e.Ops, triage.Config{Now: e.Clock.Now})
	if rep, err := sw.Sweep(e.Ctx, triage.SweepParams{Project: "acme"}); err != nil || rep.Journaled != 3 {
		t.Fatalf("sweep: %+v %v", rep, err)
	}
	e.Drain()

	items := attention(t, ts.URL, "acme", 1)
	got := map[string]operations.AttentionItem{}
	for _, it := range items {
		got[it.RunID+"/"+it.OperationID] = it
	}
	if len(items) != 3 || len(got) != 3 {
		t.Fatalf("queue: %+v", items)
	}
	for k, want := range map[string][2]string{
		"run-1/op-1": {kernel.EffectUnknown, operations.ReasonUnknown},
		"run-2/op-1": {kernel.EffectUnknown, operations.ReasonUnknown},
		"run-2/op-2": {kernel.EffectNone, operations.ReasonVerdictNeedsAttention},
	} {
		it, ok := got[k]
		if !ok || it.Effect != want[0] || it.Reason != want[1] {
			t.Errorf("%s: %+v, want effect %s reason %s", k, it, want[0], want[1])
			continue
		}
		if it.Project != "acme" || it.Tool != "run_command" || it.VerdictKey == nil || it.Supervisor != "builtin" || !it.NeedsAttention ||
			it.ReconciledKey.SourceID != kernel.SourceKernel || it.DecidedAt.IsZero() || it.StartedKey == nil || it.StartedAt == nil || it.Note == "" {
			t.Errorf("%s: incomplete item %+v", k, it)
		}
	}
	for i := 1; i < len(items); i++ {
		if items[i].DecidedAt.Before(items[i-1].DecidedAt) {
			t.Errorf("queue not oldest decision first: %+v", items)
		}
	}

	// Who may read it, and bad input.
	q := ts.URL + httpapi.PathAttention + "?project=acme"
	for _, c := range []struct {
		name, url, token string
		status           int
	}{
		{"agent", q, agentTok, 403},
		{"no token", q, "", 401},
		{"operator", q, operatorTok, 200},
		{"no project", ts.URL + httpapi.PathAttention, readerTok, 400},
		{"bad limit", q + "&limit=0", readerTok, 400},
		{"listing cursor", q + "&cursor=" + listingCursor(t, e), readerTok, 400},
	} {
		if r := call(t, "GET", c.url, c.token, ""); r.status != c.status {
			t.Errorf("%s: %d %s, want %d", c.name, r.status, r.raw, c.status)
		}
	}

	// An operator decides run-1/op-1: off the queue while the decision is
	// still in the outbox, and after it is journaled.
	body := `{"project":"acme","run_id":"run-1","operation_id":"op-1","effect":"occurred","note":"the file is there"}`
	if r := call(t, "POST", ts.URL+httpapi.PathReconcile, operatorTok, body); r.status != 201 {
		t.Fatalf("reconcile: %d %s", r.status, r.raw)
	}
	if items := attention(t, ts.URL, "acme", 100); len(items) != 2 || hasOp(items, "run-1", "op-1") {
		t.Fatalf("decided operation still queued (pending): %+v", items)
	}
	e.Drain()
	if items := attention(t, ts.URL, "acme", 100); len(items) != 2 || hasOp(items, "run-1", "op-1") {
		t.Fatalf("decided operation still queued: %+v", items)
	}
	// Past the window the supervisor's decisions leave the queue.
	e.Clock.Set(t0.Add(169 * time.Hour))
	if items := attention(t, ts.URL, "acme", 100); len(items) != 0 {
		t.Fatalf("queue outside the window: %+v", items)
	}
}

func hasOp(items []operations.AttentionItem, run, op string) bool {
	for _, it := range items {
		if it.RunID == run && it.OperationID == op {
			return true
		}
	}
	return false
}

// listingCursor returns a cursor the listing issued, which the queue must
// refuse.
func listingCursor(t *testing.T, e *reckontest.Bundle) string {
	t.Helper()
	b := reckontest.Run{Project: "cursors", RunID: "run-c", Source: "agent-x"}
	e.Ingest(b.RunStarted(ago(3*time.Hour)), b.Started("op-1", "x", ago(2*time.Hour)), b.Failed("op-1", "uncertain", ago(2*time.Hour)),
		b.Started("op-2", "x", ago(2*time.Hour)), b.Failed("op-2", "uncertain", ago(2*time.Hour)), b.RunFailed(ago(time.Hour)))
	p, err := e.Ops.List(e.Ctx, operations.ListParams{Project: "cursors", Limit: 1})
	if err != nil || p.NextCursor == "" {
		t.Fatalf("listing: %+v %v", p, err)
	}
	return p.NextCursor
}
