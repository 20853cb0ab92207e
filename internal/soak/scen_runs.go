package soak

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/seed-7bc021c3/reckon/kernel"
)

// opRef names an operation of a run.
type opRef struct{ run, op string }

func (r opRef) String() string { return r.run + "/" + r.op }

// kill is one SIGKILL of the worker (and of dev with it).
type kill struct {
	at       time.Time
	kind     string  // "worker" or "worker+api"
	inflight []opRef // commands running at the kill
	back     time.Time
}

// runSet tracks the runs of a scenario: what was started, which
// operations the listing showed when, and the kills.
type runSet struct {
	s        *soak
	project  string
	steps    int
	mu       sync.Mutex
	runs     []string
	refusals int // start attempts that failed and were retried
	listedAt map[opRef]time.Time
	kills    []*kill
}

func newRunSet(s *soak, project string, steps int) *runSet {
	return &runSet{s: s, project: project, steps: steps, listedAt: map[opRef]time.Time{}}
}

// plan is a run whose every step appends a unique token: "B <token>" to
// begin.txt when the command begins and "<token>" to tokens.txt when its
// effect lands. A token twice in either file is a command that ran twice.
func plan(runID string, steps int) json.RawMessage {
	var ss []map[string]any
	for j := 1; j <= steps; j++ {
		tok := token(runID, j)
		ss = append(ss, map[string]any{"tool": "run_command", "args": map[string]any{
			"command":   fmt.Sprintf("echo 'B %s' >> begin.txt; sleep 0.4; echo '%s' >> tokens.txt; sleep 0.2", tok, tok),
			"timeout_s": 30,
		}})
	}
	b, _ := json.Marshal(map[string]any{"steps": ss})
	return b
}

func token(runID string, step int) string { return fmt.Sprintf("%s-s%d", runID, step) }

// tokenOp is the operation that writes tok (step n is op-n: no re-issue).
func tokenOp(tok string) opRef {
	i := strings.LastIndex(tok, "-s")
	return opRef{run: tok[:i], op: "op-" + tok[i+2:]}
}

// start starts a run, retrying until the API acknowledges it (the same
// plan under the same id is idempotent).
func (rs *runSet) start(ctx context.Context, runID string) error {
	deadline := time.Now().Add(3 * time.Minute)
	for {
		err := rs.s.api.startRun(ctx, rs.project, runID, plan(runID, rs.steps))
		switch {
		case err == nil:
			rs.mu.Lock()
			rs.runs = append(rs.runs, runID)
			rs.mu.Unlock()
			return nil
		case refused(err):
			return fmt.Errorf("start run %s: %w", runID, err)
		case time.Now().After(deadline) || ctx.Err() != nil:
			return fmt.Errorf("start run %s: not acknowledged within 3 minutes: %w", runID, err)
		}
		rs.mu.Lock()
		rs.refusals++
		rs.mu.Unlock()
		sleep(ctx, 200*time.Millisecond)
	}
}

// workspace is a run's workspace directory.
func (rs *runSet) workspace(runID string) string {
	return filepath.Join(rs.s.dataDir(), "workspaces", rs.project, runID)
}

// lines counts the lines of a workspace file.
func (rs *runSet) lines(runID, file string) map[string]int {
	b, _ := os.ReadFile(filepath.Join(rs.workspace(runID), file))
	n := map[string]int{}
	for _, l := range strings.Split(string(b), "\n") {
		if l = strings.TrimSpace(l); l != "" {
			n[strings.TrimPrefix(l, "B ")]++
		}
	}
	return n
}

// midCommand lists the operations of runs whose command began and has not
// written its token (at step minStep or later).
func (rs *runSet) midCommand(runs []string, minStep int) []opRef {
	var out []opRef
	for _, r := range runs {
		done := rs.lines(r, "tokens.txt")
		for tok := range rs.lines(r, "begin.txt") {
			if o := tokenOp(tok); done[tok] == 0 && tokenStep(tok) >= minStep {
				out = append(out, o)
			}
		}
	}
	return out
}

