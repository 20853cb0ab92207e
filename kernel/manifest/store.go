package manifest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// Phases of a manifest relative to its operation's tool call.
const (
	PhaseBefore = "before"
	PhaseAfter  = "after"
)

// Key names one stored manifest.
type Key struct {
	Project, RunID, OperationID, Phase string
}

// Store keeps manifests in kernel_workspace_manifests (migration 00024).
// Only the kernel's worker writes it.
type Store struct {
	Pool *pgxpool.Pool
}

// Put stores m under k unless a manifest is stored there already, and
// returns the stored one: a retried activity gets the manifest its first
// attempt stored, so the event that names its digest and the stored
// entries always agree.
func (s Store) Put(ctx context.Context, k Key, m Manifest) (Manifest, error) {
	entries, err := json.Marshal(m.Entries)
	if err != nil {
		return Manifest{}, fmt.Errorf("manifest %v: %w", k, err)
	}
	sum := m.Summary()
	if _, err := s.Pool.Exec(ctx, putSQL, k.Project, k.RunID, k.OperationID, k.Phase, m.TakenAt,
		sum.Digest, sum.Files, sum.Dirs, sum.Other, sum.Bytes, sum.Hashed, m.Truncated, entries); err != nil {
		return Manifest{}, fmt.Errorf("store manifest %s/%s/%s %s: %w", k.Project, k.RunID, k.OperationID, k.Phase, err)
	}
	got, ok, err := s.Get(ctx, k)
	if err != nil {
		return Manifest{}, err
	}
	if !ok {
		return Manifest{}, fmt.Errorf("manifest %s/%s/%s %s vanished after it was stored", k.Project, k.RunID, k.OperationID, k.Phase)
	}
	return got, nil
}

// Get returns the manifest stored under k; ok is false when there is none.
func (s Store) Get(ctx context.Context, k Key) (m Manifest, ok bool, err error) {
	return s.one(ctx, getSQL, k.Project, k.RunID, k.OperationID, k.Phase)
}

// Latest returns the run's most recently taken manifest.
func (s Store) Latest(ctx context.Context, project, runID string) (m Manifest, ok bool, err error) {
	return s.one(ctx, latestSQL, project, runID)
}

// Newest returns the key and time of the most recent manifest taken after
// since, whichever run it belongs to; ok is false when there is none. A
// manifest is taken of a workspace the worker has made, so its run's
// workspace exists beneath the worker's RECKON_DATA_DIR: a triage process
// checks at start-up that it sees it too.
func (s Store) Newest(ctx context.Context, since time.Time) (k Key, takenAt time.Time, ok bool, err error) {
	err = s.Pool.QueryRow(ctx, newestSQL, since).Scan(&k.Project, &k.RunID, &k.OperationID, &k.Phase, &takenAt)
	if errors.Is(err, pgx.ErrNoRows) {
		return Key{}, time.Time{}, false, nil
	}
	if err != nil {
		return Key{}, time.Time{}, false, fmt.Errorf("newest workspace manifest: %w", err)
	}
	return k, takenAt, true, nil
}

// PruneBatch deletes at most limit manifests taken more than retention ago
// and returns how many it deleted; fewer than limit means none older is
// left. One statement per batch keeps each delete's locks and WAL bounded.
// A probe that finds a manifest gone says inconclusive ("not stored"), so
// pruning never makes a verdict wrong.
func (s Store) PruneBatch(ctx context.Context, retention time.Duration, limit int) (int64, error) {
	tag, err := s.Pool.Exec(ctx, pruneSQL, retention.Seconds(), limit)
	if err != nil {
		return 0, fmt.Errorf("prune workspace manifests older than %s: %w", retention, err)
	}
	return tag.RowsAffected(), nil
}

func (s Store) one(ctx context.Context, q string, args ...any) (Manifest, bool, error) {
	var m Manifest
	var raw []byte
	err := s.Pool.QueryRow(ctx, q, args...).Scan(&m.TakenAt, &m.Truncated, &raw)
	if errors.Is(err, pgx.ErrNoRows) {
		return Manifest{}, false, nil
	}
	if err != nil {
		return Manifest{}, false, fmt.Errorf("read manifest %v: %w", args, err)
	}
	if err := json.Unmarshal(raw, &m.Entries); err != nil {
		return Manifest{}, false, fmt.Errorf("decode manifest %v: %w", args, err)
	}
	m.TakenAt = m.TakenAt.UTC()
	return m, true, nil
}
