package httpapi_test

import (
	"fmt"
	"strings"
	"testing"
)

// TestIngestRefusesNumbersTheJournalCannotStore: the journal keeps data
// as jsonb, whose numbers are PostgreSQL numerics (at most 131,072 digits
// before the point and 16,383 after). A number past that (1e200000,
// 1e-20000) is valid JSON, but the insert fails; it must be a 400 naming
// the field at the boundary, like every other malformed event, not a
// database error answered as a server failure (500) for the whole batch.
func TestIngestRefusesNumbersTheJournalCannotStore(t *testing.T) {
	t.Parallel()
	srv := newServer(t)
	for i, n := range []string{"1e200000", "1e-20000", "-1E+131072"} {
		body := fmt.Sprintf(`{"events":[{"source_id":"agent-x","event_id":"run-n%d/op-1/started","project":"acme","run_id":"run-n%d",
 "type":"tool.started","ts":"2026-11-30T10:00:00Z","actor":"agent",
 "data":{"operation_id":"op-1","tool":"mcp__pay","args":{"amount":%s}}}]}`, i, i, n)
		code, out := post(t, srv, "agent-secret-1", body)
		if code != 400 || !strings.Contains(fmt.Sprint(out["error"]), "data.args.amount") {
			t.Errorf("amount %s: %d %v, want 400 naming data.args.amount", n, code, out)
		}
	}
	// Large but storable numbers are still accepted.
	code, out := post(t, srv, "agent-secret-1", `{"events":[{"source_id":"agent-x","event_id":"run-big/op-1/started","project":"acme","run_id":"run-big",
 "type":"tool.started","ts":"2026-11-30T10:00:00Z","actor":"agent",
 "data":{"operation_id":"op-1","tool":"mcp__pay","args":{"amount":1e400, "tiny": 1e-400}}}]}`)
	if code != 200 {
		t.Errorf("storable numbers: %d %v", code, out)
	}
}
