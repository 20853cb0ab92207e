package drill

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"strings"

	"github.com/seed-7bc021c3/reckon/internal/sqlitefile"
)

// SQLiteKindPrefix starts the scenario kind of an mcp-sqlite drill:
// sqlite_<write tool>_<after|before>.
const SQLiteKindPrefix = "sqlite_"

// sqliteTable is the table every mcp-sqlite drill writes.
const (
	sqliteTable  = "records"
	sqliteSchema = "CREATE TABLE records (id INTEGER PRIMARY KEY, name TEXT NOT NULL, qty INTEGER, status TEXT, note TEXT);\n"
)

var (
	sqliteColumns  = []string{"id", "name", "qty", "status", "note"}
	sqliteWrites   = []string{"create_record", "update_records", "delete_records"}
	sqliteStatuses = []string{"open", "held", "shipped", "returned"}
)

// SQLiteCase is an mcp-sqlite scenario's store: the rows seeded before
// the run and the writes its plan makes in order (tool names as the
// server's), the last one faulted.
type SQLiteCase struct {
	Seed   []map[string]any
	Writes []Step
}

// GenerateSQLite returns count mcp-sqlite scenarios from seed: each seeds
// a table, reads it, makes up to two seeded writes (create_record,
// update_records, delete_records, some setting a column to null) and then
// the faulted write, after or before its effect. Write tool and fault
// side are dealt round-robin in a seeded shuffle, so every six scenarios
// cover each pair once.
func GenerateSQLite(seed uint64, count int) []Scenario {
	r := rand.New(rand.NewPCG(seed, seed^0x2545f4914f6cdd1d))
	out := make([]Scenario, 0, count)
	var deck []int
	for i := 0; i < count; i++ {
		if len(deck) == 0 {
			deck = r.Perm(2 * len(sqliteWrites))
		}
		pick := deck[0]
		deck = deck[1:]
		write, after := sqliteWrites[pick/2], pick%2 == 0
		g := &sqliteGen{r: r, next: 1000}
		c := &SQLiteCase{Seed: g.seedRows(4 + r.IntN(3))}
		rows := cloneRows(c.Seed)
		var sc Scenario
		sc.Plan.Steps = append(sc.Plan.Steps, Step{Tool: "mcp__" + SQLiteServer + "__read_records", Args: map[string]any{"table": sqliteTable}})
		for j, n := 0, r.IntN(3); j <= n; j++ {
			w := write
			if j < n {
				w = sqliteWrites[r.IntN(len(sqliteWrites))]
			}
			step := g.write(w, rows)
			rows = applySQLite(rows, step)
			c.Writes = append(c.Writes, step)
			sc.Plan.Steps = append(sc.Plan.Steps, Step{Tool: "mcp__" + SQLiteServer + "__" + step.Tool, Args: step.Args})
		}
		id := fmt.Sprintf("op-%d", len(sc.Plan.Steps))
		when := sc.faultAt(id, after)
		sc.Index, sc.Kind, sc.SQLite = i, SQLiteKindPrefix+write+"_"+when, c
		sc.RunID = fmt.Sprintf("q%d-%03d-%s-%s", seed, i, strings.ReplaceAll(write, "_", "-"), when)
		sc.Notes = fmt.Sprintf("mcp-sqlite: %d rows seeded in %s, %d earlier write(s), then %s (%s), fault %s the effect",
			len(c.Seed), sqliteTable, len(c.Writes)-1, write, id, when)
		out = append(out, sc)
	}
	return out
}

type sqliteGen struct {
	r    *rand.Rand
	next int // the next unique qty an update sets
}

func (g *sqliteGen) seedRows(n int) []map[string]any {
	rows := make([]map[string]any, 0, n)
	for id := 1; id <= n; id++ {
		rows = append(rows, g.row(id))
	}
	return rows
}

// row is a new row with id: a unique name, a null note now and then.
func (g *sqliteGen) row(id int) map[string]any {
	var note any = nouns[g.r.IntN(len(nouns))] + " note"
	if g.r.IntN(3) == 0 {
		note = nil
	}
	return map[string]any{"id": id, "name": nouns[g.r.IntN(len(nouns))] + "-" + strconv.Itoa(id), "qty": 1 + g.r.IntN(50),
		"status": sqliteStatuses[g.r.IntN(len(sqliteStatuses))], "note": note}
}

