// Package migrations holds reckon's numbered, forward-only SQL migrations,
// embedded in the binary and applied by goose under a PostgreSQL advisory
// lock, so running them twice or from two processes at once is safe.
//
// Every PL/pgSQL function has one source, functions/<name>.sql, holding its
// current definition. A migration that creates or replaces the function
// includes that file with the line
//
//	-- +reckon include functions/<name>.sql
//
// (inside goose's StatementBegin/StatementEnd), which the loader replaces
// by the file's text before goose parses the migration (expand). Every
// such migration therefore installs the current definition: a database at
// any version ends at the same functions, and the migrations' comments say
// why each change was made. TestIncludes guards the directive.
package migrations

import (
	"context"
	"database/sql"
	"embed"
	"fmt"
	"hash/fnv"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/pgx/v5/stdlib"
	"github.com/pressly/goose/v3"
	"github.com/pressly/goose/v3/lock"
)

//go:embed *.sql functions/*.sql tables/*.sql
var files embed.FS

// Apply brings the database behind pool up to the newest migration and
// returns the versions it applied.
func Apply(ctx context.Context, pool *pgxpool.Pool) ([]int64, error) {
	var schema string
	if err := pool.QueryRow(ctx, "SELECT current_schema()").Scan(&schema); err != nil {
		return nil, fmt.Errorf("apply migrations: current schema: %w", err)
	}
	db := stdlib.OpenDBFromPool(pool)
	defer db.Close()
	return apply(ctx, db, schema, 0)
}

// ApplyTo brings the database behind pool up to migration version and no
// further, and returns the versions it applied: a journal as an older
// release left it, for the conversion measurements of make bench-scale
// (internal/benchscale). TestApplyTo.
func ApplyTo(ctx context.Context, pool *pgxpool.Pool, version int64) ([]int64, error) {
	if version <= 0 {
		return nil, fmt.Errorf("apply migrations: version %d is not a migration's", version)
	}
	var schema string
	if err := pool.QueryRow(ctx, "SELECT current_schema()").Scan(&schema); err != nil {
		return nil, fmt.Errorf("apply migrations: current schema: %w", err)
	}
	db := stdlib.OpenDBFromPool(pool)
	defer db.Close()
	return apply(ctx, db, schema, version)
}

// lockID is the advisory lock of migrations into one schema. goose's default
// is one id for the whole database, which makes migrations of unrelated
// schemas (parallel tests, installations sharing a server) wait on each
// other in 5-second steps; the goose version table lives in the schema, so
// the schema is the unit that must be serialized.
func lockID(schema string) int64 {
	h := fnv.New64a()
	_, _ = h.Write([]byte("reckon-migrations:" + schema))
	return int64(h.Sum64() & 0x7fffffffffffffff)
}

// apply applies the migrations up to version, or every one when version
// is 0.
func apply(ctx context.Context, db *sql.DB, schema string, version int64) ([]int64, error) {
	locker, err := lock.NewPostgresSessionLocker(lock.WithLockID(lockID(schema)), lock.WithLockTimeout(1, 300))
	if err != nil {
		return nil, fmt.Errorf("migration lock: %w", err)
	}
	src, err := expand(files)
	if err != nil {
		return nil, err
	}
	p, err := goose.NewProvider(goose.DialectPostgres, db, src,
		goose.WithSessionLocker(locker), goose.WithDisableGlobalRegistry(true))
	if err != nil {
		return nil, fmt.Errorf("migration provider: %w", err)
	}
	var res []*goose.MigrationResult
	if version == 0 {
		res, err = p.Up(ctx)
	} else {
		res, err = p.UpTo(ctx, version)
	}
	if err != nil {
		return nil, fmt.Errorf("apply migrations: %w", err)
	}
	var applied []int64
	for _, r := range res {
		applied = append(applied, r.Source.Version)
	}
	return applied, nil
}
