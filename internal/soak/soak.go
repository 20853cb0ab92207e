// Package soak is reckon's own fault soak: it runs the real binary as
// separate processes on a private PostgreSQL cluster, kills them with
// SIGKILL, crashes and stops the database, kills triage sweeps mid-way,
// and then proves from outside (the HTTP API, the journal, the run
// workspaces) that nothing acknowledged was lost, nothing was written
// twice, nothing conflicted spuriously and no tool call ran twice.
// `reckon soak` (cmd/reckon/soak.go) and `make soak` run it.
package soak

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/seed-7bc021c3/reckon/platform/config"
	"github.com/seed-7bc021c3/reckon/platform/defaults"
)

// Scenario names, in the order they run.
const (
	ScenarioIngestKill = "ingest-kill"
	ScenarioPGRestart  = "pg-restart"
	ScenarioRunKill    = "run-kill"
	ScenarioOutage     = "publisher-outage"
	ScenarioTriageKill = "triage-kill"
)

// Scenarios lists every scenario in running order.
var Scenarios = []string{ScenarioIngestKill, ScenarioPGRestart, ScenarioRunKill, ScenarioOutage, ScenarioTriageKill}

// Defaults of Options.
const (
	DefaultRounds     = 30
	DefaultTimeout    = 20 * time.Minute
	DefaultOutage     = 30 * time.Second
	DefaultIngestRate = 4000
)

// Options configure a soak.
type Options struct {
	// Binary is the reckon binary the soak runs as child processes
	// (normally its own executable); BinaryEnv is added to their
	// environment.
	Binary    string
	BinaryEnv []string
	// Rounds is the number of faults per kill scenario (ingest-kill,
	// run-kill, triage-kill); pg-restart does a fifth of it (at least 2),
	// publisher-outage one outage.
	Rounds int
	// Timeout bounds the whole soak: scenarios stop injecting faults when
	// their share of it is spent, and the soak fails if its checks are
	// not done by Timeout plus a grace.
	Timeout time.Duration
	// Outage is how long the database stays down under the publisher.
	Outage time.Duration
	// IngestRate paces the load generator (events/s; 0: as fast as the
	// API answers).
	IngestRate int
	// OutDir receives the JSON report, the child processes' logs and the
	// private data directory.
	OutDir string
	// PGBin is the directory of initdb/pg_ctl/postgres; empty: searched.
	PGBin string
	// Only runs these scenarios (empty: all).
	Only []string
	// KeepData keeps the private data directory (Temporal's SQLite file,
	// the run workspaces) of a passing soak too.
	KeepData bool
	// Command is recorded in the report.
	Command string
	// Progress receives one line per round and phase.
	Progress io.Writer
}

// soak is one run of the soak.
type soak struct {
	o        Options
	rep      *Report
	cluster  *Cluster
	pool     *pgxpool.Pool // the private database, for the checks
	ps       *procs
	api      *client
	st       *stack
	agent    string // the agent token's name (its events' source_id)
	faultEnd time.Time
	started  time.Time
}

// ReportFile is the report's file name in OutDir.
const ReportFile = "soak-report.json"

