package benchscale

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/rs/zerolog"

	"github.com/seed-7bc021c3/reckon/kernel/operations"
	"github.com/seed-7bc021c3/reckon/kernel/retention"
	"github.com/seed-7bc021c3/reckon/pipeline/triage"
)

// listSample is how many projects with unsettled operations the listing
// calls go round (the five big projects among them).
const listSample = 40

// listing measures kernel/operations' listing (Service.List, first page)
// over a sample of projects, the sides taking turns to go first, and
// checks that both journals list the same operations.
func listing(ctx context.Context, b *bench, res *Result) error {
	part, flat := operations.New(b.db.part, operations.Config{}), operations.New(b.db.flat, operations.Config{})
	projects, err := flat.Projects(ctx)
	if err != nil {
		return err
	}
	sample := []string{"proj-0000", "proj-0001", "proj-0002", "proj-0003", "proj-0004"}
	for _, p := range projects {
		if len(sample) >= listSample {
			break
		}
		if !slices.Contains(sample, p) {
			sample = append(sample, p)
		}
	}
	var dPart, dFlat []time.Duration
	for i := range b.cfg.ListCalls {
		project := sample[i%len(sample)]
		np, nf, d1, d2, err := listBoth(ctx, part, flat, project, i%2 == 1)
		if err != nil {
			return err
		}
		if np != nf {
			return fmt.Errorf("project %s: %d operations listed partitioned, %d flat", project, np, nf)
		}
		if i < len(sample) {
			res.Listed += np
		}
		dPart, dFlat = append(dPart, d1), append(dFlat, d2)
	}
	res.ListP95 = Pair{Part: p95(dPart).Seconds() * 1000, Flat: p95(dFlat).Seconds() * 1000}
	res.ListProjects = len(sample)
	return nil
}

// listBoth lists a project's first page on both journals, the flat one
// first when flatFirst, and returns the counts and times.
func listBoth(ctx context.Context, part, flat *operations.Service, project string, flatFirst bool) (np, nf int, dp, df time.Duration, err error) {
	if flatFirst {
		if nf, df, err = timedList(ctx, flat, project); err != nil {
			return
		}
	}
	if np, dp, err = timedList(ctx, part, project); err != nil || flatFirst {
		return
	}
	nf, df, err = timedList(ctx, flat, project)
	return
}

// timedList lists a project's first page and says how many operations it
// held and how long it took.
func timedList(ctx context.Context, s *operations.Service, project string) (int, time.Duration, error) {
	start := time.Now()
	page, err := s.List(ctx, operations.ListParams{Project: project})
	if err != nil {
		return 0, 0, fmt.Errorf("list %s: %w", project, err)
	}
	return len(page.Operations), time.Since(start), nil
}

// p95 is the 95th percentile (nearest rank) of ds.
func p95(ds []time.Duration) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[(len(s)*95+99)/100-1]
}

// sweep measures a dry-run sweep of every project (the listing of each
// project's unsettled operations, each run's read and its walls, decided
// by the built-in supervisor, nothing written) by one pipeline process and
// by two sharing the sweep's leases, on both journals.
func sweep(ctx context.Context, b *bench, res *Result) error {
	for _, side := range []struct {
		p      *pgxpool.Pool
		schema string
		one    *float64
		two    *float64
		runs   *int
	}{{b.db.part, b.db.partName, &res.Sweep1.Part, &res.Sweep2.Part, &res.SweptRuns}, {b.db.flat, b.db.flatName, &res.Sweep1.Flat, &res.Sweep2.Flat, nil}} {
		if _, err := side.p.Exec(ctx, checkpointSQL); err != nil {
			return err
		}
		runs, d, err := b.sweepWith(ctx, side.schema, 1)
		if err != nil {
			return err
		}
		*side.one = d.Seconds()
		runs2, d2, err := b.sweepWith(ctx, side.schema, 2)
		if err != nil {
			return err
		}
		*side.two = d2.Seconds()
		if runs != runs2 {
			return fmt.Errorf("one process swept %d runs, two %d", runs, runs2)
		}
		if side.runs != nil {
			*side.runs = runs
		}
	}
	return nil
}

