// Package sqlitefile reads and writes a SQLite file outside any MCP
// server, through testdata/npm/sqlite-db.cjs and the sqlite3 module the
// mcp-sqlite server uses (Go has no SQLite driver in this module): tests
// and drills seed a file before a run and read it back afterwards as the
// ground truth (docs/evals.md#real-mcp-servers).
package sqlitefile

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
)

// Script is the helper's path under a testdata/npm folder.
const Script = "sqlite-db.cjs"

// File is one SQLite file and the testdata/npm folder whose sqlite3
// module reads it.
type File struct {
	// NPMDir is testdata/npm (holding node_modules/sqlite3).
	NPMDir string
	// Path is the SQLite file.
	Path string
	// Node is the node binary (default "node").
	Node string
}

// Exec runs the statements of sql on the file, creating it if missing.
func (f File) Exec(ctx context.Context, sql string) error {
	_, err := f.run(ctx, strings.NewReader(sql), "exec", f.Path)
	return err
}

// Dump returns table's rows in rowid order, as the sqlite3 module
// renders them (integers as JSON numbers, NULL as null).
func (f File) Dump(ctx context.Context, table string) ([]map[string]any, error) {
	out, err := f.run(ctx, nil, "dump", f.Path, table)
	if err != nil {
		return nil, err
	}
	var rows []map[string]any
	if err := json.Unmarshal(out, &rows); err != nil {
		return nil, fmt.Errorf("sqlite %s: dump of %s: %w", f.Path, table, err)
	}
	return rows, nil
}

func (f File) run(ctx context.Context, stdin *strings.Reader, args ...string) ([]byte, error) {
	node := f.Node
	if node == "" {
		node = "node"
	}
	cmd := exec.CommandContext(ctx, node, append([]string{filepath.Join(f.NPMDir, Script)}, args...)...)
	cmd.Dir = f.NPMDir
	if stdin != nil {
		cmd.Stdin = stdin
	}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("sqlite %s: %s: %w: %s", f.Path, args[0], err, strings.TrimSpace(stderr.String()))
	}
	return out, nil
}
