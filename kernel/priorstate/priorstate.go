// Package priorstate keeps the state of a downstream server as the kernel
// read it just before a write call (kernel.PriorReader), in
// kernel_mcp_prior_states (migration 00025): the probe that checks the
// call afterwards compares against it, so a fact that already held before
// the call is never taken for the call's effect.
package priorstate

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// Prior is one recorded prior state.
type Prior struct {
	Tool    string          `json:"tool"`
	TakenAt time.Time       `json:"taken_at"`
	State   json.RawMessage `json:"state,omitempty"`
	// Error says why the state could not be read; State is then empty.
	Error string `json:"error,omitempty"`
}

// Store reads and writes kernel_mcp_prior_states. Only the kernel's worker
// writes it.
type Store struct {
	Pool *pgxpool.Pool
}

const putSQL = `
INSERT INTO kernel_mcp_prior_states (project, run_id, operation_id, tool, taken_at, state, error)
VALUES ($1, $2, $3, $4, $5, $6, $7)
ON CONFLICT DO NOTHING`

const getSQL = `
SELECT tool, taken_at, state, error FROM kernel_mcp_prior_states
WHERE project = $1 AND run_id = $2 AND operation_id = $3`

// pruneSQL deletes at most $2 prior states taken more than $1 seconds ago
// by the database's clock, found through kernel_mcp_prior_states_taken_at
// (migration 00026) so a batch never scans the table.
const pruneSQL = `
DELETE FROM kernel_mcp_prior_states WHERE (project, run_id, operation_id) IN (
    SELECT project, run_id, operation_id FROM kernel_mcp_prior_states
    WHERE taken_at < now() - make_interval(secs => $1)
    LIMIT $2)`

// Put records p for the operation unless one is recorded already (a
// redelivered activity keeps the first, which was read before any attempt
// of the call).
func (s Store) Put(ctx context.Context, project, runID, opID string, p Prior) error {
	var state any
	if len(p.State) > 0 {
		state = string(p.State)
	}
	if _, err := s.Pool.Exec(ctx, putSQL, project, runID, opID, p.Tool, p.TakenAt, state, p.Error); err != nil {
		return fmt.Errorf("record prior state of %s/%s/%s: %w", project, runID, opID, err)
	}
	return nil
}

// Get returns the operation's prior state; ok is false when none is
// recorded.
func (s Store) Get(ctx context.Context, project, runID, opID string) (p Prior, ok bool, err error) {
	var state []byte
	err = s.Pool.QueryRow(ctx, getSQL, project, runID, opID).Scan(&p.Tool, &p.TakenAt, &state, &p.Error)
	if errors.Is(err, pgx.ErrNoRows) {
		return Prior{}, false, nil
	}
	if err != nil {
		return Prior{}, false, fmt.Errorf("read prior state of %s/%s/%s: %w", project, runID, opID, err)
	}
	p.State, p.TakenAt = state, p.TakenAt.UTC()
	return p, true, nil
}

// PruneBatch deletes at most limit prior states taken more than retention
// ago and returns how many it deleted; fewer than limit means none older is
// left. A probe that finds a prior state gone says inconclusive, so pruning
// never makes a verdict wrong.
func (s Store) PruneBatch(ctx context.Context, retention time.Duration, limit int) (int64, error) {
	tag, err := s.Pool.Exec(ctx, pruneSQL, retention.Seconds(), limit)
	if err != nil {
		return 0, fmt.Errorf("prune MCP prior states older than %s: %w", retention, err)
	}
	return tag.RowsAffected(), nil
}
