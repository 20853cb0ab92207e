package pgtest

import (
	"context"
	"net"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"
)

// DeadPool is a pool of a PostgreSQL server that is down: its address is
// a loopback port nothing listens on, so every query fails at once, as in
// an outage. The pool is closed when t ends.
func DeadPool(t testing.TB) *pgxpool.Pool {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	pool, err := pgxpool.New(context.Background(), "postgres://x@"+addr+"/x?connect_timeout=1")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	return pool
}
