// Package sqlitefile reads and writes a SQLite file outside any MCP
// server, with the pure-Go driver the embedded Temporal server already
// links (modernc.org/sqlite): tests and drills of the mcp-sqlite server
// seed a file before a run and read it back afterwards as the ground
// truth (docs/evals.md#real-mcp-servers).
package sqlitefile

import (
	"context"
	"database/sql"
	"fmt"
	"strings"

	// The "sqlite" database/sql driver.
	_ "modernc.org/sqlite"
)

// File is one SQLite file.
type File struct {
	Path string
}

func (f File) open() (*sql.DB, error) {
	db, err := sql.Open("sqlite", f.Path)
	if err != nil {
		return nil, fmt.Errorf("sqlite %s: %w", f.Path, err)
	}
	return db, nil
}

// Exec runs the statements of script on the file, creating it if
// missing.
func (f File) Exec(ctx context.Context, script string) error {
	db, err := f.open()
	if err != nil {
		return err
	}
	defer db.Close()
	if _, err := db.ExecContext(ctx, script); err != nil {
		return fmt.Errorf("sqlite %s: %w", f.Path, err)
	}
	return nil
}

// Dump returns table's rows in rowid order, each column by name (INTEGER
// as int64, TEXT as string, NULL as nil).
func (f File) Dump(ctx context.Context, table string) ([]map[string]any, error) {
	db, err := f.open()
	if err != nil {
		return nil, err
	}
	defer db.Close()
	rows, err := db.QueryContext(ctx, `SELECT * FROM "`+strings.ReplaceAll(table, `"`, `""`)+`" ORDER BY rowid`)
	if err != nil {
		return nil, fmt.Errorf("sqlite %s: dump of %s: %w", f.Path, table, err)
	}
	defer rows.Close()
	cols, err := rows.Columns()
	if err != nil {
		return nil, fmt.Errorf("sqlite %s: dump of %s: %w", f.Path, table, err)
	}
	out := []map[string]any{}
	for rows.Next() {
		vals := make([]any, len(cols))
		ptrs := make([]any, len(cols))
		for i := range vals {
			ptrs[i] = &vals[i]
		}
		if err := rows.Scan(ptrs...); err != nil {
			return nil, fmt.Errorf("sqlite %s: dump of %s: %w", f.Path, table, err)
		}
		row := make(map[string]any, len(cols))
		for i, c := range cols {
			row[c] = vals[i]
		}
		out = append(out, row)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("sqlite %s: dump of %s: %w", f.Path, table, err)
	}
	return out, nil
}
