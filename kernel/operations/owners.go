package operations

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/seed-7bc021c3/reckon/kernel"
)

// Owners implements kernel.RunOwners over kernel_runs (written by the run
// starter, kernel/runner) and gateway_runs (written by the MCP gateway,
// kernel/gateway): a run is the kernel's when kernel_runs holds it, or
// holds the run its id descends from (every prefix ending before a
// kernel.ChildSeparator), since only the kernel starts child runs and their
// ids extend their parent's; gateway runs likewise. Ingest refuses writes
// into either; the workspace probe finds only kernel runs' workspaces.
type Owners struct {
	Pool *pgxpool.Pool
}

var _ kernel.RunOwners = Owners{}

// KernelRuns implements kernel.RunOwners in one round trip.
func (o Owners) KernelRuns(ctx context.Context, runs []kernel.RunKey) (map[kernel.RunKey]bool, error) {
	recorded, err := o.lookUp(ctx, kernelRunsSQL, runs)
	if err != nil {
		return nil, fmt.Errorf("look up kernel runs: %w", err)
	}
	owned := make(map[kernel.RunKey]bool, len(recorded))
	for r := range recorded {
		owned[r] = true
	}
	return owned, nil
}

// RecordedRuns implements kernel.RunOwners in one round trip.
func (o Owners) RecordedRuns(ctx context.Context, runs []kernel.RunKey) (map[kernel.RunKey]string, error) {
	recorded, err := o.lookUp(ctx, recordedRunsSQL, runs)
	if err != nil {
		return nil, fmt.Errorf("look up the runs reckon records: %w", err)
	}
	return recorded, nil
}

// lookUp runs sql (kernelRunsSQL or recordedRunsSQL: project, run_id,
// recorder) over runs and every run they descend from, and returns the
// runs of runs found there or beneath one found there, each with its
// recorder.
func (o Owners) lookUp(ctx context.Context, sql string, runs []kernel.RunKey) (map[kernel.RunKey]string, error) {
	projects, ids := kernel.AncestryPairs(runs)
	found := map[kernel.RunKey]string{}
	if len(ids) == 0 {
		return found, nil
	}
	rows, err := o.Pool.Query(ctx, sql, projects, ids)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	recorders := map[kernel.RunKey]string{}
	for rows.Next() {
		var k kernel.RunKey
		var recorder string
		if err := rows.Scan(&k.Project, &k.RunID, &recorder); err != nil {
			return nil, err
		}
		recorders[k] = recorder
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	for _, r := range runs {
		for _, c := range kernel.RunAncestry(r.RunID) {
			if rec, ok := recorders[kernel.RunKey{Project: r.Project, RunID: c}]; ok {
				found[r] = rec
				break
			}
		}
	}
	return found, nil
}
