// Package triage is the scheduled triage of unsettled operations. One
// wall goes from the sweep to its journaled verdict in these steps:
//
//  1. collect (sweep.go): list each project's unsettled operations and
//     group them into piles by run;
//  2. triageRun: take the run's triage lock and read the run in one
//     round trip (operations.TriageLocks.Lock);
//  3. buildWalls (build.go): the pile, minus what the read shows settled,
//     with its evidence (the probes), cut into bounded walls;
//  4. triageWall: the supervisor decides, the decision is validated and
//     put under the settlement policy;
//  5. record (record.go): supervisor.verdict plus one operation.reconciled
//     per operation, journaled in one transaction through the rules an
//     operator's ruling goes through (operations.TriageRun.WriteWall);
//     the run's last wall releases its lock with its commit.
//
// The kernel's operations service owns every statement of that path: the
// lock, the reads and the one-round-trip writes. The wall is the dedup:
// settled operations leave the listing, so a run is triaged again exactly
// while unsettled operations remain, fresh ones included. Two sweeps never
// triage one run at once (the run's lock).
package triage

import (
	"context"
	"errors"
	"fmt"
	"runtime/debug"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/rs/zerolog"

	"github.com/seed-7bc021c3/reckon/kernel"
	"github.com/seed-7bc021c3/reckon/kernel/operations"
	"github.com/seed-7bc021c3/reckon/pipeline"
	"github.com/seed-7bc021c3/reckon/pipeline/probe"
	"github.com/seed-7bc021c3/reckon/pipeline/supervisor"
	"github.com/seed-7bc021c3/reckon/platform/defaults"
)

// Operations is what the sweep needs of the kernel's operations service
// (*operations.Service implements it): the listing of unsettled
// operations, and the runs it triages, locked, read and written through
// the triage store (OpenTriageLocks; ReadRun in a dry run, which takes no
// lock).
type Operations interface {
	Projects(ctx context.Context) ([]string, error)
	List(ctx context.Context, p operations.ListParams) (operations.Page, error)
	OpenTriageLocks(ctx context.Context, n int) (*operations.TriageLocks, error)
	ReadRun(ctx context.Context, project, runID string) (operations.RunRead, error)
	// Backlog feeds the on-call gauges (RefreshBacklog).
	Backlog(ctx context.Context) ([]operations.ProjectBacklog, error)
}

var _ Operations = (*operations.Service)(nil)

// Config tunes a Sweeper. Zero values take the defaults.
type Config struct {
	// Supervisor decides walls; default the built-in supervisor.
	Supervisor pipeline.Supervisor
	// Probes gather evidence for each operation before the supervisor sees it.
	Probes probe.Set
	// SettlePolicy is RECKON_SUPERVISOR_SETTLE, applied to every decision
	// by supervisor.Settle before it is journaled; default evidence.
	SettlePolicy string
	// MaxOpsPerWall and MaxWallBytes bound one wall; an oversized pile is
	// split deterministically into parts. Defaults 50 and 64 KiB.
	MaxOpsPerWall int
	MaxWallBytes  int
	// MaxArgBytes bounds one operation's args in a wall; longer args are
	// replaced by a truncated excerpt. Default 4 KiB.
	MaxArgBytes int
	// MaxEarlierVerdicts bounds the earlier verdicts shown per wall
	// (newest kept). Default 5.
	MaxEarlierVerdicts int
	// MaxWalls and MaxTokens are the per-sweep budget; runs beyond it are
	// left for the next sweep and reported. Defaults 1000 walls, no token
	// bound.
	MaxWalls  int
	MaxTokens int
	// Concurrency bounds runs triaged at once, and so model calls in
	// flight. Default 8.
	Concurrency int
	// WallTimeout bounds one supervisor decision, retries included, so a
	// stuck model cannot hold a run's lock (and a sweep) forever. Default 5m.
	WallTimeout time.Duration
	// LockAttempts bounds the rebuilds of a run's walls when an operator's
	// ruling lands mid-wall. Default 3.
	LockAttempts int
	// Shard, when set, shares the scheduled sweep (SweepParams.Sharded)
	// with the other pipeline processes by leases; nil sweeps every
	// project.
	Shard   *Shard
	Now     func() time.Time
	Log     zerolog.Logger
	Metrics *Metrics
}

