package main

import (
	"context"
	"fmt"
	"time"

	"github.com/seed-7bc021c3/reckon/kernel/operations"
	"github.com/seed-7bc021c3/reckon/kernel/outbox"
	"github.com/seed-7bc021c3/reckon/pipeline/triage"
)

// demoTriage runs one sweep now (the stack's schedule would run it every
// RECKON_TRIAGE_SCHEDULE), waits for the verdicts to reach the journal,
// prints each verdict card and the listing afterwards.
func demoTriage(ctx context.Context, d *demoEnv) error {
	ops := d.Stack.Operations
	before, err := demoUnresolved(ctx, ops, d.Project)
	if err != nil {
		return err
	}
	fmt.Fprintf(d.Out, "listing before triage: %d unresolved operation(s)\n", len(before))
	for _, it := range before {
		fmt.Fprintf(d.Out, "  %s/%s %s %s\n", it.RunID, it.OperationID, it.Tool, it.State)
	}
	sw, err := d.Stack.NewSweeper(ops)
	if err != nil {
		return err
	}
	rep, err := sw.Sweep(ctx, triage.SweepParams{Project: d.Project})
	if err != nil {
		return err
	}
	wctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	for _, w := range rep.Walls {
		if w.Verdict == nil {
			if w.Outcome == triage.OutcomeFailed {
				fmt.Fprintf(d.Out, "wall %s/%s failed: %s\n", w.Project, w.RunID, w.Error)
			}
			continue
		}
		// Verdicts reach the journal through the outbox publisher.
		if err := outbox.WaitDelivered(wctx, d.Stack.Pool, w.Project, w.RunID, 20*time.Millisecond); err != nil {
			return err
		}
		if err := triage.RenderCard(d.Out, *w.Verdict, w.Reconciled); err != nil {
			return err
		}
	}
	after, err := demoUnresolved(ctx, ops, d.Project)
	if err != nil {
		return err
	}
	fmt.Fprintf(d.Out, "triage: %d wall(s) journaled, %d failed in %s; listing after triage: %d unresolved operation(s)\n",
		rep.Journaled, rep.Failed, rep.Duration.Round(time.Millisecond), len(after))
	if rep.Failed > 0 {
		return fmt.Errorf("%d wall(s) failed", rep.Failed)
	}
	return nil
}

func demoUnresolved(ctx context.Context, ops *operations.Service, project string) ([]operations.Item, error) {
	var out []operations.Item
	cursor := ""
	for {
		pg, err := ops.List(ctx, operations.ListParams{Project: project, Cursor: cursor, Limit: operations.MaxLimit})
		if err != nil {
			return nil, err
		}
		out = append(out, pg.Operations...)
		if pg.NextCursor == "" {
			return out, nil
		}
		cursor = pg.NextCursor
	}
}
