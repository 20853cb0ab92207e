package triage

import (
	"context"
	"fmt"
	"hash/fnv"
	"time"

	"github.com/seed-7bc021c3/reckon/kernel/operations"
)

// SweepBuckets is how many buckets the projects hash onto for sharing the
// scheduled sweep: every pipeline process must use the same number, and
// more processes than buckets leave the extra ones idle.
const SweepBuckets = 64

// Leases are the sweep leases several pipeline processes share the
// scheduled sweep by (*operations.Service implements them).
type Leases interface {
	ClaimSweepShare(ctx context.Context, c operations.SweepClaim) ([]int, error)
	LeaveSweep(ctx context.Context, holder string) error
}

var _ Leases = (*operations.Service)(nil)

// Shard shares the scheduled sweep with the other pipeline processes: each
// holds a lease on a fair share of the buckets the projects hash onto
// (ProjectBucket) and sweeps the projects of those buckets only. The
// leases are renewed every third of Lease; a process that stops renewing
// (it died) loses its buckets when they expire, and the others take them
// at their next renewal, so its projects are swept again within one lease
// and one renewal (docs/triage.md#several-pipeline-processes).
type Shard struct {
	Leases Leases
	// Holder names this process among those sharing the database.
	Holder string
	// Lease is RECKON_SWEEP_LEASE.
	Lease time.Duration
}

// ProjectBucket is the bucket a project's sweep is leased by: FNV-1a of
// its name modulo SweepBuckets.
func ProjectBucket(project string) int {
	h := fnv.New32a()
	_, _ = h.Write([]byte(project))
	return int(h.Sum32() % SweepBuckets)
}

// Claim renews this process's leases and returns the buckets it holds.
func (s *Sweeper) Claim(ctx context.Context) (map[int]bool, error) {
	sh := s.cfg.Shard
	if sh == nil {
		return nil, fmt.Errorf("triage: the sweep is not shared (no Shard configured)")
	}
	got, err := sh.Leases.ClaimSweepShare(ctx, operations.SweepClaim{
		Holder: sh.Holder, Buckets: SweepBuckets, Lease: sh.Lease, Now: s.cfg.Now(),
	})
	if err != nil {
		return nil, fmt.Errorf("triage: %w", err)
	}
	mine := make(map[int]bool, len(got))
	for _, b := range got {
		mine[b] = true
	}
	return mine, nil
}

// renewLeases claims this process's share every third of the lease until
// ctx ends, then gives it up for the others to take at once. A failed
// renewal is logged; the leases held then expire on their own.
func (s *Sweeper) renewLeases(ctx context.Context) {
	sh := s.cfg.Shard
	t := time.NewTicker(sh.Lease / 3)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			lctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), sh.Lease)
			if err := sh.Leases.LeaveSweep(lctx, sh.Holder); err != nil {
				s.cfg.Log.Warn().Err(err).Msg("sweep leases not given up; the other pipeline processes take them when they expire")
			}
			cancel()
			return
		case <-t.C:
			if _, err := s.Claim(ctx); err != nil && ctx.Err() == nil {
				s.cfg.Log.Warn().Err(err).Msg("sweep leases not renewed; they expire unless the next renewal succeeds")
			}
		}
	}
}

// shareOf keeps the projects of the buckets this process holds, and says
// how many it left to the others.
func shareOf(projects []string, mine map[int]bool) (kept []string, elsewhere int) {
	for _, p := range projects {
		if mine[ProjectBucket(p)] {
			kept = append(kept, p)
		} else {
			elsewhere++
		}
	}
	return kept, elsewhere
}