func (c Config) withDefaults() Config {
	if c.Supervisor == nil {
		c.Supervisor = supervisor.Builtin{}
	}
	if c.SettlePolicy == "" {
		c.SettlePolicy = supervisor.DefaultSettlePolicy
	}
	c.MaxOpsPerWall = defaults.Positive(c.MaxOpsPerWall, 50)
	c.MaxWallBytes = defaults.Positive(c.MaxWallBytes, 64<<10)
	c.MaxArgBytes = defaults.Positive(c.MaxArgBytes, 4<<10)
	c.MaxEarlierVerdicts = defaults.Positive(c.MaxEarlierVerdicts, 5)
	c.MaxWalls = defaults.Positive(c.MaxWalls, 1000)
	c.Concurrency = defaults.Positive(c.Concurrency, 8)
	c.WallTimeout = defaults.Positive(c.WallTimeout, 5*time.Minute)
	c.LockAttempts = defaults.Positive(c.LockAttempts, 3)
	if c.Now == nil {
		c.Now = time.Now
	}
	if c.Metrics == nil {
		c.Metrics = NewMetrics(nil)
	}
	return c
}

// Sweeper runs sweeps. It is safe for concurrent use; the advisory locks,
// not the process, keep two sweeps off one run.
type Sweeper struct {
	ops Operations
	cfg Config
}

// New returns a Sweeper over the operations service ops.
func New(ops Operations, cfg Config) *Sweeper {
	return &Sweeper{ops: ops, cfg: cfg.withDefaults()}
}

// SweepParams selects what one sweep triages: every project, one project,
// or one run of a project. A scheduled sweep and one asked for take the
// same path and the same locks.
type SweepParams struct {
	Project string // empty: every project with unsettled operations
	RunID   string // empty: every run (requires Project)
	// DryRun builds and decides walls but writes nothing and takes no
	// locks (it still calls the supervisor).
	DryRun bool
	// Sharded sweeps only the projects of the buckets this process holds
	// the leases of (Config.Shard; RunSchedule sets it when configured),
	// claimed as the sweep starts. Ignored with Project.
	Sharded bool
}

// Wall outcomes.
const (
	OutcomeJournaled = "journaled" // verdict and reconciliations enqueued
	OutcomeFailed    = "failed"    // supervisor gave up or output invalid: nothing written
	OutcomeLocked    = "locked"    // another sweep holds the run
	OutcomeSettled   = "settled"   // nothing left to triage when the lock was held
	OutcomeDryRun    = "dry_run"   // decided, not written
	OutcomeBudget    = "budget"    // left for the next sweep
	OutcomeDeferred  = "deferred"  // operations a probe can tell about only later: left for a later sweep
	// OutcomeUnavailable: operations a probe could not reach the evidence
	// of (a workspace it cannot read, a server it cannot reach): left
	// unsettled for the next sweep, never recorded unknown for that.
	OutcomeUnavailable = "unavailable"
)

// WallResult is what happened to one wall (or, for locked, settled,
// budget, deferred and unavailable, to one run; a deferred or unavailable
// result lists the operations left for a later sweep, and an unavailable
// one says in Error what its probes could not reach).
type WallResult struct {
	Project    string             `json:"project"`
	RunID      string             `json:"run_id"`
	Part       int                `json:"part,omitempty"`
	Parts      int                `json:"parts,omitempty"`
	Operations []string           `json:"operations,omitempty"`
	Digest     string             `json:"wall_digest,omitempty"`
	Outcome    string             `json:"outcome"`
	Error      string             `json:"error,omitempty"`
	Supervisor string             `json:"supervisor,omitempty"`
	Model      string             `json:"model,omitempty"`
	Decision   *pipeline.Decision `json:"decision,omitempty"`
	// Wall is the wall itself, kept in dry runs only (what the supervisor
	// was shown).
	Wall       *pipeline.Wall `json:"wall,omitempty"`
	Verdict    *kernel.Event  `json:"verdict,omitempty"`
	Reconciled []kernel.Event `json:"reconciled,omitempty"`
	Duration   time.Duration  `json:"duration_ns"`
}