func tokenStep(tok string) int {
	n, _ := strconv.Atoi(tok[strings.LastIndex(tok, "-s")+2:])
	return n
}

// unfinished lists the operations of runs whose command began and whose
// end the worker has not recorded yet (no tool.completed or tool.failed in
// the outbox), leaving out those counted at an earlier kill: the
// operations a kill now catches in flight.
func (rs *runSet) unfinished(ctx context.Context, runs []string) ([]opRef, error) {
	ended := map[opRef]bool{}
	rows, err := rs.s.pool.Query(ctx, `SELECT event->>'run_id', event->'data'->>'operation_id' FROM kernel_event_outbox
		WHERE event->>'project' = $1 AND event->>'run_id' = ANY($2) AND event->>'type' IN ('tool.completed', 'tool.failed')`, rs.project, runs)
	if err != nil {
		return nil, fmt.Errorf("read the outbox: %w", err)
	}
	for rows.Next() {
		var o opRef
		if err := rows.Scan(&o.run, &o.op); err != nil {
			rows.Close()
			return nil, err
		}
		ended[o] = true
	}
	rows.Close()
	seen := map[opRef]bool{}
	rs.mu.Lock()
	for _, k := range rs.kills {
		for _, o := range k.inflight {
			seen[o] = true
		}
	}
	rs.mu.Unlock()
	var out []opRef
	for _, r := range runs {
		for tok := range rs.lines(r, "begin.txt") {
			if o := tokenOp(tok); !ended[o] && !seen[o] {
				out = append(out, o)
			}
		}
	}
	return out, rows.Err()
}

// waitVisible waits until every operation of ops is listed or recorded
// completed, and says whether that happened within timeout.
func (rs *runSet) waitVisible(ctx context.Context, ops []opRef, timeout time.Duration) bool {
	deadline := time.Now().Add(timeout)
	for ctx.Err() == nil && time.Now().Before(deadline) {
		completed := map[opRef]bool{}
		rows, err := rs.s.pool.Query(ctx, `SELECT event->>'run_id', event->'data'->>'operation_id' FROM kernel_event_outbox
			WHERE event->>'project' = $1 AND event->>'type' = 'tool.completed'`, rs.project)
		if err == nil {
			for rows.Next() {
				var o opRef
				if rows.Scan(&o.run, &o.op) == nil {
					completed[o] = true
				}
			}
			rows.Close()
		}
		rs.mu.Lock()
		all := true
		for _, o := range ops {
			if _, listed := rs.listedAt[o]; !listed && !completed[o] {
				all = false
			}
		}
		rs.mu.Unlock()
		if all {
			return true
		}
		sleep(ctx, 100*time.Millisecond)
	}
	return false
}

// watchListing polls the operations listing until ctx ends and notes when
// each operation first shows up.
func (rs *runSet) watchListing(ctx context.Context) {
	for ctx.Err() == nil {
		lctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		ops, err := rs.s.api.listing(lctx, rs.project)
		cancel()
		if err == nil {
			now := time.Now()
			rs.mu.Lock()
			for _, o := range ops {
				r := opRef{o.RunID, o.OperationID}
				if _, ok := rs.listedAt[r]; !ok {
					rs.listedAt[r] = now
				}
			}
			rs.mu.Unlock()
		}
		sleep(ctx, 250*time.Millisecond)
	}
}

