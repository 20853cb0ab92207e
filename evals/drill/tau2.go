package drill

import (
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/seed-7bc021c3/reckon/evals"
	"github.com/seed-7bc021c3/reckon/internal/tau2"
	"github.com/seed-7bc021c3/reckon/tool/mcptool"
)

// Tau2Server names the tau2 retail server in a drill stack.
const Tau2Server = "retail"

// Tau2KindPrefix starts the scenario kind of a tau2-retail drill:
// tau2_<write tool>_<after|before>.
const Tau2KindPrefix = "tau2_"

// Tau2Suite is the tau2-bench retail data a tau2-retail drill replays:
// the database and the tasks' reference actions.
type Tau2Suite struct {
	// Dir holds db.json and tasks.json.
	Dir   string
	DB    *tau2.DB
	Tasks []Tau2Task
}

// Tau2Task is one task's reference actions.
type Tau2Task struct {
	ID      string
	Actions []Tau2Action
}

// Tau2Action is one reference tool call.
type Tau2Action struct {
	Name      string         `json:"name"`
	Arguments map[string]any `json:"arguments"`
}

// Tau2Case is what a tau2-retail scenario replays: the task's actions
// that succeed on the database, up to and including the faulted write.
type Tau2Case struct {
	Task  string
	Steps []Tau2Action
}

// LoadTau2 reads dir/db.json and dir/tasks.json; the error says where the
// data comes from when it is missing.
func LoadTau2(dir string) (*Tau2Suite, error) {
	db, err := tau2.Load(filepath.Join(dir, "db.json"))
	if errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("--data %s: no db.json: the tau2-bench retail data (sierra-research/tau2-bench, data/tau2/domains/retail: db.json and tasks.json) is not there; docs/evals.md#tau2-retail", dir)
	}
	if err != nil {
		return nil, err
	}
	b, err := os.ReadFile(filepath.Join(dir, "tasks.json"))
	if err != nil {
		return nil, fmt.Errorf("--data %s: %w", dir, err)
	}
	var raw []struct {
		ID string `json:"id"`
		EC *struct {
			Actions []Tau2Action `json:"actions"`
		} `json:"evaluation_criteria"`
	}
	if err := json.Unmarshal(b, &raw); err != nil {
		return nil, fmt.Errorf("--data %s: tasks.json: %w", dir, err)
	}
	s := &Tau2Suite{Dir: dir, DB: db}
	for _, t := range raw {
		if t.EC != nil {
			s.Tasks = append(s.Tasks, Tau2Task{ID: t.ID, Actions: t.EC.Actions})
		}
	}
	return s, nil
}

// cases lists every (task, write) pair: the task's actions that succeed
// when replayed on the database in order (a reference lookup meant to
// fail is left out), cut after each successful write.
func (s *Tau2Suite) cases() []Tau2Case {
	var out []Tau2Case
	for _, t := range s.Tasks {
		db := s.DB.Clone()
		var ok []Tau2Action
		for _, a := range t.Actions {
			if _, err := db.Call(a.Name, a.Arguments); err != nil {
				continue
			}
			ok = append(ok, a)
			if tau2.IsWrite(a.Name) {
				out = append(out, Tau2Case{Task: t.ID, Steps: append([]Tau2Action(nil), ok...)})
			}
		}
	}
	return out
}