// Report summarises a sweep.
type Report struct {
	Started  time.Time     `json:"started"`
	Duration time.Duration `json:"duration_ns"`
	Projects int           `json:"projects"`
	// Elsewhere counts the projects a sharded sweep left to the other
	// pipeline processes (SweepParams.Sharded).
	Elsewhere int          `json:"projects_elsewhere,omitempty"`
	Runs      int          `json:"runs"`
	Walls     []WallResult `json:"walls"`
	Journaled int          `json:"journaled"`
	Failed    int          `json:"failed"`
	// Unavailable counts the operations left unsettled because a probe
	// could not reach their evidence (OutcomeUnavailable).
	Unavailable int `json:"unavailable"`
	Tokens      int `json:"tokens"`
	// Degraded says a listing page was degraded (some run's liveness
	// unknown); those operations may be missing from this sweep.
	Degraded bool `json:"degraded"`
	// listed are the unresolved operations the sweep's listing returned,
	// triaged or not (reckon_operations_unresolved).
	listed []listedOp
}

// Count returns how many walls had outcome.
func (r Report) Count(outcome string) int {
	n := 0
	for _, w := range r.Walls {
		if w.Outcome == outcome {
			n++
		}
	}
	return n
}

type runKey struct{ project, runID string }

// runPile is one run's unsettled operations as the sweep's listing saw them.
type runPile struct {
	runKey
	items []operations.Item
}

// Sweep triages once. Failures of single walls are reported in the Report,
// not returned; the error is for a sweep that could not run at all.
func (s *Sweeper) Sweep(ctx context.Context, p SweepParams) (rep Report, err error) {
	start := s.cfg.Now()
	rep = Report{Started: start.UTC()}
	defer func() {
		end := s.cfg.Now()
		rep.Duration = end.Sub(start)
		s.cfg.Metrics.sweeps.Observe(rep.Duration.Seconds())
		if p.Project == "" && !p.DryRun {
			// Every project's, as the schedule sweeps: what the
			// on-call gauges describe.
			s.cfg.Metrics.observeSweep(rep, err, end)
		}
	}()
	runs, err := s.collect(ctx, p, &rep)
	if err != nil {
		return rep, err
	}
	var locks *operations.TriageLocks
	if !p.DryRun && len(runs) > 0 {
		if locks, err = s.ops.OpenTriageLocks(ctx, s.cfg.Concurrency); err != nil {
			return rep, err
		}
		defer locks.Close()
	}
	results, tokens := s.triageRuns(ctx, locks, runs, p.DryRun)
	s.tally(&rep, results)
	rep.Tokens = tokens
	s.logSweep(rep, start, p.DryRun)
	return rep, nil
}

// collect lists the unsettled operations of the params' projects (every
// project with some, when none is named) and groups them into run piles.
func (s *Sweeper) collect(ctx context.Context, p SweepParams, rep *Report) ([]runPile, error) {
	if p.RunID != "" && p.Project == "" {
		return nil, kernel.Errorf(kernel.EInvalid, "triage: field \"project\" is required with \"run_id\"")
	}
	projects := []string{p.Project}
	if p.Project == "" {
		ps, err := s.ops.Projects(ctx)
		if err != nil {
			return nil, fmt.Errorf("triage: projects: %w", err)
		}
		projects = ps
		if p.Sharded && s.cfg.Shard != nil {
			mine, err := s.Claim(ctx)
			if err != nil {
				return nil, err
			}
			projects, rep.Elsewhere = shareOf(projects, mine)
		}
	}
	rep.Projects = len(projects)
	var runs []runPile
	for _, project := range projects {
		piles, degraded, err := s.unsettledRuns(ctx, project, p.RunID, rep)
		if err != nil {
			return nil, err
		}
		rep.Degraded = rep.Degraded || degraded
		runs = append(runs, piles...)
	}
	rep.Runs = len(runs)
	return runs, nil
}

