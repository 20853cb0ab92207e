package soak

import (
	"context"
	"errors"
	"os"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// The private cluster is created, survives an immediate stop with its
// committed rows, and is gone after Drop: nothing of it outlives the soak.
func TestPrivateClusterRestartsAndDrops(t *testing.T) {
	t.Parallel()
	bin, err := FindPGBin("")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	c, err := NewCluster(ctx, bin)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = c.Drop("") }()
	if c.Port == 5432 {
		t.Fatalf("private cluster on the main cluster's port")
	}
	if err := c.Start(ctx); err != nil {
		t.Fatal(err)
	}
	conn, err := pgx.Connect(ctx, c.URL("postgres"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Exec(ctx, `CREATE TABLE t (v int); INSERT INTO t VALUES (42)`); err != nil {
		t.Fatal(err)
	}
	_ = conn.Close(ctx)
	if err := c.Stop(ctx, true); err != nil {
		t.Fatal(err)
	}
	if _, err := pgx.Connect(ctx, c.URL("postgres")); err == nil {
		t.Fatal("the cluster still answers after an immediate stop")
	}
	if err := c.Start(ctx); err != nil {
		t.Fatal(err)
	}
	conn, err = pgx.Connect(ctx, c.URL("postgres"))
	if err != nil {
		t.Fatal(err)
	}
	var v int
	if err := conn.QueryRow(ctx, `SELECT v FROM t`).Scan(&v); err != nil || v != 42 {
		t.Fatalf("after crash recovery: %d, %v", v, err)
	}
	_ = conn.Close(ctx)
	log := t.TempDir() + "/pg.log"
	if err := c.Drop(log); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(c.Root); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("cluster directory %s left behind: %v", c.Root, err)
	}
	if _, err := os.Stat(log); err != nil {
		t.Fatalf("server log not kept: %v", err)
	}
}

func TestFindPGBinExplicitMissing(t *testing.T) {
	t.Parallel()
	if _, err := FindPGBin(t.TempDir()); err == nil {
		t.Fatal("an empty directory accepted as PostgreSQL binaries")
	}
}
