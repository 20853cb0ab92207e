package drill

import (
	"context"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/seed-7bc021c3/reckon/evals"
)

// TestGenerateRealServers: the mcp-sqlite and git suites are the same
// for one seed, deal every (write tool, fault side) pair once per six
// scenarios, fault the plan's last step, and model every write they make
// as effective (the state with the faulted write differs from the state
// without it).
func TestGenerateRealServers(t *testing.T) {
	t.Parallel()
	for _, s := range []struct {
		prefix string
		gen    func(uint64, int) []Scenario
	}{{SQLiteKindPrefix, GenerateSQLite}, {GitKindPrefix, GenerateGit}} {
		scs := s.gen(3, 12)
		if !reflect.DeepEqual(scs, s.gen(3, 12)) || len(scs) != 12 {
			t.Fatalf("%s: %d scenarios, or not the same for one seed", s.prefix, len(scs))
		}
		kinds := map[string]int{}
		for _, sc := range scs {
			kinds[sc.Kind]++
			last := sc.Plan.Steps[len(sc.Plan.Steps)-1]
			id := sc.Fault.AfterEffect + sc.Fault.BeforeEffect
			tool := last.Tool[strings.LastIndex(last.Tool, "__")+2:]
			side := strings.TrimSuffix(strings.TrimSuffix(sc.Kind, "_after"), "_before")
			if id != "op-"+strconv.Itoa(len(sc.Plan.Steps)) || !strings.HasPrefix(sc.Kind, s.prefix) || !strings.HasSuffix(side, tool) {
				t.Errorf("%s: fault at %q, kind %s, last step %s", sc.RunID, id, sc.Kind, last.Tool)
			}
			if before, after := modelBeforeAfter(sc); before == after {
				t.Errorf("%s: the faulted write changes nothing in the model: %s", sc.RunID, before)
			}
		}
		if len(kinds) != 6 {
			t.Errorf("%s: kinds %v, want the 6 (write, side) pairs", s.prefix, kinds)
		}
		for k, n := range kinds {
			if n != 2 {
				t.Errorf("%s: kind %s dealt %d times in 12", s.prefix, k, n)
			}
		}
	}
}

// modelBeforeAfter is sc's store modelled without and with its faulted
// write, as JSON.
func modelBeforeAfter(sc Scenario) (string, string) {
	if c := sc.SQLite; c != nil {
		rows := cloneRows(c.Seed)
		for _, w := range c.Writes[:len(c.Writes)-1] {
			rows = applySQLite(rows, w)
		}
		return canonJSON(rows), canonJSON(applySQLite(rows, c.Writes[len(c.Writes)-1]))
	}
	c := sc.Git
	s := gitState{Commits: 1, Tags: []string{}, Branches: []string{"main"}}
	for _, w := range c.Writes[:len(c.Writes)-1] {
		s = applyGit(s, w)
	}
	return canonJSON(s), canonJSON(applyGit(s, c.Writes[len(c.Writes)-1]))
}

// TestDrillRealServers drills mcp-sqlite and git-mcp-server from
// testdata/npm live, a fault after and one before a write of each: the
// truth the fault injector recorded agrees with the store's own diff (the
// drill fails otherwise), and the MCP state probe decides each as its
// truth.
func TestDrillRealServers(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	abs, _ := filepath.Abs(".")
	npm := FindNPMDir(abs)
	if npm == "" {
		t.Fatal("mcp-sqlite or @cyanheads/git-mcp-server is not installed under testdata/npm: run scripts/ensure-deps.sh")
	}
	st, _ := openTestStack(ctx, t, func(c *StackConfig) { c.NPMDir = npm })
	var scs []Scenario
	for _, all := range [][]Scenario{GenerateSQLite(5, 6), GenerateGit(5, 6)} {
		sides := map[bool]bool{}
		for _, sc := range all {
			if after := sc.Fault.AfterEffect != ""; !sides[after] {
				sides[after] = true
				scs = append(scs, sc)
			}
		}
	}
	o := Params{Seed: 5, GeneratedBy: "go test ./evals/drill"}
	for _, sc := range scs {
		fx, err := st.Drill(ctx, sc, o)
		if err != nil {
			t.Fatalf("%s: %v", sc.RunID, err)
		}
		f := fx[0]
		want := map[bool]string{true: evals.TruthOccurred, false: evals.TruthNone}[sc.Fault.AfterEffect != ""]
		if len(fx) != 1 || len(f.Wall.Operations) != 1 || !strings.Contains(f.Notes, "diff across") {
			t.Fatalf("%s: %d fixtures, wall %+v, notes %q", sc.RunID, len(fx), f.Wall.Operations, f.Notes)
		}
		op := f.Wall.Operations[0]
		if e, ok := evals.Decidable(op); f.Truth[op.OperationID] != want || !ok || e != want {
			t.Errorf("%s: %s truth %s, decidable=%v as %q, want %s; evidence %+v", sc.RunID, op.OperationID, f.Truth[op.OperationID], ok, e, want, op.Evidence)
		}
	}
}
