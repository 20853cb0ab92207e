package runner

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/seed-7bc021c3/reckon/internal/reckontest"
	"github.com/seed-7bc021c3/reckon/kernel"
)

// TestViewShowsExternalRunsOfAnyID: GET /v1/runs/{run_id} shows a run an
// external agent reported from its journal events (docs/design.md: status
// and the run's events). Ingest takes any run id and project of up to
// kernel.MaxKeyLen bytes, so the view must not hold them to the kernel's
// own alphabet (kernel.ValidateID, for ids that become workflow ids and
// workspace paths): "session:42" must not be answered 400 for a run that
// exists.
func TestViewShowsExternalRunsOfAnyID(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOpts{})
	ctx := context.Background()
	t0 := time.Now().Add(-time.Hour)
	for _, c := range []struct{ project, run string }{
		{e.project, "session:42"},
		{e.project, "claude run 7"},
		{e.project, "r-" + strings.Repeat("x", 200)},
		{"Acme Ops", "run-1"},
	} {
		r := reckontest.Run{Project: c.project, RunID: c.run, Source: "agent-x"}
		e.b.Ingest(r.RunStarted(t0), r.Started("op-1", "run_command", t0), r.RunFailed(t0))
		v, err := e.starter.View(ctx, c.project, c.run, EventPage{})
		if err != nil || v.Status != StatusFailed || len(v.Events) != 3 || v.RunID != c.run {
			t.Errorf("view of %s/%q: %+v %v, want status failed and 3 events", c.project, c.run, v, err)
		}
	}
	// What ingest itself refuses is still a 400 naming the field.
	for _, c := range []struct{ project, run, field string }{
		{e.project, "", "run_id"},
		{"", "run-1", "project"},
		{e.project, strings.Repeat("x", kernel.MaxKeyLen+1), "run_id"},
		{e.project, "a\x00b", "run_id"},
	} {
		_, err := e.starter.View(ctx, c.project, c.run, EventPage{})
		if kernel.ErrorCode(err) != kernel.EInvalid || !strings.Contains(kernel.ErrorMessage(err), c.field) {
			t.Errorf("view of %q/%q: %v, want a 400 naming %s", c.project, c.run, err, c.field)
		}
	}
	// A run nobody reported is still a 404.
	if _, err := e.starter.View(ctx, e.project, "session:404", EventPage{}); kernel.ErrorCode(err) != kernel.ENotFound {
		t.Errorf("unknown run: %v, want not found", err)
	}
}