// triageRuns triages the piles, Concurrency at a time, within the
// per-sweep budget, and returns each run's wall results (in pile order)
// and the tokens spent.
func (s *Sweeper) triageRuns(ctx context.Context, locks *operations.TriageLocks, runs []runPile, dry bool) ([][]WallResult, int) {
	var (
		mu     sync.Mutex
		walls  int
		tokens int
		wg     sync.WaitGroup
	)
	results := make([][]WallResult, len(runs))
	sem := make(chan struct{}, s.cfg.Concurrency)
	for i, rk := range runs {
		select {
		case sem <- struct{}{}:
		case <-ctx.Done():
			results[i] = []WallResult{{Project: rk.project, RunID: rk.runID, Outcome: OutcomeBudget, Error: ctx.Err().Error()}}
			continue
		}
		// The budget is checked once a slot is free, so walls finished by
		// then count. Each run reserves its first wall up front; further
		// parts of the same pile are accounted as they go (a pile is never
		// cut off halfway), and tokens can only be counted once spent, so
		// the token bound may be overshot by the walls in flight.
		mu.Lock()
		over := walls >= s.cfg.MaxWalls || (s.cfg.MaxTokens > 0 && tokens >= s.cfg.MaxTokens)
		if !over {
			walls++
		}
		mu.Unlock()
		if over {
			<-sem
			results[i] = []WallResult{{Project: rk.project, RunID: rk.runID, Outcome: OutcomeBudget,
				Error: "per-sweep budget reached; left for the next sweep"}}
			continue
		}
		wg.Add(1)
		go func(i int, rk runPile) {
			defer wg.Done()
			defer func() { <-sem }()
			// A panic in one run's triage (a bug in a supervisor, a probe
			// or the sweep itself, on data an agent shaped) fails that
			// run's walls, logged with its stack, rather than taking the
			// serve or dev process and every other run's walls with it.
			// Nothing of the run is half-written: its wall's transaction
			// and the run's lock go with the connection, which the pool
			// closes as it comes back inside a transaction, or which
			// triageRun's deferred Unlock releases as the panic unwinds.
			defer func() {
				if v := recover(); v != nil {
					// The run's one wall line, as failWall writes it, with
					// the stack.
					r := WallResult{Project: rk.project, RunID: rk.runID, Outcome: OutcomeFailed,
						Error: fmt.Sprintf("triage of run %s/%s panicked: %v; its operations stay unsettled for the next sweep", rk.project, rk.runID, v)}
					s.wallEvent(r).Bytes("stack", debug.Stack()).Msg("triage wall")
					results[i] = []WallResult{r}
				}
			}()
			results[i] = s.triageRun(ctx, locks, rk, dry, func(n, t int) {
				mu.Lock()
				walls += n
				tokens = pipeline.AddTokens(tokens, max(t, 0))
				mu.Unlock()
			})
		}(i, rk)
	}
	wg.Wait()
	return results, tokens
}

// tally adds the wall results to the report and the metrics.
func (s *Sweeper) tally(rep *Report, results [][]WallResult) {
	for _, rs := range results {
		for _, r := range rs {
			s.cfg.Metrics.walls.WithLabelValues(r.Outcome).Inc()
			switch r.Outcome {
			case OutcomeJournaled:
				rep.Journaled++
			case OutcomeFailed:
				rep.Failed++
			case OutcomeUnavailable:
				rep.Unavailable += len(r.Operations)
			}
			rep.Walls = append(rep.Walls, r)
		}
	}
}

// logSweep logs the sweep's figures; an idle scheduled sweep is not news.
func (s *Sweeper) logSweep(rep Report, start time.Time, dry bool) {
	done := s.cfg.Log.Info()
	if rep.Runs == 0 {
		done = s.cfg.Log.Debug()
	}
	done.Int("projects", rep.Projects).Int("runs", rep.Runs).Int("journaled", rep.Journaled).
		Int("failed", rep.Failed).Int("locked", rep.Count(OutcomeLocked)).Int("budget", rep.Count(OutcomeBudget)).
		Int("unavailable", rep.Unavailable).
		Int("tokens", rep.Tokens).Int64("duration_ms", s.cfg.Now().Sub(start).Milliseconds()).Bool("dry_run", dry).Msg("triage sweep done")
}