// Generate returns count tau2-retail scenarios from seed: (task, write)
// pairs drawn in a seeded shuffle, each replaying the task's reference
// actions up to the write with a fault after or before it (seeded).
func (s *Tau2Suite) Generate(seed uint64, count int) []Scenario {
	r := rand.New(rand.NewPCG(seed, seed^0x7f4a7c159e3779b9))
	all := s.cases()
	var out []Scenario
	var deck []Tau2Case
	for i := 0; i < count && len(all) > 0; i++ {
		if len(deck) == 0 {
			deck = append([]Tau2Case(nil), all...)
			r.Shuffle(len(deck), func(a, b int) { deck[a], deck[b] = deck[b], deck[a] })
		}
		c := deck[0]
		deck = deck[1:]
		after := r.IntN(2) == 0
		write := c.Steps[len(c.Steps)-1].Name
		when := map[bool]string{true: "after", false: "before"}[after]
		sc := Scenario{Index: i, Kind: Tau2KindPrefix + write + "_" + when, Tau2: &c}
		sc.RunID = fmt.Sprintf("t%d-%03d-task%s-%s", seed, i, c.Task, strings.ReplaceAll(write, "_", "-"))
		for _, a := range c.Steps {
			sc.Plan.Steps = append(sc.Plan.Steps, Step{Tool: "mcp__" + Tau2Server + "__" + a.Name, Args: a.Arguments})
		}
		id := fmt.Sprintf("op-%d", len(c.Steps))
		sc.faultAt(id, after)
		sc.Notes = fmt.Sprintf("tau2-bench retail task %s: its reference actions up to %s (%s), fault %s the effect", c.Task, write, id, when)
		out = append(out, sc)
	}
	return out
}

// tau2Server serves the retail tools over streamable HTTP, one database
// per run: <dataDir>/tau2/<run_id>.json, copied from the suite's db.json
// at the run's first call. The URL's query takes {run_id}, which the
// kernel's and the probe's clients fill in.
func (st *Stack) tau2Server(dataDir string, s *Tau2Suite) (mcptool.ServerConfig, error) {
	dir := filepath.Join(dataDir, "tau2")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return mcptool.ServerConfig{}, fmt.Errorf("drill: tau2 databases: %w", err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return mcptool.ServerConfig{}, fmt.Errorf("drill: listen for the tau2 server: %w", err)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/tau2/mcp", func(w http.ResponseWriter, r *http.Request) {
		// Tool discovery names no run: it gets a database of its own.
		run := r.URL.Query().Get("run")
		if run == "" {
			run = "_discovery"
		}
		if strings.ContainsAny(run, `/\`) || strings.HasPrefix(run, ".") {
			http.Error(w, "bad run", http.StatusBadRequest)
			return
		}
		store := tau2.Store{Path: filepath.Join(dir, run+".json"), Init: filepath.Join(s.Dir, "db.json")}
		// Stateless: every request gets the run's server anew.
		mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return tau2.NewServer(store) }, &mcp.StreamableHTTPOptions{Stateless: true}).ServeHTTP(w, r)
	})
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	st.http = append(st.http, srv)
	st.wg.Add(1)
	go func() {
		defer st.wg.Done()
		_ = srv.Serve(ln)
	}()
	st.tau2Dir, st.tau2 = dir, s
	return mcptool.ServerConfig{Name: Tau2Server, URL: "http://" + ln.Addr().String() + "/tau2/mcp?run={run_id}", Exclusive: true,
		Probes: &mcptool.ProbeSpec{Builtin: "tau2-retail"}}, nil
}

// tau2Truth is the faulted write's truth from the database's own diff:
// the run's database after the run against the suite's database with the
// case's earlier actions replayed. It must agree with the fault
// injector's record, or the drill fails.
func (st *Stack) tau2Truth(sc Scenario, f *evals.Fixture) error {
	c := sc.Tau2
	op := fmt.Sprintf("op-%d", len(c.Steps))
	want := st.tau2.DB.Clone()
	for _, a := range c.Steps[:len(c.Steps)-1] {
		if _, err := want.Call(a.Name, a.Arguments); err != nil {
			return fmt.Errorf("run %s: replaying %s: %w", sc.RunID, a.Name, err)
		}
	}
	got, err := tau2.Load(filepath.Join(st.tau2Dir, sc.RunID+".json"))
	if err != nil {
		return fmt.Errorf("run %s: its database: %w", sc.RunID, err)
	}
	diff := "none"
	if !got.Equal(want) {
		diff = "occurred"
	}
	return agreeTruth(sc.RunID, op, "database", diff, f)
}
