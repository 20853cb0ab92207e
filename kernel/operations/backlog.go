package operations

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// ProjectBacklog is what waits for people in one project: the operator's
// queue and the runs awaiting a settlement.
type ProjectBacklog struct {
	Project string
	// Attention is the operator's queue's size (Attention, every page);
	// OldestAttention the time of its oldest decision (zero when empty).
	Attention       int
	OldestAttention time.Time
	// AwaitingRuns counts the kernel runs waiting for the settlement of
	// an operation: a run.awaiting inside the window with no run.resumed
	// for its operation, and no run.completed or run.failed.
	AwaitingRuns int
}

// Backlog returns, for every project with either (at most
// MaxKnownProjects are looked at), the operator's queue's size and oldest
// decision and the runs awaiting a settlement, in one statement whose
// cost follows the supervisor's reconciliations and the waits inside the
// window (backlogSQL): what the pipeline's gauges show.
func (s *Service) Backlog(ctx context.Context) ([]ProjectBacklog, error) {
	since := s.now().Add(-s.cfg.Window)
	rows, err := s.pool.Query(ctx, backlogSQL, since, MaxKnownProjects)
	if err != nil {
		return nil, fmt.Errorf("backlog: %w", err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (ProjectBacklog, error) {
		var (
			b      ProjectBacklog
			oldest *time.Time
		)
		if err := r.Scan(&b.Project, &b.Attention, &oldest, &b.AwaitingRuns); err != nil {
			return b, err
		}
		if oldest != nil {
			b.OldestAttention = oldest.UTC()
		}
		return b, nil
	})
	if err != nil {
		return nil, fmt.Errorf("backlog: %w", err)
	}
	return out, nil
}
