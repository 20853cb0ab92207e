package retention

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/rs/zerolog"

	"github.com/seed-7bc021c3/reckon/kernel/operations"
	"github.com/seed-7bc021c3/reckon/platform/defaults"
)

// ExtendAhead is how far past now every journal maintenance pass creates
// the journal's weekly partitions: two weeks, so that a maintenance loop
// stopped for days still leaves every new row a partition of its own
// rather than the default partition.
const ExtendAhead = 14 * 24 * time.Hour

// KeySlack is how much longer than the journal retention a key row is
// kept after its event (the key horizon is the retention plus it): a
// redelivery of a dropped event inside it is still answered repeated.
// Redeliveries are the outbox's retries and an agent's, which give up
// long before. TestJournalKeyHorizon.
const KeySlack = 30 * 24 * time.Hour

// DefaultJournalEvery is how often a pass looks for partitions to drop
// when Journal.Every is zero; the partitions ahead are extended on every
// pass, whatever it is.
const DefaultJournalEvery = time.Hour

// keySweepEvery is how often the key sweep walks the key table: it reads
// the whole table, and a key kept a day past its horizon costs nothing.
const keySweepEvery = 24 * time.Hour

// keyPagesPerStatement bounds the pages one key-sweep statement reads
// (8 MB of 8 kB pages): the locks, WAL and time of each statement.
const keyPagesPerStatement = 1024

// Journal is the journal's maintenance (docs/scaling.md#time-partitions-and-retention):
// it creates the weekly partitions ahead and, when a retention is set,
// drops the partitions older than it and the key rows past the key
// horizon. Its method Maintain fits outbox.Publisher.WithMaintenance; one
// value serves one publisher's loop (it remembers when it last dropped).
type Journal struct {
	Pool *pgxpool.Pool
	// Retention (RECKON_JOURNAL_RETENTION) is how long after its
	// partition's end an event is kept; zero keeps the journal whole.
	Retention time.Duration
	// ExportDir (RECKON_JOURNAL_EXPORT_DIR), when set, receives each
	// partition as a gzip CSV file before it is dropped.
	ExportDir string
	// Window is RECKON_OPERATIONS_WINDOW, the listing's: an unsettled
	// operation inside it holds its run's partitions back.
	Window time.Duration
	// Now is the clock; nil means time.Now.
	Now func() time.Time
	// Log receives the held-back partitions and the drops.
	Log zerolog.Logger
	// Every is how often a pass looks for partitions to drop and warns
	// of rows in the default partition (DefaultJournalEvery when zero).
	Every time.Duration

	// When this value last dropped, swept the keys and warned of the
	// default partition's rows.
	lastDrop, lastKeys, lastWarn time.Time
}

// JournalReport is what one pass did.
type JournalReport struct {
	// Created counts the weekly partitions created ahead.
	Created int
	// Dropped names the partitions dropped, DroppedRows their rows (the
	// planner's estimate unless exported, then exact).
	Dropped     []string
	DroppedRows int64
	// Exported names the files written.
	Exported []string
	// Held names the partitions held back by runs that still matter.
	Held []string
	// RunsDeleted counts the runs index rows of runs left without events.
	RunsDeleted int64
	// KeysDeleted counts the key rows past the key horizon.
	KeysDeleted int64
	// DefaultRows says the default partition holds rows.
	DefaultRows bool
	// Skipped says another process holds the maintenance lock.
	Skipped bool
}

// partition is one row of reckon_journal_partitions().
type partition struct {
	name         string
	lower, upper *time.Time
	isDefault    bool
	rows         int64
}

// run is a (project, run_id) of the runs index.
type run struct{ project, id string }

// Maintain runs one pass (Pass) and returns the events dropped and the
// key rows deleted, for the maintenance loop's log.
func (j *Journal) Maintain(ctx context.Context) (int64, error) {
	r, err := j.Pass(ctx)
	return r.DroppedRows + r.KeysDeleted, err
}

// Pass extends the partitions ahead and, with a retention and when due,
// drops what is older than it. Of the processes' publishers one makes a
// pass at a time (journalLockSQL); the others skip theirs.
func (j *Journal) Pass(ctx context.Context) (JournalReport, error) {
	var r JournalReport
	conn, err := j.Pool.Acquire(ctx)
	if err != nil {
		return r, fmt.Errorf("journal maintenance: acquire: %w", err)
	}
	defer conn.Release()
	var locked bool
	if err := conn.QueryRow(ctx, journalLockSQL).Scan(&locked); err != nil {
		return r, fmt.Errorf("journal maintenance: lock: %w", err)
	}
	if !locked {
		r.Skipped = true
		return r, nil
	}
	defer func() {
		// A session lock must not go back to the pool with its connection:
		// when the unlock fails, the connection is closed instead.
		if _, err := conn.Exec(context.WithoutCancel(ctx), journalUnlockSQL); err != nil {
			_ = conn.Conn().Close(context.WithoutCancel(ctx))
		}
	}()
	err = j.pass(ctx, conn.Conn(), &r)
	return r, err
}

