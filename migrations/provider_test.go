package migrations_test

import (
	"testing"

	"github.com/jackc/pgx/v5/stdlib"
	"github.com/pressly/goose/v3"

	"github.com/seed-7bc021c3/reckon/internal/pgtest"
	"github.com/seed-7bc021c3/reckon/migrations"
)

// provider is goose over the migrations as Apply hands them to it, on a
// new migrated test schema, for tests that migrate down and up themselves.
func provider(t *testing.T) (*pgtest.Schema, *goose.Provider) {
	t.Helper()
	s := pgtest.New(t)
	db := stdlib.OpenDBFromPool(s.Pool)
	t.Cleanup(func() { _ = db.Close() })
	src, err := migrations.Source()
	if err != nil {
		t.Fatal(err)
	}
	p, err := goose.NewProvider(goose.DialectPostgres, db, src, goose.WithDisableGlobalRegistry(true))
	if err != nil {
		t.Fatal(err)
	}
	return s, p
}
