package pgtest_test

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/seed-7bc021c3/reckon/internal/pgtest"
	"github.com/seed-7bc021c3/reckon/internal/reckontest"
)

// TestCheckpointRunsOne checks that Checkpoint makes the server checkpoint
// (the benchmark pairs rely on it to start each side alike), by the
// checkpointer's own count of requested checkpoints.
func TestCheckpointRunsOne(t *testing.T) {
	t.Parallel()
	requested := func() int64 {
		t.Helper()
		ctx := context.Background()
		conn, err := pgx.Connect(ctx, pgtest.BaseURL())
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close(ctx)
		var n int64
		if err := conn.QueryRow(ctx, "SELECT checkpoints_req FROM pg_stat_bgwriter").Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	before := requested()
	pgtest.Checkpoint(t)
	// The checkpointer reports its count to the statistics after it has
	// woken the CHECKPOINT it ran, so a read right after can still see the
	// old count; it is there within moments. A Checkpoint that ran none
	// never raises it.
	after := before
	reckontest.Eventually(t, 5*time.Second, "the checkpointer to count the requested checkpoint", func() bool {
		after = requested()
		return after > before
	})
	t.Logf("checkpoints requested: %d before Checkpoint, %d after", before, after)
}
