// Package pgtest gives each test its own PostgreSQL schema, migrated to the
// newest version and dropped in t.Cleanup, so tests never share state and can
// run in parallel against one real server.
package pgtest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net/url"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/seed-7bc021c3/reckon/migrations"
)

// DefaultURL is the test database when RECKON_TEST_DATABASE_URL is not set:
// the local trust-auth server of the dev machines. DATABASE_URL is never
// read, so tests cannot create schemas in a real deployment's database.
const DefaultURL = "postgres://127.0.0.1:5432/reckon_test?sslmode=disable"

var ensureOnce sync.Once
var ensureErr error

// BaseURL returns the URL of the database tests create their schemas in.
func BaseURL() string {
	if u := os.Getenv("RECKON_TEST_DATABASE_URL"); u != "" {
		return u
	}
	return DefaultURL
}

// ensureDatabase creates the test database when it is missing.
func ensureDatabase(ctx context.Context, base string) error {
	u, err := url.Parse(base)
	if err != nil {
		return fmt.Errorf("parse test database url: %w", err)
	}
	name := strings.TrimPrefix(u.Path, "/")
	admin := *u
	admin.Path = "/postgres"
	conn, err := pgx.Connect(ctx, admin.String())
	if err != nil {
		return fmt.Errorf("connect to %s to create the test database (is PostgreSQL running? `make db` starts a local cluster): %w", admin.Redacted(), err)
	}
	defer conn.Close(ctx)
	var exists bool
	if err := conn.QueryRow(ctx, "SELECT EXISTS (SELECT 1 FROM pg_database WHERE datname = $1)", name).Scan(&exists); err != nil {
		return err
	}
	if !exists {
		if _, err := conn.Exec(ctx, "CREATE DATABASE "+pgx.Identifier{name}.Sanitize()); err != nil && !strings.Contains(err.Error(), "already exists") {
			return fmt.Errorf("create test database %s: %w", name, err)
		}
	}
	return nil
}

// Schema is one test's private schema.
type Schema struct {
	Name string
	// URL connects with search_path set to the schema; hand it to code under
	// test that opens its own pool or to a child process.
	URL  string
	Pool *pgxpool.Pool
}

// New creates a fresh migrated schema for t and returns a pool bound to it.
func New(t testing.TB) *Schema {
	t.Helper()
	return newSchema(t, migrations.Apply)
}

// NewAt is New with the migrations applied up to version and no further:
// a database as an earlier release left it.
func NewAt(t testing.TB, version int64) *Schema {
	t.Helper()
	return newSchema(t, func(ctx context.Context, pool *pgxpool.Pool) ([]int64, error) {
		return migrations.ApplyTo(ctx, pool, version)
	})
}

// newSchema creates a fresh schema for t, migrated by apply.
func newSchema(t testing.TB, apply func(context.Context, *pgxpool.Pool) ([]int64, error)) *Schema {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	base := BaseURL()
	ensureOnce.Do(func() { ensureErr = ensureDatabase(ctx, base) })
	if ensureErr != nil {
		t.Fatalf("pgtest: %v", ensureErr)
	}
	var b [6]byte
	_, _ = rand.Read(b[:])
	name := "t_" + hex.EncodeToString(b[:])

	admin, err := pgx.Connect(ctx, base)
	if err != nil {
		t.Fatalf("pgtest: connect %s: %v", base, err)
	}
	if _, err := admin.Exec(ctx, "CREATE SCHEMA "+name); err != nil {
		t.Fatalf("pgtest: create schema: %v", err)
	}
	_ = admin.Close(ctx)

	u, _ := url.Parse(base)
	q := u.Query()
	q.Set("search_path", name)
	u.RawQuery = q.Encode()
	s := &Schema{Name: name, URL: u.String()}

	cfg, err := pgxpool.ParseConfig(s.URL)
	if err != nil {
		t.Fatalf("pgtest: %v", err)
	}
	cfg.MaxConns = 8
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		t.Fatalf("pgtest: pool: %v", err)
	}
	if _, err := apply(ctx, pool); err != nil {
		pool.Close()
		t.Fatalf("pgtest: %v", err)
	}
	s.Pool = pool
	t.Cleanup(func() {
		pool.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		conn, err := pgx.Connect(ctx, base)
		if err != nil {
			t.Logf("pgtest: drop schema %s: %v", name, err)
			return
		}
		defer conn.Close(ctx)
		if _, err := conn.Exec(ctx, "DROP SCHEMA "+name+" CASCADE"); err != nil {
			t.Logf("pgtest: drop schema %s: %v", name, err)
		}
	})
	return s
}

// Tx begins a transaction on the schema's pool, rolled back when the test
// ends (whatever it did with it before: a rollback after a commit or a
// rollback is a no-op).
func (s *Schema) Tx(t testing.TB) pgx.Tx {
	t.Helper()
	tx, err := s.Pool.Begin(context.Background())
	if err != nil {
		t.Fatalf("pgtest: begin: %v", err)
	}
	t.Cleanup(func() { _ = tx.Rollback(context.Background()) })
	return tx
}

// Querier is what Int and Strings query: a pool, a connection or a
// transaction.
type Querier interface {
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// Int returns the one integer q answers (a count(*), say); an error fails
// the test.
func Int(t testing.TB, db Querier, q string, args ...any) int {
	t.Helper()
	var n int
	if err := db.QueryRow(context.Background(), q, args...).Scan(&n); err != nil {
		t.Fatalf("%s: %v", q, err)
	}
	return n
}

// Strings returns the rows of q, one text column, in the order q gives
// them; an error fails the test.
func Strings(t testing.TB, db Querier, q string, args ...any) []string {
	t.Helper()
	rows, err := db.Query(context.Background(), q, args...)
	if err != nil {
		t.Fatalf("%s: %v", q, err)
	}
	out, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatalf("%s: %v", q, err)
	}
	return out
}