// runKill: runs of three run_command steps each; in every round two new
// runs start and, while a command runs, the worker is SIGKILLed — alone in
// odd rounds, together with dev (API, publisher, embedded Temporal) in
// even ones — and restarted.
func (s *soak) runKill(ctx context.Context, sc *Scenario, budget time.Time) error {
	sc.RecoveryMeans = "from SIGKILL of the worker to every command it was running showing in GET /v1/agent/operations"
	if err := s.st.startDev(ctx); err != nil {
		return err
	}
	if err := s.st.startWorker(ctx); err != nil {
		return err
	}
	rs := newRunSet(s, "soak-runs", 3)
	wctx, stopWatch := context.WithCancel(ctx)
	var watch sync.WaitGroup
	watch.Add(1)
	go func() { defer watch.Done(); rs.watchListing(wctx) }()
	defer func() { stopWatch(); watch.Wait() }()

	var err error
	for round := 1; round <= s.o.Rounds && err == nil; round++ {
		if time.Now().After(budget) {
			sc.figure("rounds_cut_by_time_limit", s.o.Rounds-round+1)
			break
		}
		// The previous kill's operations become visible before the next
		// kill, so each death-to-listed time measures one death, not a
		// worker killed again while it recovered the last one's work.
		if n := len(rs.kills); n > 0 && !rs.waitVisible(ctx, rs.kills[n-1].inflight, time.Minute) {
			sc.problem("round %d: the operations in flight at the previous kill were neither listed nor completed a minute later", round)
		}
		ids := []string{fmt.Sprintf("k%03d-a", round), fmt.Sprintf("k%03d-b", round)}
		for _, id := range ids {
			if err = rs.start(ctx, id); err != nil {
				break
			}
		}
		if err != nil {
			break
		}
		// Kill while a command of a random step runs, a random moment
		// after it began: before its effect, after it, or after the
		// command ended but before the worker recorded it.
		step := 1 + rand.N(rs.steps)
		deadline := time.Now().Add(90 * time.Second)
		for len(rs.midCommand(ids, step)) == 0 && ctx.Err() == nil {
			if time.Now().After(deadline) {
				err = fmt.Errorf("round %d: no command of step %d of runs %v began within 90 s", round, step, ids)
				break
			}
			sleep(ctx, 20*time.Millisecond)
		}
		if err != nil || ctx.Err() != nil {
			break
		}
		sleep(ctx, rand.N(700*time.Millisecond))
		k := &kill{kind: "worker"}
		if round%2 == 0 {
			k.kind = "worker+api"
		}
		if k.inflight, err = rs.unfinished(ctx, ids); err != nil {
			break
		}
		k.at = time.Now()
		s.st.killWorker()
		if k.kind == "worker+api" {
			s.st.killDev()
			if err = s.st.startDev(ctx); err != nil {
				break
			}
		}
		if err = s.st.startWorker(ctx); err != nil {
			break
		}
		k.back = time.Now()
		rs.mu.Lock()
		rs.kills = append(rs.kills, k)
		rs.mu.Unlock()
		sc.Rounds++
		s.progress("%s round %d/%d: SIGKILL %s with %d command(s) running; stack back in %.1f s",
			sc.Name, round, s.o.Rounds, k.kind, len(k.inflight), k.back.Sub(k.at).Seconds())
	}
	if err != nil {
		sc.problem("%v", err)
	}
	return s.settleRuns(ctx, sc, rs)
}

// settleRuns waits for every run to end and the outbox to drain, then
// checks the runs and measures kill-to-listed times.
func (s *soak) settleRuns(ctx context.Context, sc *Scenario, rs *runSet) error {
	if ctx.Err() != nil {
		return ctx.Err() // interrupted: nothing to conclude
	}
	if err := s.ensureStack(ctx); err != nil {
		return err
	}
	if s.st.worker == nil || s.st.worker.exited() {
		if err := s.st.startWorker(ctx); err != nil {
			return err
		}
	}
	s.progress("%s: waiting for %d runs to end and the outbox to drain", sc.Name, len(rs.runs))
	open := s.waitRunsEnded(ctx, rs, 5*time.Minute)
	for _, r := range open {
		sc.problem("run %s still running 5 minutes after the last fault", r)
	}
	checkOutbox(ctx, s.pool, sc, rs.project, 2*time.Minute)
	s.checkRuns(ctx, sc, rs)
	// Every run has ended, so nothing may still run in its workspace.
	// A sandbox a killed worker left behind is reported and killed, not
	// failed on: it is a leak, not a lost or repeated effect.
	if n := s.ps.killOrphans(s.dataDir()); n > 0 {
		s.progress("%s: WARNING: %d process(es) of killed workers' tool calls outlived them (killed now)", sc.Name, n)
		sc.figure("orphaned_tool_processes", n)
	}
	return nil
}