// Run runs the soak and writes its report to OutDir. The error is for a
// soak that could not run at all (no PostgreSQL binaries, a child that
// never started); a soak that ran and found problems returns its report
// with Passed false.
func Run(ctx context.Context, o Options) (*Report, error) {
	if err := o.defaults(); err != nil {
		return nil, err
	}
	s := &soak{o: o, started: time.Now()}
	s.rep = &Report{Command: o.Command, Started: s.started.UTC(), Rounds: o.Rounds,
		TimeoutSeconds: o.Timeout.Seconds(), OutageSeconds: o.Outage.Seconds(), CPUs: runtime.NumCPU(),
		HeartbeatS: config.DefaultToolHeartbeatTimeout.Seconds(), Problems: []string{}}
	// Checks may run past the fault budget; the grace bounds them.
	ctx, cancel := context.WithDeadline(ctx, s.started.Add(o.Timeout+5*time.Minute))
	defer cancel()
	// The last fifth of the time limit is kept for the final checks.
	s.faultEnd = s.started.Add(o.Timeout * 4 / 5)

	err := s.setUp(ctx)
	defer s.tearDown()
	if err != nil {
		return nil, err
	}
	for _, name := range Scenarios {
		if len(o.Only) > 0 && !slices.Contains(o.Only, name) {
			continue
		}
		sc := &Scenario{Name: name, Proves: proves[name]}
		s.rep.Scenarios = append(s.rep.Scenarios, sc)
		start := time.Now()
		s.progress("%s: %s", name, sc.Proves)
		if err := s.scenario(ctx, name, sc); err != nil {
			sc.problem("%v", err)
			s.progress("%s: stopped: %v", name, err)
		}
		sc.Seconds = roundS(time.Since(start))
		rec := ""
		if sc.Recovery.Count > 0 {
			rec = fmt.Sprintf(", max recovery %.1f s", sc.Recovery.Max)
		}
		s.progress("%s: done in %.0f s: rounds %d, acknowledged %d, lost %d, duplicated %d, spurious conflicts %d, re-executed %d%s%s",
			name, sc.Seconds, sc.Rounds, sc.Acknowledged, sc.Lost, sc.Duplicated, sc.SpuriousConflicts, sc.ReExecuted, rec, problemsNote(sc))
		if ctx.Err() != nil {
			s.rep.Aborted = fmt.Sprintf("stopped during %s: %v", name, context.Cause(ctx))
			break
		}
	}
	s.finish()
	return s.rep, nil
}

var proves = map[string]string{
	ScenarioIngestKill: "ingest under kill -9 of reckon dev: every acknowledged key is in the journal exactly once, a resend of everything answers repeated",
	ScenarioPGRestart:  "PostgreSQL immediate restarts under ingest: the service recovers without a restart; unavailability per restart",
	ScenarioRunKill:    "runs under kill -9 of the worker (alone, and with the API): no command runs twice, every operation in flight ends completed or listed, the outbox drains",
	ScenarioOutage:     "the database down under the publisher while runs enqueue: delivery resumes by itself, nothing parked",
	ScenarioTriageKill: "reckon triage killed mid-sweep: no operation with two verdicts, no verdict without its reconciliations or the reverse",
}

func problemsNote(sc *Scenario) string {
	if len(sc.Problems) == 0 {
		return ""
	}
	return fmt.Sprintf(", %d problem(s): %s", len(sc.Problems), strings.Join(sc.Problems, "; "))
}

func (o *Options) defaults() error {
	if o.Binary == "" {
		return errors.New("soak: no reckon binary to run")
	}
	o.Rounds = defaults.Positive(o.Rounds, DefaultRounds)
	o.Timeout = defaults.Positive(o.Timeout, DefaultTimeout)
	o.Outage = defaults.Positive(o.Outage, DefaultOutage)
	if o.Progress == nil {
		o.Progress = io.Discard
	}
	for _, n := range o.Only {
		if !slices.Contains(Scenarios, n) {
			return fmt.Errorf("unknown scenario %q (scenarios: %s)", n, strings.Join(Scenarios, ", "))
		}
	}
	if o.OutDir == "" {
		return errors.New("soak: no output directory")
	}
	return nil
}

func (s *soak) progress(format string, args ...any) {
	el := time.Since(s.started).Round(time.Second)
	fmt.Fprintf(s.o.Progress, "soak %6s  %s\n", el, fmt.Sprintf(format, args...))
}

