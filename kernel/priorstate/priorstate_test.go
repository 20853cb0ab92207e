package priorstate

import (
	"strings"
	"testing"

	"github.com/seed-7bc021c3/reckon/internal/pgtest"
	"github.com/seed-7bc021c3/reckon/internal/reckontest"
)

func TestMain(m *testing.M) { reckontest.Main(m) }

// TestPruneUsesTheIndex: a retention batch finds its rows through
// kernel_mcp_prior_states_taken_at (migration 00026), not by a scan.
func TestPruneUsesTheIndex(t *testing.T) {
	t.Parallel()
	s := pgtest.New(t)
	if plan := s.Plan(t, pruneSQL, 3600.0, 500); !strings.Contains(plan, "kernel_mcp_prior_states_taken_at") {
		t.Errorf("the prune does not use the taken_at index:\n%s", plan)
	}
}
