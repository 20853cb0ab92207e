package benchscale

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/seed-7bc021c3/reckon/migrations"
)

// flatVersion is the last migration before the partitioned journal: the
// flat reference and the journal to convert stop there.
const flatVersion = 75

// database is the measurement's schemas and a pool on each.
type database struct {
	url                  string
	part, flat, conv     *pgxpool.Pool
	partName, flatName   string
	convName             string
	partIdent, flatIdent string
	convIdent            string
	schemas              []string
}

// bench is one measurement under way.
type bench struct {
	db  *database
	cfg Config
	// span is the journal's range of ingested_at.
	from, to time.Time
}

// open creates the database if missing and the three schemas afresh
// (dropping any left by an earlier run of the same prefix).
func open(ctx context.Context, c Config) (*database, error) {
	if err := ensureDatabase(ctx, c.URL); err != nil {
		return nil, err
	}
	d := &database{url: c.URL, partName: c.Prefix + "_part", flatName: c.Prefix + "_flat", convName: c.Prefix + "_conv"}
	d.schemas = []string{d.partName, d.flatName, d.convName}
	d.partIdent, d.flatIdent, d.convIdent = ident(d.partName), ident(d.flatName), ident(d.convName)
	conn, err := pgx.Connect(ctx, c.URL)
	if err != nil {
		return nil, fmt.Errorf("connect: %w", err)
	}
	defer conn.Close(ctx)
	for _, s := range d.schemas {
		if _, err := conn.Exec(ctx, "DROP SCHEMA IF EXISTS "+ident(s)+" CASCADE; CREATE SCHEMA "+ident(s)); err != nil {
			return nil, fmt.Errorf("schema %s: %w", s, err)
		}
	}
	for _, p := range []struct {
		into   **pgxpool.Pool
		schema string
	}{{&d.part, d.partName}, {&d.flat, d.flatName}, {&d.conv, d.convName}} {
		if *p.into, err = pool(ctx, c.URL, p.schema); err != nil {
			d.close(ctx, true)
			return nil, err
		}
	}
	return d, nil
}

// ident quotes a schema's name.
func ident(name string) string { return pgx.Identifier{name}.Sanitize() }

// pool opens a pool whose search_path is schema.
func pool(ctx context.Context, base, schema string) (*pgxpool.Pool, error) {
	u, err := url.Parse(base)
	if err != nil {
		return nil, fmt.Errorf("database url: %w", err)
	}
	q := u.Query()
	q.Set("search_path", schema)
	u.RawQuery = q.Encode()
	cfg, err := pgxpool.ParseConfig(u.String())
	if err != nil {
		return nil, fmt.Errorf("database url: %w", err)
	}
	cfg.MaxConns = 16
	p, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("pool on %s: %w", schema, err)
	}
	return p, nil
}

// ensureDatabase creates the database of base when it is missing (its
// own, by default: tens of GB that no test should share).
func ensureDatabase(ctx context.Context, base string) error {
	u, err := url.Parse(base)
	if err != nil {
		return fmt.Errorf("database url: %w", err)
	}
	admin := *u
	admin.Path = "/postgres"
	conn, err := pgx.Connect(ctx, admin.String())
	if err != nil {
		return fmt.Errorf("connect to %s (is PostgreSQL running? `make db` starts one): %w", admin.Redacted(), err)
	}
	defer conn.Close(ctx)
	_, err = conn.Exec(ctx, "CREATE DATABASE "+ident(strings.TrimPrefix(u.Path, "/")))
	if pgErr := (*pgconn.PgError)(nil); err != nil && !(errors.As(err, &pgErr) && pgErr.Code == duplicateDatabase) {
		return fmt.Errorf("create database %s: %w", u.Path, err)
	}
	return nil
}

// duplicateDatabase is PostgreSQL's error code for a CREATE DATABASE of
// an existing one.
const duplicateDatabase = "42P04"

// close closes the pools and, unless keep, drops the schemas.
func (d *database) close(ctx context.Context, keep bool) {
	for _, p := range []*pgxpool.Pool{d.part, d.flat, d.conv} {
		if p != nil {
			p.Close()
		}
	}
	if keep {
		return
	}
	d.drop(ctx, d.schemas...)
}

// drop drops schemas, best effort: what is left is dropped by the next
// run's open.
func (d *database) drop(ctx context.Context, schemas ...string) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Minute)
	defer cancel()
	conn, err := pgx.Connect(ctx, d.url)
	if err != nil {
		return
	}
	defer conn.Close(ctx)
	for _, s := range schemas {
		_, _ = conn.Exec(ctx, "DROP SCHEMA IF EXISTS "+ident(s)+" CASCADE")
	}
}

// migrateFlat brings a pool's schema to flatVersion.
func migrateFlat(ctx context.Context, p *pgxpool.Pool) error {
	if _, err := migrations.ApplyTo(ctx, p, flatVersion); err != nil {
		return err
	}
	return nil
}

// chunks calls f over [lo, hi] in ranges of at most n: f(from, to) with to
// exclusive.
func chunks(lo, hi, n int64, f func(from, to int64) error) error {
	for from := lo; from <= hi; from += n {
		if err := f(from, min(from+n, hi+1)); err != nil {
			return err
		}
	}
	return nil
}

// replica acquires a connection of p with triggers off, for bulk copies.
func replica(ctx context.Context, p *pgxpool.Pool) (*pgxpool.Conn, error) {
	conn, err := p.Acquire(ctx)
	if err != nil {
		return nil, err
	}
	if _, err := conn.Exec(ctx, replicaSQL); err != nil {
		conn.Release()
		return nil, err
	}
	return conn, nil
}

// releaseReplica ends a replica connection's session setting and
// releases it.
func releaseReplica(ctx context.Context, conn *pgxpool.Conn) {
	_, _ = conn.Exec(ctx, "RESET session_replication_role")
	conn.Release()
}

// copyJournal copies the flat journal (events and runs index) into the
// schema of p with triggers off, in seq ranges, with keys too when
// withKeys.
func (b *bench) copyJournal(ctx context.Context, p *pgxpool.Pool, withKeys bool) error {
	var lo, hi int64
	if err := b.db.flat.QueryRow(ctx, seqRangeSQL).Scan(&lo, &hi); err != nil {
		return err
	}
	conn, err := replica(ctx, p)
	if err != nil {
		return err
	}
	defer releaseReplica(ctx, conn)
	err = chunks(lo, hi, 500_000, func(from, to int64) error {
		if _, err := conn.Exec(ctx, fmt.Sprintf(copyEventsSQL, b.db.flatIdent), from, to); err != nil {
			return fmt.Errorf("copy events %d..%d: %w", from, to, err)
		}
		if withKeys {
			if _, err := conn.Exec(ctx, fmt.Sprintf(copyKeysSQL, b.db.flatIdent), from, to); err != nil {
				return fmt.Errorf("copy keys %d..%d: %w", from, to, err)
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	var cols string
	if err := conn.QueryRow(ctx, columnsSQL, "journal_runs").Scan(&cols); err != nil {
		return err
	}
	if _, err := conn.Exec(ctx, fmt.Sprintf(copyRunsSQL, b.db.flatIdent, cols)); err != nil {
		return fmt.Errorf("copy runs: %w", err)
	}
	_, err = conn.Exec(ctx, resetSequencesSQL)
	return err
}