// setUp creates the private cluster and database and the environment of
// the child processes.
func (s *soak) setUp(ctx context.Context) error {
	for _, d := range []string{s.o.OutDir, filepath.Join(s.o.OutDir, "logs"), s.dataDir()} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return fmt.Errorf("soak output %s: %w", d, err)
		}
	}
	bin, err := FindPGBin(s.o.PGBin)
	if err != nil {
		return err
	}
	for _, d := range DropStaleClusters(bin) {
		s.progress("dropped a private cluster a killed soak left behind: %s", d)
	}
	if s.cluster, err = NewCluster(ctx, bin); err != nil {
		return err
	}
	if err := s.cluster.Start(ctx); err != nil {
		return err
	}
	if out, err := exec.Command(filepath.Join(bin, "postgres"), "--version").Output(); err == nil {
		s.rep.PostgreSQL = strings.TrimSpace(string(out))
	}
	s.progress("private PostgreSQL cluster on 127.0.0.1:%d (%s), data in %s", s.cluster.Port, s.rep.PostgreSQL, s.cluster.Root)
	if err := createDatabase(ctx, s.cluster.URL("postgres"), "reckon"); err != nil {
		return err
	}
	if s.pool, err = pgxpool.New(ctx, s.cluster.URL("reckon")); err != nil {
		return fmt.Errorf("soak: connect to the private cluster: %w", err)
	}

	apiPort, err := freePort()
	if err != nil {
		return err
	}
	s.agent = "soak-agent"
	agentSecret, opSecret := secret(), secret()
	s.api = &client{
		base: fmt.Sprintf("http://127.0.0.1:%d", apiPort), agent: agentSecret, operator: opSecret,
		http: &http.Client{Timeout: 30 * time.Second},
	}
	env := []string{
		"DATABASE_URL=" + s.cluster.URL("reckon"),
		"RECKON_DATA_DIR=" + s.dataDir(),
		fmt.Sprintf("RECKON_HTTP_ADDR=127.0.0.1:%d", apiPort),
		fmt.Sprintf("RECKON_TOKENS=%s:agent:%s,soak-operator:operator:%s", s.agent, agentSecret, opSecret),
		"RECKON_LOG_FORMAT=json", "RECKON_LOG_LEVEL=warn",
		// No scheduled sweep: the triage scenario runs its own, and a
		// sweep would settle the operations the run scenarios check.
		"RECKON_TRIAGE_SCHEDULE=@every 8760h",
	}
	// The heartbeat timeout is the one setting of the caller the soak
	// keeps: the worker-death-to-listed figure is measured under it.
	if v := os.Getenv("RECKON_TOOL_HEARTBEAT_TIMEOUT"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil {
			return fmt.Errorf("RECKON_TOOL_HEARTBEAT_TIMEOUT is not a Go duration: %q", v)
		}
		s.rep.HeartbeatS = d.Seconds()
		env = append(env, "RECKON_TOOL_HEARTBEAT_TIMEOUT="+v)
	}
	s.rep.Sandbox = "bubblewrap"
	if _, err := exec.LookPath("bwrap"); err != nil {
		s.rep.Sandbox = "unconfined"
		env = append(env, "RECKON_SANDBOX_UNCONFINED=1")
		s.progress("bubblewrap is not installed (make deps installs it): run_command runs unconfined in this soak")
	}
	s.ps = &procs{bin: s.o.Binary, env: append(append(childEnv(), s.o.BinaryEnv...), env...), logDir: filepath.Join(s.o.OutDir, "logs")}
	s.st = &stack{ps: s.ps, api: s.api}
	return nil
}

// childEnv is the soak's environment without reckon's configuration, so
// nothing of the caller's setup (a production DATABASE_URL, fault
// injection, a model endpoint) reaches the children.
func childEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		if (strings.HasPrefix(k, "RECKON_") && !strings.HasPrefix(k, "RECKON_TEST_")) || strings.HasPrefix(k, "TEMPORAL_") || strings.HasPrefix(k, "KERNEL_FAULT_") ||
			k == "DATABASE_URL" || strings.HasPrefix(k, "PG") {
			continue
		}
		env = append(env, kv)
	}
	return env
}