// unsettledRuns pages through a project's listing once and groups it into
// piles by run, in order of each run's oldest unsettled operation; every
// operation listed goes into rep's listed.
func (s *Sweeper) unsettledRuns(ctx context.Context, project, runID string, rep *Report) ([]runPile, bool, error) {
	items, degraded, err := s.list(ctx, project, runID)
	if err != nil {
		return nil, false, err
	}
	index := map[string]int{}
	var piles []runPile
	for _, it := range items {
		rep.listed = append(rep.listed, listedOp{project: project, runID: it.RunID, operationID: it.OperationID, state: it.State})
		if it.LivenessUnknown {
			// Whether its run still runs is a guess (Temporal did not
			// answer): the operation may yet complete, so it waits for a
			// sweep that knows.
			continue
		}
		i, ok := index[it.RunID]
		if !ok {
			i = len(piles)
			index[it.RunID] = i
			piles = append(piles, runPile{runKey: runKey{project, it.RunID}})
		}
		piles[i].items = append(piles[i].items, it)
	}
	return piles, degraded, nil
}

// maxListPages guards against a pathological listing that never ends.
const maxListPages = 10000

func (s *Sweeper) list(ctx context.Context, project, runID string) ([]operations.Item, bool, error) {
	var out []operations.Item
	degraded := false
	cursor := ""
	for page := 0; page < maxListPages; page++ {
		pg, err := s.ops.List(ctx, operations.ListParams{Project: project, RunID: runID, Cursor: cursor, Limit: operations.MaxLimit})
		if err != nil {
			return nil, false, fmt.Errorf("triage: list %s: %w", project, err)
		}
		out = append(out, pg.Operations...)
		degraded = degraded || pg.Degraded
		if pg.NextCursor == "" {
			break
		}
		cursor = pg.NextCursor
	}
	return out, degraded, nil
}

// errSettledMeanwhile says an operator's ruling landed on an operation of the wall
// while it was being decided; the wall is rebuilt without it.
var errSettledMeanwhile = errors.New("an operation of the wall was settled meanwhile (an operator's ruling, or another reconciliation)")

// triageRun triages one run under its lock. account reports walls started
// and tokens spent to the sweep's budget.
func (s *Sweeper) triageRun(ctx context.Context, locks *operations.TriageLocks, pile runPile, dry bool, account func(walls, tokens int)) []WallResult {
	rk := pile.runKey
	base := WallResult{Project: rk.project, RunID: rk.runID}
	if dry {
		return s.triageLocked(ctx, nil, pipeline.Clock{}, pile, account)
	}
	clock := pipeline.Clock{Before: s.cfg.Now(), Local: s.cfg.Now}
	run, locked, err := locks.Lock(ctx, rk.project, rk.runID)
	clock.After = s.cfg.Now()
	if err != nil {
		return []WallResult{s.failWall(base, err)}
	}
	if !locked {
		r := base
		r.Outcome = OutcomeLocked
		s.logWall(r)
		return []WallResult{r}
	}
	defer run.Unlock(ctx)
	clock.Read = run.Read().ReadAt
	return s.triageLocked(ctx, run, clock, pile, account)
}

// failWall is base failed with err, logged.
func (s *Sweeper) failWall(base WallResult, err error) WallResult {
	r := base
	r.Outcome, r.Error = OutcomeFailed, err.Error()
	s.logWall(r)
	return r
}