func (j *Journal) pass(ctx context.Context, conn *pgx.Conn, r *JournalReport) error {
	now := j.now()
	if err := conn.QueryRow(ctx, extendSQL, now.Add(ExtendAhead)).Scan(&r.Created); err != nil {
		return fmt.Errorf("journal maintenance: extend partitions: %w", err)
	}
	if err := conn.QueryRow(ctx, defaultRowsSQL).Scan(&r.DefaultRows); err != nil {
		return fmt.Errorf("journal maintenance: read the default partition: %w", err)
	}
	every := defaults.Positive(j.Every, DefaultJournalEvery)
	if r.DefaultRows && due(j.lastWarn, every, now) {
		j.lastWarn = now
		j.Log.Warn().Msg("the journal's default partition holds rows: the weekly partitions were not extended in time; it is never dropped, and its weeks stay in it")
	}
	if j.Retention <= 0 {
		return nil
	}
	if due(j.lastDrop, every, now) {
		if err := j.dropOld(ctx, conn, now, r); err != nil {
			return err
		}
		j.lastDrop = now
	}
	if due(j.lastKeys, keySweepEvery, now) {
		n, err := pruneKeys(ctx, conn, now.Add(-j.Retention-KeySlack))
		r.KeysDeleted = n
		if err != nil {
			return err
		}
		j.lastKeys = now
	}
	return nil
}

// due says whether a task last run at last (zero: never) is due at now.
func due(last time.Time, every time.Duration, now time.Time) bool {
	return last.IsZero() || !now.Before(last.Add(every))
}

func (j *Journal) now() time.Time {
	if j.Now == nil {
		return time.Now()
	}
	return j.Now()
}

// dropOld drops, oldest first, every partition ending at or before
// now-Retention that no run that still matters holds: each after its
// export when ExportDir is set. A failed export ends the pass with the
// partition kept.
func (j *Journal) dropOld(ctx context.Context, conn *pgx.Conn, now time.Time, r *JournalReport) error {
	parts, err := partitions(ctx, conn)
	if err != nil {
		return err
	}
	cutoff := now.Add(-j.Retention)
	var old []partition
	for _, p := range parts {
		if !p.isDefault && p.upper != nil && !p.upper.After(cutoff) {
			old = append(old, p)
		}
	}
	if len(old) == 0 {
		return nil
	}
	since := now.Add(-defaults.Positive(j.Window, operations.DefaultWindow))
	matter, err := runs(ctx, conn, mattersSQL, since)
	if err != nil {
		return fmt.Errorf("journal retention: runs that matter: %w", err)
	}
	for _, p := range old {
		holders, err := holding(ctx, conn, matter, p)
		if err != nil {
			return err
		}
		if len(holders) > 0 {
			j.held(r, p, holders)
			continue
		}
		if j.ExportDir != "" {
			file, n, err := export(ctx, conn, j.ExportDir, p.name)
			if err != nil {
				return fmt.Errorf("journal retention: partition %s kept: %w", p.name, err)
			}
			r.Exported, p.rows = append(r.Exported, file), n
		}
		dropped, err := j.drop(ctx, conn, since, p, r)
		if err != nil {
			return err
		}
		if dropped {
			r.Dropped, r.DroppedRows = append(r.Dropped, p.name), r.DroppedRows+p.rows
			j.Log.Info().Str("partition", p.name).Int64("rows", p.rows).Msg("journal partition older than RECKON_JOURNAL_RETENTION dropped")
		}
	}
	return nil
}

// held logs a partition held back, naming the runs that hold it.
func (j *Journal) held(r *JournalReport, p partition, holders []run) {
	r.Held = append(r.Held, p.name)
	names := make([]string, len(holders))
	for i, h := range holders {
		names[i] = h.project + "/" + h.id
	}
	j.Log.Info().Str("partition", p.name).Strs("runs", names).
		Msg("journal partition older than RECKON_JOURNAL_RETENTION held back: these runs have an unsettled operation inside RECKON_OPERATIONS_WINDOW or are awaiting")
}

