package retention

import (
	"compress/gzip"
	"context"
	"fmt"
	"os"
	"path/filepath"

	"github.com/jackc/pgx/v5"
)

// export writes partition name's rows, in journal order, to
// dir/<name>.csv.gz and returns the file's path and its row count. The
// file is written under a temporary name, synced and renamed, and the
// directory synced, so that a file under the final name is complete: the
// partition is dropped only after that. TestJournalDropsAndExportsOldPartition.
func export(ctx context.Context, conn *pgx.Conn, dir, name string) (string, int64, error) {
	final := filepath.Join(dir, name+".csv.gz")
	tmp, err := os.CreateTemp(dir, "."+name+".*.tmp")
	if err != nil {
		return "", 0, fmt.Errorf("export: %w", err)
	}
	defer func() { _ = os.Remove(tmp.Name()) }() // a no-op after the rename
	n, err := copyOut(ctx, conn, tmp, name)
	if cerr := tmp.Close(); err == nil && cerr != nil {
		err = fmt.Errorf("close: %w", cerr)
	}
	if err != nil {
		return "", 0, fmt.Errorf("export to %s: %w", final, err)
	}
	if err := os.Rename(tmp.Name(), final); err != nil {
		return "", 0, fmt.Errorf("export: %w", err)
	}
	if err := syncDir(dir); err != nil {
		return "", 0, fmt.Errorf("export to %s: %w", final, err)
	}
	return final, n, nil
}

// copyOut writes the partition's COPY through gzip into f and syncs f.
func copyOut(ctx context.Context, conn *pgx.Conn, f *os.File, name string) (int64, error) {
	zw := gzip.NewWriter(f)
	tag, err := conn.PgConn().CopyTo(ctx, zw, fmt.Sprintf(exportSQL, pgx.Identifier{name}.Sanitize()))
	if err != nil {
		return 0, fmt.Errorf("copy: %w", err)
	}
	if err := zw.Close(); err != nil {
		return 0, fmt.Errorf("gzip: %w", err)
	}
	if err := f.Sync(); err != nil {
		return 0, fmt.Errorf("sync: %w", err)
	}
	return tag.RowsAffected(), nil
}

// syncDir makes a rename in dir durable.
func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}