// triageLocked builds, decides and records the run's walls under its lock
// (run; nil in a dry run, which takes none and writes nothing), rebuilding
// them when an operator's ruling lands mid-wall. locked is the clock of
// the read taken with the lock.
func (s *Sweeper) triageLocked(ctx context.Context, run *operations.TriageRun, locked pipeline.Clock, pile runPile, account func(walls, tokens int)) []WallResult {
	base := WallResult{Project: pile.project, RunID: pile.runID}
	var results []WallResult
	for attempt := 1; attempt <= s.cfg.LockAttempts; attempt++ {
		read, clock, err := s.readRun(ctx, run, locked, pile.runKey, attempt)
		if err != nil {
			return append(results, s.failWall(base, err))
		}
		walls, left, err := s.buildWalls(ctx, pile, read, clock)
		if err != nil {
			return append(results, s.failWall(base, err))
		}
		if attempt == 1 {
			results = append(results, s.leftOver(base, left)...)
		}
		if len(walls) == 0 {
			if len(results) == 0 {
				r := base
				r.Outcome = OutcomeSettled
				s.logWall(r)
				results = append(results, r)
			}
			return results
		}
		rebuild := false
		for i, w := range walls {
			if i > 0 || attempt > 1 {
				account(1, 0) // the run's first wall was reserved by the sweep
			}
			r := s.triageWall(ctx, w, run, i == len(walls)-1, account)
			if errors.Is(r.err, errSettledMeanwhile) && attempt < s.cfg.LockAttempts {
				s.cfg.Log.Info().Str("project", w.Project).Str("run_id", w.RunID).Msg("an operator settled an operation mid-wall; rebuilding the run's walls")
				rebuild = true
				break
			}
			s.logWall(r.WallResult)
			results = append(results, r.WallResult)
		}
		if !rebuild {
			return results
		}
	}
	return results
}

// readRun is the run as the walls of an attempt are built on, with the
// clock of that read: read when its lock was taken (locked is its clock),
// read again on the lock's connection for a rebuild, and read from the
// pool, without a lock, in a dry run.
func (s *Sweeper) readRun(ctx context.Context, run *operations.TriageRun, locked pipeline.Clock, rk runKey, attempt int) (operations.RunRead, pipeline.Clock, error) {
	if run != nil && attempt == 1 {
		return run.Read(), locked, nil
	}
	clock := pipeline.Clock{Before: s.cfg.Now(), Local: s.cfg.Now}
	var read operations.RunRead
	var err error
	if run == nil {
		read, err = s.ops.ReadRun(ctx, rk.project, rk.runID)
	} else {
		read, err = run.Reread(ctx)
	}
	clock.After, clock.Read = s.cfg.Now(), read.ReadAt
	return read, clock, err
}

// leftOver is the run's results for the operations its walls leave for a
// later sweep, logged: those a probe can tell about only later
// (deferred), and those a probe could not reach the evidence of now
// (unavailable), saying why.
func (s *Sweeper) leftOver(base WallResult, left heldBack) []WallResult {
	var out []WallResult
	if len(left.deferred) > 0 {
		r := base
		r.Outcome, r.Operations = OutcomeDeferred, left.deferred
		out = append(out, r)
	}
	if len(left.unavailable) > 0 {
		r := base
		r.Outcome, r.Operations = OutcomeUnavailable, left.unavailable
		r.Error = "not triaged, left for the next sweep: " + strings.Join(left.why, "; ")
		out = append(out, r)
	}
	for _, r := range out {
		s.logWall(r)
	}
	return out
}

type wallOutcome struct {
	WallResult
	err error
}

