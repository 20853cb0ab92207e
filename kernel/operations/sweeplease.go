package operations

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"
)

// SweepClaim asks for a holder's share of the sweep's buckets
// (ClaimSweepShare).
type SweepClaim struct {
	// Holder names the claiming process, unique among the processes
	// sharing the database.
	Holder string
	// Buckets is how many buckets the projects hash onto; every process
	// must use the same number.
	Buckets int
	// Lease is how long the heartbeat and the leases taken last
	// (RECKON_SWEEP_LEASE); Now is when the claim is made.
	Lease time.Duration
	Now   time.Time
}

// ClaimSweepShare renews c.Holder's heartbeat and its buckets' leases and
// returns the buckets it holds until c.Now+c.Lease: its fair share, the
// buckets over the live holders rounded up. It keeps the buckets it holds
// up to that share (the lowest), gives up the rest for the others to
// claim, and takes free or expired buckets, lowest first, up to the
// share. Claims are serialized in the database, so no bucket is ever
// leased to two live holders (TestSweepLeasesSplitAndHandOver).
func (s *Service) ClaimSweepShare(ctx context.Context, c SweepClaim) ([]int, error) {
	if c.Buckets <= 0 || c.Lease <= 0 || c.Holder == "" {
		return nil, fmt.Errorf("sweep leases: holder, buckets and lease are required")
	}
	var mine []int
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		var err error
		mine, err = claimShare(ctx, tx, c)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("sweep leases: claim of %s: %w", c.Holder, err)
	}
	return mine, nil
}

// claimShare is ClaimSweepShare's transaction.
func claimShare(ctx context.Context, tx pgx.Tx, c SweepClaim) ([]int, error) {
	until := c.Now.Add(c.Lease)
	if _, err := tx.Exec(ctx, sweepClaimLockSQL, triageLockClass); err != nil {
		return nil, err
	}
	if _, err := tx.Exec(ctx, sweepHeartbeatSQL, c.Holder, until, c.Now); err != nil {
		return nil, err
	}
	var live int
	if err := tx.QueryRow(ctx, sweepLiveSQL, c.Now).Scan(&live); err != nil {
		return nil, err
	}
	held, free, err := readLeases(ctx, tx, c)
	if err != nil {
		return nil, err
	}
	mine := shareOf(held, free, c.Buckets, max(live, 1))
	if _, err := tx.Exec(ctx, sweepReleaseSQL, c.Holder, mine); err != nil {
		return nil, err
	}
	if _, err := tx.Exec(ctx, sweepTakeSQL, c.Holder, mine, until); err != nil {
		return nil, err
	}
	return mine, nil
}

// readLeases returns the buckets below c.Buckets that c.Holder holds
// (live), and those no live holder holds (free or expired), each sorted.
func readLeases(ctx context.Context, tx pgx.Tx, c SweepClaim) (held, free []int, err error) {
	rows, err := tx.Query(ctx, sweepLeasesSQL, c.Now)
	if err != nil {
		return nil, nil, err
	}
	taken := map[int]bool{}
	for rows.Next() {
		var (
			b      int
			holder string
			live   bool
		)
		if err := rows.Scan(&b, &holder, &live); err != nil {
			rows.Close()
			return nil, nil, err
		}
		switch {
		case !live:
		case holder == c.Holder:
			held = append(held, b)
			taken[b] = true
		default:
			taken[b] = true
		}
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, nil, err
	}
	for b := range c.Buckets {
		if !taken[b] {
			free = append(free, b)
		}
	}
	slices.Sort(held)
	held = slices.DeleteFunc(held, func(b int) bool { return b >= c.Buckets })
	return held, free, nil
}

// shareOf is the buckets a holder keeps and takes: its fair share of
// buckets among live holders (rounded up), its own held ones first, then
// free ones, lowest first.
func shareOf(held, free []int, buckets, live int) []int {
	share := (buckets + live - 1) / live
	mine := append([]int{}, held[:min(len(held), share)]...)
	mine = append(mine, free[:min(len(free), share-len(mine))]...)
	slices.Sort(mine)
	return mine
}

// LeaveSweep gives up holder's buckets and heartbeat, so that the other
// processes take its share at their next claim rather than when its
// leases expire (a process that stops cleanly).
func (s *Service) LeaveSweep(ctx context.Context, holder string) error {
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, sweepReleaseSQL, holder, []int{}); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, sweepLeaveSQL, holder)
		return err
	})
	if err != nil {
		return fmt.Errorf("sweep leases: leave of %s: %w", holder, err)
	}
	return nil
}
