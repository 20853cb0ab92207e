package pgtest_test

import (
	"context"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/seed-7bc021c3/reckon/internal/pgtest"
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
	if after := requested(); after <= before {
		t.Fatalf("checkpoints requested: %d before Checkpoint, %d after; want more", before, after)
	}
}