// triageWall decides, validates and journals one wall of run, under its
// lock (in a dry run, nil: nothing is journaled). last says it is the
// run's last wall, whose commit releases the lock.
func (s *Sweeper) triageWall(ctx context.Context, w pipeline.Wall, run *operations.TriageRun, last bool, account func(walls, tokens int)) (r wallOutcome) {
	start := s.cfg.Now()
	// r is the named result, so that the deferred duration reaches the
	// caller (set on a local copy, it never did: every wall reported 0).
	r = wallOutcome{WallResult: WallResult{
		Project: w.Project, RunID: w.RunID, Part: w.Part, Parts: w.Parts,
		Operations: w.OperationIDs(), Digest: w.Digest, Supervisor: s.cfg.Supervisor.Name(),
	}}
	defer func() { r.Duration = s.cfg.Now().Sub(start) }()
	fail := func(err error) wallOutcome {
		r.Outcome, r.Error, r.err = OutcomeFailed, err.Error(), err
		return r
	}
	dctx, cancel := context.WithTimeout(ctx, s.cfg.WallTimeout)
	d, err := s.cfg.Supervisor.Decide(dctx, w)
	cancel()
	account(0, d.Usage.Total())
	outcome := "ok"
	if err != nil {
		outcome = "error"
	}
	s.cfg.Metrics.decide.WithLabelValues(s.cfg.Supervisor.Name(), outcome).Observe(s.cfg.Now().Sub(start).Seconds())
	if err != nil {
		return fail(fmt.Errorf("supervisor %s: %w", s.cfg.Supervisor.Name(), err))
	}
	r.Model = d.Model
	if err := supervisor.Validate(w, d); err != nil {
		s.cfg.Metrics.InvalidOutput(s.cfg.Supervisor.Name())
		return fail(err)
	}
	// What is journaled is the decision under the settlement policy: an
	// effect no evidence proves is held as unknown for an operator.
	d = supervisor.Settle(s.cfg.SettlePolicy, w, d)
	r.Decision = &d
	if run == nil {
		r.Outcome, r.Wall = OutcomeDryRun, &w
		return r
	}
	verdict, recs, err := s.record(ctx, run, w, d, last)
	switch {
	case errors.Is(err, errSettledMeanwhile):
		return fail(err)
	case errors.Is(err, operations.ErrWallWritten):
		r.Outcome, r.Decision = OutcomeSettled, nil
		return r
	case err != nil:
		return fail(err)
	}
	r.Outcome, r.Verdict, r.Reconciled = OutcomeJournaled, &verdict, recs
	for _, v := range d.Operations {
		s.cfg.Metrics.verdicts.WithLabelValues(v.Effect, v.Basis).Inc()
	}
	return r
}

func (s *Sweeper) logWall(r WallResult) {
	s.wallEvent(r).Msg("triage wall")
}

// wallEvent is the log event of a wall's one line, without its message.
func (s *Sweeper) wallEvent(r WallResult) *zerolog.Event {
	ev := s.cfg.Log.Info()
	if r.Outcome == OutcomeFailed || r.Outcome == OutcomeUnavailable {
		ev = s.cfg.Log.Warn()
	}
	ev = ev.Str("project", r.Project).Str("run_id", r.RunID).Str("outcome", r.Outcome)
	if r.Parts > 0 {
		ev = ev.Int("part", r.Part).Int("parts", r.Parts).Int("operations", len(r.Operations)).Str("wall_digest", short(r.Digest))
	}
	if r.Outcome == OutcomeDeferred || r.Outcome == OutcomeUnavailable {
		ev = ev.Strs("operations", r.Operations)
	}
	if r.Supervisor != "" {
		ev = ev.Str("supervisor", r.Supervisor)
	}
	if r.Model != "" {
		ev = ev.Str("model", r.Model)
	}
	if d := r.Decision; d != nil {
		counts := map[string]int{}
		for _, v := range d.Operations {
			counts[v.Effect]++
		}
		ev = ev.Bool("needs_attention", d.NeedsAttention).Int("occurred", counts[kernel.EffectOccurred]).
			Int("none", counts[kernel.EffectNone]).Int("unknown", counts[kernel.EffectUnknown])
	}
	if r.Error != "" {
		ev = ev.Str("error", r.Error)
	}
	return ev.Int64("duration_ms", r.Duration.Milliseconds())
}

func short(d string) string {
	if len(d) > 12 {
		return d[:12]
	}
	return d
}

// sortItems orders a pile deterministically: oldest first, then by id.
func sortItems(items []operations.Item) {
	sort.SliceStable(items, func(i, j int) bool {
		if !items[i].StartedAt.Equal(items[j].StartedAt) {
			return items[i].StartedAt.Before(items[j].StartedAt)
		}
		return items[i].OperationID < items[j].OperationID
	})
}