func (s *soak) dataDir() string { return filepath.Join(s.o.OutDir, "data") }

// tearDown ends every child, drops the private cluster (keeping its log)
// and removes the private data directory when the soak passed.
func (s *soak) tearDown() {
	if s.st != nil {
		s.st.stop()
	}
	if s.ps != nil {
		s.ps.killAll()
		s.ps.killOrphans(s.dataDir())
	}
	if s.pool != nil {
		s.pool.Close()
	}
	if s.cluster != nil {
		if err := s.cluster.Drop(filepath.Join(s.o.OutDir, "postgres.log")); err != nil {
			s.progress("dropping the private cluster %s: %v", s.cluster.Root, err)
		} else {
			s.progress("private PostgreSQL cluster dropped")
		}
	}
	if s.rep != nil && s.rep.Passed && !s.o.KeepData {
		_ = os.RemoveAll(s.dataDir())
	}
}

// finish totals the report and writes it.
func (s *soak) finish() {
	s.rep.Finished = time.Now().UTC()
	s.rep.Seconds = roundS(time.Since(s.started))
	s.rep.total()
}

// WriteReport writes the report as JSON to OutDir and returns its path.
func WriteReport(r *Report, outDir string) (string, error) {
	path := filepath.Join(outDir, ReportFile)
	b, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return "", err
	}
	return path, os.WriteFile(path, append(b, '\n'), 0o644)
}

// scenario runs one scenario on a fresh stack and stops the stack after.
func (s *soak) scenario(ctx context.Context, name string, sc *Scenario) error {
	defer s.st.stop()
	budget := s.budget(name)
	switch name {
	case ScenarioIngestKill:
		return s.ingestKill(ctx, sc, budget)
	case ScenarioPGRestart:
		return s.pgRestart(ctx, sc, budget)
	case ScenarioRunKill:
		return s.runKill(ctx, sc, budget)
	case ScenarioOutage:
		return s.outage(ctx, sc)
	case ScenarioTriageKill:
		return s.triageKill(ctx, sc, budget)
	}
	return fmt.Errorf("unknown scenario %q", name)
}

// weights share the fault budget among the scenarios still to run, in
// proportion to what a default round costs each (run-kill waits for the
// heartbeat timeout after every kill).
var weights = map[string]float64{
	ScenarioIngestKill: 2.5, ScenarioPGRestart: 0.7, ScenarioRunKill: 6, ScenarioOutage: 1.2, ScenarioTriageKill: 1.2,
}

// budget is the time until which scenario name may inject faults: its
// weighted share of what is left of the fault budget.
func (s *soak) budget(name string) time.Time {
	left := time.Until(s.faultEnd)
	if left <= 0 {
		return time.Now()
	}
	var total float64
	seen := false
	for _, n := range Scenarios {
		if n == name {
			seen = true
		}
		if seen && (len(s.o.Only) == 0 || slices.Contains(s.o.Only, n)) {
			total += weights[n]
		}
	}
	return time.Now().Add(time.Duration(float64(left) * weights[name] / total))
}

// pgRounds is the number of immediate restarts for rounds.
func pgRounds(rounds int) int { return max(2, rounds/5) }

func roundS(d time.Duration) float64 {
	return float64(d.Round(100*time.Millisecond)) / float64(time.Second)
}

func secret() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// createDatabase creates db on the cluster at adminURL unless it exists.
func createDatabase(ctx context.Context, adminURL, db string) error {
	conn, err := pgx.Connect(ctx, adminURL)
	if err != nil {
		return fmt.Errorf("soak: connect to the private cluster: %w", err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, "CREATE DATABASE "+pgx.Identifier{db}.Sanitize()); err != nil && !strings.Contains(err.Error(), "already exists") {
		return fmt.Errorf("soak: create database %s: %w", db, err)
	}
	return nil
}
