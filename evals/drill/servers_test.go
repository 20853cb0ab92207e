package drill

import (
	"reflect"
	"strconv"
	"strings"
	"testing"
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
