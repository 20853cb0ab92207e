package pgtest

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

var checkpointDenied sync.Once

// Checkpoint runs CHECKPOINT on the tests' server before one side of a
// benchmark pair, so that both sides start in the same state of the WAL:
// none of the previous measurement's dirty pages left to write, and the
// next checkpoint a full max_wal_size away. Without it a checkpoint begins
// wherever the WAL happens to cross the threshold, so one side of a pair
// would write its pages' first full images and the checkpointer's writes
// while the other did not. CHECKPOINT needs a superuser or pg_checkpoint;
// where the role has neither, the benchmark still runs, the refusal logged
// once.
func Checkpoint(tb testing.TB) {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	conn, err := pgx.Connect(ctx, BaseURL())
	if err == nil {
		_, err = conn.Exec(ctx, "CHECKPOINT")
		_ = conn.Close(ctx)
	}
	if err != nil {
		checkpointDenied.Do(func() {
			tb.Logf("pgtest: no CHECKPOINT before benchmark sides (their checkpoint state will differ): %v", err)
		})
	}
}