// sweepWith runs one sharded dry-run sweep in each of n processes (each
// its own pool and holder) at once, after the claims that split the
// buckets between them, and returns the runs swept and the wall time.
func (b *bench) sweepWith(ctx context.Context, schema string, n int) (int, time.Duration, error) {
	sweepers := make([]*triage.Sweeper, n)
	holders := make([]string, n)
	svcs := make([]*operations.Service, n)
	for i := range n {
		p, err := pool(ctx, b.cfg.URL, schema)
		if err != nil {
			return 0, 0, err
		}
		defer p.Close()
		if err := p.Ping(ctx); err != nil {
			return 0, 0, err
		}
		svcs[i] = operations.New(p, operations.Config{})
		holders[i] = fmt.Sprintf("bench-scale-%d-of-%d", i+1, n)
		sweepers[i] = triage.New(svcs[i], triage.Config{
			Shard:    &triage.Shard{Leases: svcs[i], Holder: holders[i], Lease: time.Hour},
			MaxWalls: 1 << 30,
			Log:      zerolog.Nop(),
		})
	}
	defer func() {
		for i := range n {
			_ = svcs[i].LeaveSweep(context.WithoutCancel(ctx), holders[i])
		}
	}()
	// Two rounds of claims: the first process takes every bucket, the
	// second none until the first gives up its excess in the second.
	for range 2 {
		for _, sw := range sweepers {
			if _, err := sw.Claim(ctx); err != nil {
				return 0, 0, err
			}
		}
	}
	reps := make([]triage.Report, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	start := time.Now()
	for i, sw := range sweepers {
		wg.Go(func() { reps[i], errs[i] = sw.Sweep(ctx, triage.SweepParams{DryRun: true, Sharded: true}) })
	}
	wg.Wait()
	d := time.Since(start)
	runs := 0
	for i := range n {
		if errs[i] != nil {
			return 0, 0, fmt.Errorf("sweep %s: %w", holders[i], errs[i])
		}
		if reps[i].Failed > 0 {
			return 0, 0, fmt.Errorf("sweep %s: %d walls failed", holders[i], reps[i].Failed)
		}
		runs += reps[i].Runs
	}
	return runs, d, nil
}

// dropOldest measures the drop of the partitioned journal's oldest week
// by the journal's own retention pass (kernel/retention.Journal.Pass: the
// check that no run that matters holds it, DETACH and DROP, the runs
// index rows of runs left without events), its retention set so that
// only that week is due, against the DELETE of the same rows from the
// flat journal; then VACUUM of each.
func dropOldest(ctx context.Context, b *bench, res *Result) error {
	parts, err := b.partitions(ctx)
	if err != nil {
		return err
	}
	var oldest *partition
	for i := range parts {
		if !parts[i].isDefault && parts[i].upper != nil {
			oldest = &parts[i]
			break
		}
	}
	if oldest == nil {
		return fmt.Errorf("no partition to drop")
	}
	var inPart, inFlat int64
	if err := b.db.part.QueryRow(ctx, countBeforeSQL, *oldest.upper).Scan(&inPart); err != nil {
		return err
	}
	if err := b.db.flat.QueryRow(ctx, countBeforeSQL, *oldest.upper).Scan(&inFlat); err != nil {
		return err
	}
	if inPart != inFlat || inPart == 0 {
		return fmt.Errorf("oldest week: %d rows partitioned, %d flat", inPart, inFlat)
	}
	res.Dropped = inPart
	now := time.Now()
	pass := &retention.Journal{Pool: b.db.part, Retention: now.Sub(*oldest.upper), Now: func() time.Time { return now }, Log: zerolog.Nop()}
	steps := []struct {
		p    *pgxpool.Pool
		into *float64
		do   func() error
	}{
		{b.db.part, &res.Drop.Part, func() error {
			rep, err := pass.Pass(ctx)
			if err == nil && (len(rep.Dropped) != 1 || rep.Dropped[0] != oldest.name) {
				err = fmt.Errorf("the retention pass dropped %v (held back %v), not %s", rep.Dropped, rep.Held, oldest.name)
			}
			return err
		}},
		{b.db.flat, &res.Drop.Flat, func() error { _, err := b.db.flat.Exec(ctx, deleteBeforeSQL, *oldest.upper); return err }},
		{b.db.part, &res.Vacuum.Part, func() error { _, err := b.db.part.Exec(ctx, vacuumSQL); return err }},
		{b.db.flat, &res.Vacuum.Flat, func() error { _, err := b.db.flat.Exec(ctx, vacuumSQL); return err }},
	}
	for _, s := range steps {
		if _, err := s.p.Exec(ctx, checkpointSQL); err != nil {
			return err
		}
		start := time.Now()
		if err := s.do(); err != nil {
			return err
		}
		*s.into = time.Since(start).Seconds()
	}
	return nil
}
