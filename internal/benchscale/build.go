package benchscale

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/seed-7bc021c3/reckon/migrations"
)

// generate builds the flat journal: migrations to flatVersion, the run
// bound columns (addRunBounds), then the events in statements of about 200,000 (the
// triggers build journal_runs as they would for any writer).
func generate(ctx context.Context, b *bench, res *Result) error {
	c := b.cfg
	if err := migrateFlat(ctx, b.db.flat); err != nil {
		return err
	}
	if err := b.addRunBounds(ctx); err != nil {
		return err
	}
	if err := b.db.flat.QueryRow(ctx, spanSQL, c.Weeks).Scan(&b.from, &b.to); err != nil {
		return fmt.Errorf("span: %w", err)
	}
	ops := c.opsPerRun()
	per := int64(max(1, 200_000/(2*ops+2)))
	start, last := time.Now(), time.Now()
	err := chunks(0, int64(c.Runs)-1, per, func(from, to int64) error {
		if _, err := b.db.flat.Exec(ctx, generateSQL, from, to, c.Runs, ops, c.Projects, b.from, b.to, c.UnsettledEvery); err != nil {
			return fmt.Errorf("runs %d..%d: %w", from, to, err)
		}
		if time.Since(last) > 30*time.Second {
			last = time.Now()
			c.logf("generated %d of %d runs (%s)", to, c.Runs, time.Since(start).Round(time.Second))
		}
		return nil
	})
	if err != nil {
		return err
	}
	res.Generate = time.Since(start)
	if _, err := b.db.flat.Exec(ctx, vacuumAnalyzeSQL); err != nil {
		return fmt.Errorf("vacuum: %w", err)
	}
	return b.db.flat.QueryRow(ctx, countEventsSQL).Scan(&res.Events)
}

// addRunBounds gives the flat journal's runs index the columns the
// newest migrations add to it, read from the partitioned journal's schema,
// migrated (empty) for it.
func (b *bench) addRunBounds(ctx context.Context) error {
	if _, err := migrations.Apply(ctx, b.db.part); err != nil {
		return err
	}
	var add string
	if err := b.db.flat.QueryRow(ctx, fmt.Sprintf(runBoundsSQL, b.db.partIdent)).Scan(&add); err != nil {
		return fmt.Errorf("run bound columns: %w", err)
	}
	if add == "" {
		return nil
	}
	if _, err := b.db.flat.Exec(ctx, "ALTER TABLE journal_runs "+add); err != nil {
		return fmt.Errorf("run bound columns: %w", err)
	}
	return nil
}

// convert copies the flat journal into a third schema at flatVersion (as
// an installation of that release has it), applies migration 00080 to it
// timed, checks it, and drops the schema for its space.
func convert(ctx context.Context, b *bench, res *Result) error {
	p := b.db.conv
	if err := migrateFlat(ctx, p); err != nil {
		return err
	}
	if err := b.copyJournal(ctx, p, false); err != nil {
		return err
	}
	if _, err := p.Exec(ctx, vacuumAnalyzeSQL); err != nil {
		return fmt.Errorf("vacuum: %w", err)
	}
	if _, err := p.Exec(ctx, checkpointSQL); err != nil {
		return err
	}
	start := time.Now()
	if _, err := migrations.Apply(ctx, p); err != nil {
		return err
	}
	res.Convert = time.Since(start)
	if err := checkConversion(ctx, b, p, res); err != nil {
		return err
	}
	if !b.cfg.Keep {
		p.Close()
		b.db.conv = nil
		b.db.drop(ctx, b.db.convName)
	}
	return nil
}

