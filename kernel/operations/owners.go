package operations

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/seed-7bc021c3/reckon/kernel"
)

// Owners implements kernel.RunOwners over kernel_runs (written by the run
// starter, kernel/runner), gateway_runs (written by the MCP gateway,
// kernel/gateway) and agent_runs (claimed by the ingest's first write into
// an agent's run, migration 00030). A run is the kernel's when kernel_runs
// holds it, or holds the run its id descends from (every prefix ending
// before a kernel.ChildSeparator), since only the kernel starts child runs
// and their ids extend their parent's; gateway runs likewise. An agent's
// run belongs to the source agent_runs names for that very run id, or,
// when it has none, for the nearest run its id descends from that has one
// (migration 00032): the child runs of an agent's run are its owner's. Ingest
// applies all three; the workspace probe finds only kernel runs'
// workspaces.
type Owners struct {
	Pool *pgxpool.Pool
}

var _ kernel.RunOwners = Owners{}

// KernelRuns implements kernel.RunOwners in one round trip.
func (o Owners) KernelRuns(ctx context.Context, runs []kernel.RunKey) (map[kernel.RunKey]bool, error) {
	writers, err := o.lookUp(ctx, kernelRunsSQL, runs)
	if err != nil {
		return nil, fmt.Errorf("look up kernel runs: %w", err)
	}
	owned := make(map[kernel.RunKey]bool, len(writers))
	for r := range writers {
		owned[r] = true
	}
	return owned, nil
}

// RunWriters implements kernel.RunOwners in one round trip.
func (o Owners) RunWriters(ctx context.Context, runs []kernel.RunKey) (map[kernel.RunKey]kernel.RunWriter, error) {
	writers, err := o.lookUp(ctx, runWritersSQL, runs)
	if err != nil {
		return nil, fmt.Errorf("look up who writes %d runs: %w", len(runs), err)
	}
	return writers, nil
}

// lookUp runs sql (kernelRunsSQL or runWritersSQL: project, run_id,
// recorder, source) over runs and every run they descend from, and returns
// the writer of each run of runs that has one: the recorder of the run or
// of a run it descends from (the kernel's when a run has both), else the
// source owning that very run or, failing that, the nearest run it
// descends from that has an owning source.
func (o Owners) lookUp(ctx context.Context, sql string, runs []kernel.RunKey) (map[kernel.RunKey]kernel.RunWriter, error) {
	projects, ids := kernel.AncestryPairs(runs)
	found := map[kernel.RunKey]kernel.RunWriter{}
	if len(ids) == 0 {
		return found, nil
	}
	rows, err := o.Pool.Query(ctx, sql, projects, ids)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	recorders, sources := map[kernel.RunKey]string{}, map[kernel.RunKey]string{}
	for rows.Next() {
		var k kernel.RunKey
		var recorder, source string
		if err := rows.Scan(&k.Project, &k.RunID, &recorder, &source); err != nil {
			return nil, err
		}
		switch {
		case recorder == kernel.RecorderKernel || recorder != "" && recorders[k] == "":
			recorders[k] = recorder
		case recorder == "":
			sources[k] = source
		}
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	for _, r := range runs {
		for _, c := range kernel.RunAncestry(r.RunID) {
			if rec, ok := recorders[kernel.RunKey{Project: r.Project, RunID: c}]; ok {
				found[r] = kernel.RunWriter{Recorder: rec}
				break
			}
		}
		if _, ok := found[r]; ok {
			continue
		}
		anc := kernel.RunAncestry(r.RunID)
		for i := len(anc) - 1; i >= 0; i-- {
			if src := sources[kernel.RunKey{Project: r.Project, RunID: anc[i]}]; src != "" {
				found[r] = kernel.RunWriter{Source: src, SourceRun: anc[i]}
				break
			}
		}
	}
	return found, nil
}