// waitRunsEnded waits until no run is running and returns those that are.
func (s *soak) waitRunsEnded(ctx context.Context, rs *runSet, timeout time.Duration) []string {
	deadline := time.Now().Add(timeout)
	rs.mu.Lock()
	pending := append([]string(nil), rs.runs...)
	rs.mu.Unlock()
	for len(pending) > 0 && time.Now().Before(deadline) && ctx.Err() == nil {
		var still []string
		for _, r := range pending {
			v, err := s.api.run(ctx, rs.project, r)
			if err != nil || v.Status == "running" {
				still = append(still, r)
			}
		}
		pending = still
		if len(pending) > 0 {
			sleep(ctx, time.Second)
		}
	}
	return pending
}

// checkOutbox waits until the project's outbox rows are delivered, then
// counts parked rows (every payload of the soak is consistent, so a parked
// row is a spurious conflict) and delivered rows the journal lacks (lost).
func checkOutbox(ctx context.Context, pool *pgxpool.Pool, sc *Scenario, project string, timeout time.Duration) {
	deadline := time.Now().Add(timeout)
	var pending, parked, total int64
	for {
		err := pool.QueryRow(ctx, `SELECT count(*) FILTER (WHERE id IN (SELECT id FROM kernel_event_outbox_undelivered)),
			count(*) FILTER (WHERE parked_at IS NOT NULL), count(*)
			FROM kernel_event_outbox WHERE event->>'project' = $1`, project).Scan(&pending, &parked, &total)
		if err == nil && pending == 0 {
			break
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			sc.problem("outbox of %s not drained: %d rows undelivered after %s (%v)", project, pending, timeout, err)
			sc.Lost += pending
			break
		}
		sleep(ctx, 200*time.Millisecond)
	}
	if parked > 0 {
		sc.SpuriousConflicts += parked
		var reason string
		_ = pool.QueryRow(ctx, `SELECT park_reason FROM kernel_event_outbox WHERE parked_at IS NOT NULL AND event->>'project' = $1 LIMIT 1`, project).Scan(&reason)
		sc.problem("%d outbox row(s) parked, e.g. %s", parked, reason)
	}
	var missing int64
	if err := pool.QueryRow(ctx, `SELECT count(*) FROM kernel_event_outbox o
		WHERE o.event->>'project' = $1 AND o.parked_at IS NULL
		AND NOT EXISTS (SELECT 1 FROM kernel_event_outbox_undelivered u WHERE u.id = o.id)
		AND NOT EXISTS (SELECT 1 FROM journal_keys j WHERE j.source_id = o.source_id AND j.event_id = o.event_id)`, project).Scan(&missing); err != nil {
		sc.problem("compare outbox and journal: %v", err)
	}
	if missing > 0 {
		sc.Lost += missing
		sc.problem("%d outbox row(s) marked delivered but not in the journal", missing)
	}
	sc.figure("outbox_rows", total)
}

// checkTokens checks a run's workspace: a command that began twice or
// wrote its token twice ran twice (re-executed); an operation journaled
// completed whose token is missing lost its effect.
func checkTokens(sc *Scenario, note func(string, ...any), runID string, steps int, begins, toks map[string]int, completed map[opRef]bool) {
	for j := 1; j <= steps; j++ {
		tok := token(runID, j)
		if begins[tok] > 1 || toks[tok] > 1 {
			sc.ReExecuted++
			note("command %s ran %d times (token written %d times)", tok, begins[tok], toks[tok])
		}
		if completed[tokenOp(tok)] && toks[tok] == 0 {
			sc.Lost++
			note("operation %s completed but its token is not in the workspace", tokenOp(tok))
		}
	}
}

