// Package retention deletes the evidence the kernel records for probes —
// workspace manifests (kernel/manifest) and MCP prior states
// (kernel/priorstate) — once it is older than RECKON_EVIDENCE_RETENTION.
// Both grow with every workspace or adapted MCP call, a manifest by every
// entry of its workspace, and nothing else deletes them.
//
// Pruning never makes a probe wrong, only inconclusive: the workspace-diff
// probe answers inconclusive when a manifest it needs is not stored, and the
// MCP state probe when no prior state was recorded.
//
// It also keeps the journal's weekly partitions (Journal): created ahead on
// every pass, and, past RECKON_JOURNAL_RETENTION, exported and dropped
// whole unless a run that still matters holds them
// (docs/scaling.md#time-partitions-and-retention).
package retention

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/seed-7bc021c3/reckon/kernel/manifest"
	"github.com/seed-7bc021c3/reckon/kernel/priorstate"
	"github.com/seed-7bc021c3/reckon/platform/defaults"
)

// DefaultBatch is how many rows one delete statement removes at most when
// Evidence.Batch is zero: a manifest row can hold a large jsonb, so a batch
// bounds the locks, WAL and time of each statement.
const DefaultBatch = 500

// DefaultRetention is RECKON_EVIDENCE_RETENTION's default, 30 days.
const DefaultRetention = 720 * time.Hour

// Evidence prunes workspace manifests and MCP prior states.
type Evidence struct {
	Pool *pgxpool.Pool
	// Retention is how long evidence is kept, measured from when the
	// kernel took it (taken_at) by the database's clock; DefaultRetention
	// when zero, so a configuration built without the environment never
	// deletes everything.
	Retention time.Duration
	// Batch bounds the rows one statement deletes (DefaultBatch when zero).
	Batch int
}

// Prune deletes every manifest and prior state older than the retention,
// one bounded batch per statement, and returns how many rows it deleted.
// It fits outbox.Publisher.WithMaintenance.
func (e Evidence) Prune(ctx context.Context) (int64, error) {
	batch := e.Batch
	batch = defaults.Positive(batch, DefaultBatch)
	keep := e.Retention
	keep = defaults.Positive(keep, DefaultRetention)
	var total int64
	for _, prune := range []func(context.Context, time.Duration, int) (int64, error){
		manifest.Store{Pool: e.Pool}.PruneBatch,
		priorstate.Store{Pool: e.Pool}.PruneBatch,
	} {
		for {
			n, err := prune(ctx, keep, batch)
			total += n
			if err != nil {
				return total, err
			}
			if n < int64(batch) {
				break
			}
		}
	}
	return total, nil
}