// checkConversion checks the converted journal against the flat one:
// the same row count, every key in journal_keys and no other, no event
// lost or duplicated (a one-for-one match of seq, key, digest and
// ingested_at both ways), every run bounded.
func checkConversion(ctx context.Context, b *bench, p *pgxpool.Pool, res *Result) error {
	var events, keys, missing, differ, unbound int64
	for _, q := range []struct {
		sql  string
		into *int64
	}{
		{countEventsSQL, &events}, {keysCountSQL, &keys}, {keysMissingSQL, &missing},
		{fmt.Sprintf(differSQL, b.db.flatIdent), &differ}, {unboundRunsSQL, &unbound},
	} {
		if err := p.QueryRow(ctx, q.sql).Scan(q.into); err != nil {
			return fmt.Errorf("check: %w", err)
		}
	}
	res.ConvertChecked = fmt.Sprintf("%d events (flat %d), %d keys, %d events without a key, %d lost or duplicated, %d runs unbounded",
		events, res.Events, keys, missing, differ, unbound)
	if events != res.Events || keys != events || missing != 0 || differ != 0 || unbound != 0 {
		return fmt.Errorf("conversion check failed: %s", res.ConvertChecked)
	}
	return nil
}

// loadPartitioned builds the partitioned journal: migrations to the
// newest, a partition per week of the span in place of the one migration
// 00080 made of the empty journal, then the flat journal's rows and keys.
func loadPartitioned(ctx context.Context, b *bench, _ *Result) error {
	p := b.db.part
	if _, err := migrations.Apply(ctx, p); err != nil {
		return err
	}
	if _, err := p.Exec(ctx, dropLegacySQL); err != nil {
		return fmt.Errorf("drop the legacy partition: %w", err)
	}
	first, err := b.firstWeek(ctx)
	if err != nil {
		return err
	}
	for lo := b.from.UTC(); lo.Before(first); lo = lo.AddDate(0, 0, 7) {
		hi := lo.AddDate(0, 0, 7)
		sql := fmt.Sprintf(weekPartitionSQL, ident("journal_events_p"+lo.Format("20060102")), literal(lo), literal(hi))
		if _, err := p.Exec(ctx, sql); err != nil {
			return fmt.Errorf("week of %s: %w", lo.Format(time.DateOnly), err)
		}
	}
	if err := b.copyJournal(ctx, p, true); err != nil {
		return err
	}
	if _, err := p.Exec(ctx, vacuumAnalyzeSQL); err != nil {
		return fmt.Errorf("vacuum: %w", err)
	}
	_, err = p.Exec(ctx, analyzeKeysSQL)
	return err
}

// firstWeek is where the partitioned journal's oldest weekly partition
// begins.
func (b *bench) firstWeek(ctx context.Context) (time.Time, error) {
	parts, err := b.partitions(ctx)
	if err != nil {
		return time.Time{}, err
	}
	for _, pt := range parts {
		if !pt.isDefault && pt.lower != nil {
			return *pt.lower, nil
		}
	}
	return time.Time{}, fmt.Errorf("no weekly partition")
}

// partition is one of reckon_journal_partitions().
type partition struct {
	name         string
	lower, upper *time.Time
	isDefault    bool
}

// partitions lists the partitioned journal's partitions, oldest first.
func (b *bench) partitions(ctx context.Context) ([]partition, error) {
	rows, err := b.db.part.Query(ctx, partitionsSQL)
	if err != nil {
		return nil, fmt.Errorf("partitions: %w", err)
	}
	return pgx.CollectRows(rows, func(row pgx.CollectableRow) (pt partition, err error) {
		return pt, row.Scan(&pt.name, &pt.lower, &pt.upper, &pt.isDefault)
	})
}

// literal quotes a time as an SQL literal.
func literal(t time.Time) string { return "'" + t.UTC().Format(time.RFC3339Nano) + "'" }

// sizes reads the bytes on disk of both journals.
func sizes(ctx context.Context, b *bench, res *Result) error {
	var noKeys int64
	for _, s := range []struct {
		p          *pgxpool.Pool
		into, keys *int64
	}{{b.db.part, &res.BytesPart, &res.BytesKeys}, {b.db.flat, &res.BytesFlat, &noKeys}} {
		if err := s.p.QueryRow(ctx, sizeSQL).Scan(s.into, s.keys); err != nil {
			return fmt.Errorf("size: %w", err)
		}
	}
	parts, err := b.partitions(ctx)
	res.Partitions = len(parts)
	return err
}
