package journal

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/seed-7bc021c3/reckon/internal/pgtest"
	"github.com/seed-7bc021c3/reckon/kernel"
)

// TestGroupRetrySplitsAroundARefusal: one refused call among 32 of a
// combined batch (an agent writing under another source's run) costs the
// batch a few writes in halves, not one write per caller, and every other
// caller's events are written and answered in their order.
func TestGroupRetrySplitsAroundARefusal(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := New(pgtest.New(t).Pool, nil)
	owned := kernel.Event{SourceID: "agent-a", EventID: "first", Project: "acme", RunID: "run-a",
		Type: kernel.TypeToolStarted, TS: copyT0, Actor: "agent", Data: []byte(`{"operation_id":"op-0","tool":"t"}`)}
	if _, err := s.IngestAgentEvents(ctx, []kernel.Event{owned}); err != nil {
		t.Fatal(err)
	}
	const n, refused = 32, 19
	calls := make([]*groupCall, n)
	for i := range calls {
		e := kernel.Event{SourceID: "agent-b", EventID: fmt.Sprintf("e%d", i), Project: "acme", RunID: fmt.Sprintf("run-b%d", i),
			Type: kernel.TypeToolStarted, TS: copyT0, Actor: "agent", Data: []byte(fmt.Sprintf(`{"operation_id":"op-%d","tool":"t"}`, i))}
		if i == refused {
			e.RunID = "run-a" // agent-a's
		}
		preps, err := prepare([]kernel.Event{e})
		if err != nil {
			t.Fatal(err)
		}
		preps[0].agent = true
		calls[i] = &groupCall{ctx: ctx, preps: preps, done: make(chan struct{})}
	}
	s.group.flush(calls)
	for i, c := range calls {
		<-c.done
		switch {
		case i == refused:
			if kernel.ErrorCode(c.err) != kernel.EForbidden || !strings.Contains(c.err.Error(), `belongs to source "agent-a"`) {
				t.Errorf("the refused call: %v, want EForbidden naming agent-a", c.err)
			}
		case c.err != nil || len(c.res) != 1 || c.res[0].Status != kernel.StatusAccepted || c.res[0].EventID != fmt.Sprintf("e%d", i):
			t.Errorf("call %d: %+v %v, want its event accepted", i, c.res, c.err)
		}
	}
	t.Logf("%v writes after the refusal", testutil.ToFloat64(s.groupRetries))
	// Halves down to the refused call: 2 writes a level, 5 levels.
	if got := testutil.ToFloat64(s.groupRetries); got > 10 {
		t.Errorf("%v writes after the refusal, want at most 10 (2·log2(32)); alone it took %d", got, n)
	}
	var rows int
	if err := s.pool.QueryRow(ctx, `SELECT count(*) FROM journal_events WHERE source_id = 'agent-b'`).Scan(&rows); err != nil || rows != n-1 {
		t.Fatalf("agent-b's rows: %d (%v), want %d", rows, err, n-1)
	}
}