// write is one effective write of tool on rows (which keeps at least one
// row for an update or a delete to find).
func (g *sqliteGen) write(tool string, rows []map[string]any) Step {
	if len(rows) == 0 {
		tool = "create_record"
	}
	switch tool {
	case "create_record":
		id := 1
		for _, r := range rows {
			if n := r["id"].(int); n >= id {
				id = n + 1
			}
		}
		return Step{Tool: tool, Args: map[string]any{"table": sqliteTable, "data": g.row(id)}}
	case "update_records":
		// A qty no row holds, so the new values are the call's own.
		g.next++
		data := map[string]any{"qty": g.next}
		switch g.r.IntN(3) {
		case 0:
			data["status"] = sqliteStatuses[g.r.IntN(len(sqliteStatuses))]
		case 1:
			data["note"] = nil
		}
		return Step{Tool: tool, Args: map[string]any{"table": sqliteTable, "data": data, "conditions": g.match(rows)}}
	default:
		return Step{Tool: tool, Args: map[string]any{"table": sqliteTable, "conditions": g.match(rows)}}
	}
}

// match names one row of rows, by id or by its unique name.
func (g *sqliteGen) match(rows []map[string]any) map[string]any {
	r := rows[g.r.IntN(len(rows))]
	if g.r.IntN(2) == 0 {
		return map[string]any{"id": r["id"]}
	}
	return map[string]any{"name": r["name"]}
}

// applySQLite is rows after the write step, as mcp-sqlite makes it (rows
// in rowid order; conditions by equality).
func applySQLite(rows []map[string]any, step Step) []map[string]any {
	out := cloneRows(rows)
	matches := func(r map[string]any) bool {
		cond, _ := step.Args["conditions"].(map[string]any)
		for k, v := range cond {
			if fmt.Sprint(r[k]) != fmt.Sprint(v) {
				return false
			}
		}
		return true
	}
	switch step.Tool {
	case "create_record":
		row := map[string]any{}
		for _, c := range sqliteColumns {
			row[c] = nil
		}
		for k, v := range step.Args["data"].(map[string]any) {
			row[k] = v
		}
		out = append(out, row)
	case "update_records":
		for _, r := range out {
			if matches(r) {
				for k, v := range step.Args["data"].(map[string]any) {
					r[k] = v
				}
			}
		}
	case "delete_records":
		kept := out[:0]
		for _, r := range out {
			if !matches(r) {
				kept = append(kept, r)
			}
		}
		out = kept
	}
	return out
}

func cloneRows(rows []map[string]any) []map[string]any {
	out := make([]map[string]any, len(rows))
	for i, r := range rows {
		out[i] = make(map[string]any, len(r))
		for k, v := range r {
			out[i][k] = v
		}
	}
	return out
}

// seed writes the case's table and rows into a new file.
func (c *SQLiteCase) seed(ctx context.Context, f sqlitefile.File) error {
	if err := os.Remove(f.Path); err != nil && !os.IsNotExist(err) {
		return fmt.Errorf("sqlite seed: %w", err)
	}
	var b strings.Builder
	b.WriteString(sqliteSchema)
	for _, r := range c.Seed {
		vals := make([]string, len(sqliteColumns))
		for i, col := range sqliteColumns {
			vals[i] = sqlLiteral(r[col])
		}
		fmt.Fprintf(&b, "INSERT INTO %s (%s) VALUES (%s);\n", sqliteTable, strings.Join(sqliteColumns, ", "), strings.Join(vals, ", "))
	}
	return f.Exec(ctx, b.String())
}

func sqlLiteral(v any) string {
	switch x := v.(type) {
	case nil:
		return "NULL"
	case string:
		return "'" + strings.ReplaceAll(x, "'", "''") + "'"
	default:
		return fmt.Sprint(x)
	}
}

// diff says what the file shows of the last write: "none" when it holds
// the seed with the earlier writes applied, "occurred" when it holds the
// last one applied too; anything else is an error.
func (c *SQLiteCase) diff(ctx context.Context, f sqlitefile.File) (string, error) {
	got, err := f.Dump(ctx, sqliteTable)
	if err != nil {
		return "", err
	}
	rows := cloneRows(c.Seed)
	for _, w := range c.Writes[:len(c.Writes)-1] {
		rows = applySQLite(rows, w)
	}
	return storeDiff(got, rows, applySQLite(rows, c.Writes[len(c.Writes)-1]))
}

// storeDiff compares a store's state got, as JSON, with its state
// without the faulted write (before) and with it (after).
func storeDiff(got, before, after any) (string, error) {
	g, b, a := canonJSON(got), canonJSON(before), canonJSON(after)
	switch g {
	case b:
		return "none", nil
	case a:
		return "occurred", nil
	}
	return "", fmt.Errorf("the store holds %s, neither %s (without the faulted write) nor %s (with it)", g, b, a)
}

// canonJSON is v's JSON after a round trip (numbers as numbers, maps with
// sorted keys).
func canonJSON(v any) string {
	b, _ := json.Marshal(v)
	var x any
	_ = json.Unmarshal(b, &x)
	b, _ = json.Marshal(x)
	return string(b)
}