// checkRuns checks every run from outside: its events (GET /v1/runs), the
// listing and its workspace.
func (s *soak) checkRuns(ctx context.Context, sc *Scenario, rs *runSet) {
	listed := map[opRef]bool{}
	ops, err := s.api.listing(ctx, rs.project)
	if err != nil {
		sc.problem("final listing: %v", err)
	}
	now := time.Now()
	rs.mu.Lock()
	for _, o := range ops {
		r := opRef{o.RunID, o.OperationID}
		listed[r] = true
		if _, ok := rs.listedAt[r]; !ok {
			rs.listedAt[r] = now
		}
	}
	runs := append([]string(nil), rs.runs...)
	rs.mu.Unlock()
	sc.Acknowledged += int64(len(runs))

	var nOps, nCompleted, nListed int
	statuses := map[string]int{}
	completed := map[opRef]bool{}
	note := func(format string, args ...any) {
		if len(sc.Problems) < 40 {
			sc.problem(format, args...)
		}
	}
	for _, r := range runs {
		var v runView
		var err error
		for attempt := 0; attempt < 10; attempt++ {
			if v, err = s.api.run(ctx, rs.project, r); err == nil {
				break
			}
			sleep(ctx, 500*time.Millisecond)
		}
		if err != nil {
			note("run %s: %v", r, err)
			continue
		}
		statuses[v.Status]++
		count := map[string]int{}
		started := map[string]bool{}
		for _, ev := range v.Events {
			op := ev.OperationID()
			count[ev.Type+" "+op]++
			switch ev.Type {
			case kernel.TypeToolStarted:
				started[op] = true
			case kernel.TypeToolCompleted:
				completed[opRef{r, op}] = true
			}
		}
		for k, c := range count {
			if c > 1 {
				sc.Duplicated += int64(c - 1)
				note("run %s: %q journaled %d times", r, k, c)
			}
		}
		if count[kernel.TypeRunStarted+" "] == 0 {
			sc.Lost++
			note("run %s was acknowledged but never journaled run.started", r)
		}
		for op := range started {
			nOps++
			ref := opRef{r, op}
			switch {
			case completed[ref]:
				nCompleted++
			case listed[ref]:
				nListed++
			default:
				sc.Lost++
				note("operation %s is neither completed nor listed", ref)
			}
		}
		checkTokens(sc, note, r, rs.steps, rs.lines(r, "begin.txt"), rs.lines(r, "tokens.txt"), completed)
	}
	sc.figure("runs", statuses)
	sc.figure("operations", map[string]int{"total": nOps, "completed": nCompleted, "listed": nListed})

	// Kill → listed.
	rs.mu.Lock()
	defer rs.mu.Unlock()
	if len(rs.kills) == 0 {
		return
	}
	var byKind = map[string]*Distribution{"worker": {}, "worker+api": {}}
	var inflight, raced int
	for _, k := range rs.kills {
		worst := k.back.Sub(k.at)
		for _, o := range k.inflight {
			inflight++
			at, ok := rs.listedAt[o]
			switch {
			case ok:
				d := at.Sub(k.at)
				byKind[k.kind].add(d)
				s.rep.WorkerDeathToListed.add(d)
				worst = max(worst, d)
			case completed[o]:
				raced++ // the worker had reported it before it died
			}
		}
		sc.Recovery.add(worst)
	}
	sc.figure("commands_in_flight_at_kills", inflight)
	sc.figure("in_flight_that_completed_after_all", raced)
	sc.figure("death_to_listed_worker_alone", byKind["worker"])
	sc.figure("death_to_listed_worker_and_api", byKind["worker+api"])
	if len(s.rep.WorkerDeathToListed.Samples) > 0 {
		d := s.rep.WorkerDeathToListed
		s.progress("%s: worker death → operation listed: p50 %.1f s, max %.1f s over %d commands", sc.Name, d.P50, d.Max, d.Count)
	}
}
