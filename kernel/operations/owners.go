package operations

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/seed-7bc021c3/reckon/kernel"
)

// Owners implements kernel.RunOwners over kernel_runs (written by the run
// starter, kernel/runner): a run is the kernel's when kernel_runs holds it,
// or holds the run its id descends from (every prefix ending before a
// kernel.ChildSeparator), since only the kernel starts child runs and their
// ids extend their parent's. Ingest refuses writes into such runs; the
// workspace probe finds only their workspaces.
type Owners struct {
	Pool *pgxpool.Pool
}

var _ kernel.RunOwners = Owners{}

// KernelRuns implements kernel.RunOwners in one round trip.
func (o Owners) KernelRuns(ctx context.Context, runs []kernel.RunKey) (map[kernel.RunKey]bool, error) {
	projects, ids := kernel.AncestryPairs(runs)
	owned := map[kernel.RunKey]bool{}
	if len(ids) == 0 {
		return owned, nil
	}
	rows, err := o.Pool.Query(ctx, kernelRunsSQL, projects, ids)
	if err != nil {
		return nil, fmt.Errorf("look up kernel runs: %w", err)
	}
	defer rows.Close()
	started := map[kernel.RunKey]bool{}
	for rows.Next() {
		var k kernel.RunKey
		if err := rows.Scan(&k.Project, &k.RunID); err != nil {
			return nil, fmt.Errorf("look up kernel runs: %w", err)
		}
		started[k] = true
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("look up kernel runs: %w", err)
	}
	for _, r := range runs {
		for _, c := range kernel.RunAncestry(r.RunID) {
			if started[kernel.RunKey{Project: r.Project, RunID: c}] {
				owned[r] = true
				break
			}
		}
	}
	return owned, nil
}