// drop detaches and drops p in one transaction, after checking again,
// under the journal's exclusive lock, that no run that matters holds it,
// and deletes the runs index rows of the runs left without events. It
// answers false when the check finds a holder now.
func (j *Journal) drop(ctx context.Context, conn *pgx.Conn, since time.Time, p partition, r *JournalReport) (bool, error) {
	candidates, err := runs(ctx, conn, runsBeforeSQL, p.upper)
	if err != nil {
		return false, fmt.Errorf("journal retention: runs of %s: %w", p.name, err)
	}
	name := pgx.Identifier{p.name}.Sanitize()
	dropped := false
	err = pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error {
		for _, q := range []string{lockTimeoutSQL, lockJournalSQL} {
			if _, err := tx.Exec(ctx, q); err != nil {
				return fmt.Errorf("lock the journal: %w", err)
			}
		}
		matter, err := runs(ctx, tx.Conn(), mattersSQL, since)
		if err != nil {
			return fmt.Errorf("runs that matter: %w", err)
		}
		holders, err := holding(ctx, tx.Conn(), matter, p)
		if err != nil {
			return err
		}
		if len(holders) > 0 {
			j.held(r, p, holders)
			return nil
		}
		if _, err := tx.Exec(ctx, fmt.Sprintf(detachSQL, name)); err != nil {
			return fmt.Errorf("detach: %w", err)
		}
		projects, ids := columns(candidates)
		tag, err := tx.Exec(ctx, orphanRunsSQL, projects, ids)
		if err != nil {
			return fmt.Errorf("delete runs left without events: %w", err)
		}
		if _, err := tx.Exec(ctx, fmt.Sprintf(dropPartitionSQL, name)); err != nil {
			return fmt.Errorf("drop: %w", err)
		}
		r.RunsDeleted += tag.RowsAffected()
		dropped = true
		return nil
	})
	if err != nil {
		return false, fmt.Errorf("journal retention: drop %s: %w", p.name, err)
	}
	return dropped, nil
}

// partitions lists the journal's partitions, oldest first.
func partitions(ctx context.Context, conn *pgx.Conn) ([]partition, error) {
	rows, err := conn.Query(ctx, partitionsSQL)
	if err != nil {
		return nil, fmt.Errorf("journal retention: list partitions: %w", err)
	}
	parts, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (partition, error) {
		var p partition
		err := row.Scan(&p.name, &p.lower, &p.upper, &p.isDefault, &p.rows)
		return p, err
	})
	if err != nil {
		return nil, fmt.Errorf("journal retention: list partitions: %w", err)
	}
	return parts, nil
}

// holding lists the runs of matter (mattersSQL) with an event in p.
func holding(ctx context.Context, conn *pgx.Conn, matter []run, p partition) ([]run, error) {
	if len(matter) == 0 {
		return nil, nil
	}
	projects, ids := columns(matter)
	holders, err := runs(ctx, conn, holdersSQL, projects, ids, p.lower, p.upper)
	if err != nil {
		return nil, fmt.Errorf("journal retention: runs holding %s: %w", p.name, err)
	}
	return holders, nil
}

// runs reads (project, run_id) rows.
func runs(ctx context.Context, conn *pgx.Conn, q string, args ...any) ([]run, error) {
	rows, err := conn.Query(ctx, q, args...)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, func(row pgx.CollectableRow) (run, error) {
		var r run
		err := row.Scan(&r.project, &r.id)
		return r, err
	})
}

// columns splits runs into the parallel arrays the statements unnest.
func columns(rs []run) (projects, ids []string) {
	projects, ids = make([]string, len(rs)), make([]string, len(rs))
	for i, r := range rs {
		projects[i], ids[i] = r.project, r.id
	}
	return projects, ids
}

// pruneKeys deletes the key rows ingested before horizon, walking the key
// table a bounded range of pages per statement (pruneKeysSQL).
func pruneKeys(ctx context.Context, conn *pgx.Conn, horizon time.Time) (int64, error) {
	var pages int64
	if err := conn.QueryRow(ctx, keyPagesSQL).Scan(&pages); err != nil {
		return 0, fmt.Errorf("journal retention: key table size: %w", err)
	}
	var total int64
	for from := int64(0); from < pages; from += keyPagesPerStatement {
		tag, err := conn.Exec(ctx, pruneKeysSQL, from, from+keyPagesPerStatement, horizon)
		if err != nil {
			return total, fmt.Errorf("journal retention: delete keys past the horizon: %w", err)
		}
		total += tag.RowsAffected()
	}
	return total, nil
}
