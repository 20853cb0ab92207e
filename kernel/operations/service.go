package operations

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/seed-7bc021c3/reckon/kernel"
	"github.com/seed-7bc021c3/reckon/kernel/journal"
	"github.com/seed-7bc021c3/reckon/platform/defaults"
)

// Defaults of Config.
const (
	DefaultWindow        = 168 * time.Hour
	DefaultStaleAfter    = 10 * time.Minute
	DefaultLivenessCalls = 64
)

// Config configures a Service.
type Config struct {
	// Window bounds the listing (RECKON_OPERATIONS_WINDOW): a tool.started
	// whose ts and ingested_at are both older than now-Window is not
	// listed (Service.window). It is also the
	// span within which the same reconcile body is answered idempotently.
	Window time.Duration
	// StaleAfter is the in-flight age that makes stale_in_flight
	// (RECKON_STALE_AFTER).
	StaleAfter time.Duration
	// Liveness answers for the kernel's own runs (run.started under source
	// "kernel"), normally a TemporalLiveness. Nil reads the journal for every
	// run.
	Liveness Liveness
	// LivenessCalls bounds the Liveness calls of one listing; runs beyond it
	// are treated as liveness unknown (and the page is degraded).
	LivenessCalls int
	// Now is the clock; nil means time.Now.
	Now func() time.Time
	// Metrics receives listing and reconcile figures; nil keeps them
	// unregistered.
	Metrics *Metrics
}

// Service is the operations projection and the reconciliation path.
type Service struct {
	pool    *pgxpool.Pool
	journal *journal.Store
	cfg     Config
}

// New returns a Service over the journal in pool.
func New(pool *pgxpool.Pool, opts Config) *Service {
	opts.Window = defaults.Positive(opts.Window, DefaultWindow)
	opts.StaleAfter = defaults.Positive(opts.StaleAfter, DefaultStaleAfter)
	opts.LivenessCalls = defaults.Positive(opts.LivenessCalls, DefaultLivenessCalls)
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.Metrics == nil {
		opts.Metrics = NewMetrics(nil)
	}
	return &Service{pool: pool, journal: journal.New(pool, nil), cfg: opts}
}

func (s *Service) now() time.Time { return s.cfg.Now().UTC() }

// ingestSlack lowers Service.window's floor for what lies between POST
// /v1/events' check of a tool.started's ts (the API process's clock,
// before the write) and the ingested_at the journal gives it (PostgreSQL's
// now() when the write's transaction starts): the wait for the request's
// run locks and group commit, and any drift between the two clocks. An hour of open
// operations more in the index range is nothing next to a window's; an
// event that took longer than that to reach the journal leaves the
// listing earlier than its ingested_at would say, by the excess.
const ingestSlack = time.Hour

// window returns, for a listing at now, the window start (a tool.started
// is inside when its ts or its ingested_at is at or after it) and the
// floor of ts from which listSQL and projectsSQL read the open-operations
// index. The floor is one window and ingestSlack before the start: ingest
// refuses an agent's tool.started dated more than one window before it
// is taken (httpapi.Config.OperationsWindow), so a tool.started ingested
// inside the window is dated after the floor, and
// the index range stays two windows of open operations however long the
// journal's history. A row ingested inside the window but dated before the
// floor (taken before that rule, or by a process whose window was wider)
// is not listed once its ts has left the window, as before ingested_at
// counted; that is accepted, not an oversight.
func (s *Service) window(now time.Time) (since, floor time.Time) {
	since = now.Add(-s.cfg.Window)
	return since, since.Add(-s.cfg.Window - ingestSlack)
}

// maxRounds bounds the queries of one listing call when many candidates are
// hidden (young operations of running runs); the page then ends early with
// a cursor, never with an unbounded walk.
const maxRounds = 8

// candidate is one open tool.started row with what the listing needs.
type candidate struct {
	pos position
	// ingestedAt is when the journal took the tool.started (its clock).
	ingestedAt  time.Time
	key         kernel.EventKey
	runID       string
	operationID string
	data        []byte
	failure     []byte
	failureKey  struct{ source, event *string }
	runSource   *string
	runEnded    bool
}

// List returns a page of the project's unresolved operations, oldest first.
func (s *Service) List(ctx context.Context, p ListParams) (Page, error) {
	start := time.Now()
	page, err := s.list(ctx, p)
	// A malformed request is the caller's mistake, not a listing.
	if kernel.ErrorCode(err) != kernel.EInvalid {
		s.cfg.Metrics.observeList(time.Since(start).Seconds(), page, err)
	}
	return page, err
}

func (s *Service) list(ctx context.Context, p ListParams) (Page, error) {
	limit, err := pageParams(p.Project, p.Limit)
	if err != nil {
		return Page{}, err
	}
	now := s.now()
	since, floor := s.window(now)
	// Pages are ordered by (ts, seq) from the floor: a tool.started inside
	// the window by its ingested_at may be dated before since.
	start := position{ts: floor, seq: 0}
	if p.Cursor != "" {
		c, err := decodeCursor(p.Cursor)
		if err != nil {
			return Page{}, err
		}
		start = position{ts: c.ts, seq: c.seq + 1}
	}

	lv := &listingLiveness{s: s, known: map[string]livenessAnswer{}, budget: s.cfg.LivenessCalls}
	page := Page{Operations: []Item{}}
	for round := 0; round < maxRounds; round++ {
		need := limit - len(page.Operations)
		cands, err := s.fetch(ctx, p.Project, p.RunID, since, floor, start, need+1)
		if err != nil {
			return Page{}, err
		}
		more := len(cands) > need
		if more {
			cands = cands[:need]
		}
		lv.resolve(ctx, p.Project, cands)
		var last position
		for _, c := range cands {
			last = c.pos
			it, ok, err := s.classify(c, p.Project, now, lv)
			if err != nil {
				return Page{}, err
			}
			if ok {
				page.Operations = append(page.Operations, it)
			}
		}
		if !more {
			break
		}
		start = position{ts: last.ts, seq: last.seq + 1}
		if len(page.Operations) == limit || round == maxRounds-1 {
			page.NextCursor = encodeCursor(last)
			break
		}
	}
	page.Degraded = lv.degraded
	if err := s.childSummaries(ctx, p.Project, page.Operations); err != nil {
		return Page{}, err
	}
	return page, nil
}

// pageParams checks a page request's project and limit, and returns the
// limit to use (DefaultLimit for 0).
func pageParams(project string, limit int) (int, error) {
	if project == "" {
		return 0, kernel.Errorf(kernel.EInvalid, "project is required: ?project=<name>")
	}
	if limit == 0 {
		return DefaultLimit, nil
	}
	if limit < 0 || limit > MaxLimit {
		return 0, kernel.Errorf(kernel.EInvalid, "limit must be between 1 and %d, got %d", MaxLimit, limit)
	}
	return limit, nil
}

func (s *Service) fetch(ctx context.Context, project, runID string, since, floor time.Time, start position, n int) ([]candidate, error) {
	rows, err := s.pool.Query(ctx, listSQL, project, since, runID, start.ts, start.seq, n, floor)
	if err != nil {
		return nil, fmt.Errorf("list operations of %s: %w", project, err)
	}
	defer rows.Close()
	var out []candidate
	for rows.Next() {
		var c candidate
		if err := rows.Scan(&c.pos.seq, &c.key.SourceID, &c.key.EventID, &c.runID, &c.operationID,
			&c.pos.ts, &c.ingestedAt, &c.data, &c.failure, &c.failureKey.source, &c.failureKey.event, &c.runSource, &c.runEnded); err != nil {
			return nil, fmt.Errorf("list operations of %s: scan: %w", project, err)
		}
		c.pos.ts = c.pos.ts.UTC()
		out = append(out, c)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list operations of %s: %w", project, err)
	}
	return out, nil
}

// classify turns a candidate into an item, and says whether it is
// unresolved: not when it is a young operation of a running run (its
// State is then empty).
func (s *Service) classify(c candidate, project string, now time.Time, lv *listingLiveness) (Item, bool, error) {
	it, err := itemOf(c, project)
	if err != nil {
		return Item{}, false, err
	}
	if c.failure != nil {
		it.State = StateFailedUncertain
		return it, true, nil
	}
	running, known := lv.running(c)
	switch {
	case known && !running:
		it.State = StateCrashWindow
	case now.Sub(c.startedNoLaterThan()) >= s.cfg.StaleAfter:
		it.State = StateStaleInFlight
		it.LivenessUnknown = !known
	}
	return it, it.State != "", nil
}

// itemOf is c's item without a state: the call, its newest failure and
// the child run of a delegation.
func itemOf(c candidate, project string) (Item, error) {
	var d kernel.ToolStarted
	if err := json.Unmarshal(c.data, &d); err != nil {
		return Item{}, fmt.Errorf("tool.started %s: decode data: %w", c.key, err)
	}
	it := Item{
		Project: project, RunID: c.runID, OperationID: c.operationID, Tool: d.Tool,
		StartedAt: c.pos.ts, StartedKey: c.key, Args: nonNull(d.Args),
		ReissueOf: d.ReissueOf, Postcondition: nonNull(d.Postcondition),
		Server: d.Server, UpstreamTool: d.UpstreamTool, ServerEndpoint: d.ServerEndpoint,
	}
	if n := len(it.Args); n > MaxListedArgsBytes {
		it.Args, it.ArgsTruncated, it.ArgsBytes = nil, true, n
	}
	if c.failure != nil {
		var f kernel.ToolFailed
		if err := json.Unmarshal(c.failure, &f); err != nil {
			return Item{}, fmt.Errorf("tool.failed of %s: decode data: %w", c.key, err)
		}
		it.Failure = &f
		if c.failureKey.source != nil && c.failureKey.event != nil {
			it.FailureKey = &kernel.EventKey{SourceID: *c.failureKey.source, EventID: *c.failureKey.event}
		}
		it.ChildRunID = f.ChildRunID
		it.ChildSummary = f.ChildSummary()
	}
	if it.ChildRunID == "" && it.Tool == kernel.DelegateTool {
		it.ChildRunID = kernel.ChildRunID(c.runID, c.operationID)
	}
	return it, nil
}

// startedNoLaterThan is when the operation had started at the latest: its
// ts, or when the journal took the tool.started if that was earlier. An
// agent dates its own events and may date one up to kernel.MaxTSAhead in
// the future; by ts alone its operation would stay "young" and hidden for
// that long after it was reported.
func (c candidate) startedNoLaterThan() time.Time {
	if !c.ingestedAt.IsZero() && c.ingestedAt.Before(c.pos.ts) {
		return c.ingestedAt
	}
	return c.pos.ts
}

func nonNull(raw json.RawMessage) json.RawMessage {
	if len(raw) == 0 || string(raw) == "null" {
		return nil
	}
	return raw
}

// childSummaries fills the child counts of delegations whose failure did not
// carry them, from the child runs' own events, in one query for the page (a
// child run without any tool.started counts 0 and 0). childSummarySQL
// counts as kernel.Replay does; TestChildSummarySQLMatchesReplay holds the
// two together. It counts only the events of the delegation's own source
// (and reckon's reconciliations): another writer's events in the child
// run are no part of the delegation.
func (s *Service) childSummaries(ctx context.Context, project string, items []Item) error {
	var runs, sources []string
	for _, it := range items {
		if it.ChildRunID != "" && it.ChildSummary == nil {
			runs, sources = append(runs, it.ChildRunID), append(sources, it.StartedKey.SourceID)
		}
	}
	if len(runs) == 0 {
		return nil
	}
	type child struct{ run, source string }
	got := make(map[child]kernel.ChildSummary, len(runs))
	rows, err := s.pool.Query(ctx, childSummarySQL, project, runs, sources)
	if err != nil {
		return fmt.Errorf("child summaries in %s: %w", project, err)
	}
	defer rows.Close()
	for rows.Next() {
		var k child
		var c kernel.ChildSummary
		if err := rows.Scan(&k.run, &k.source, &c.Total, &c.Unresolved, &c.None, &c.Unknown); err != nil {
			return fmt.Errorf("child summaries in %s: scan: %w", project, err)
		}
		got[k] = c
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("child summaries in %s: %w", project, err)
	}
	for i := range items {
		it := &items[i]
		if it.ChildRunID == "" || it.ChildSummary != nil {
			continue
		}
		c := got[child{it.ChildRunID, it.StartedKey.SourceID}]
		it.ChildSummary = &c
	}
	return nil
}

// Projects returns the projects that have open operations inside the window
// (by ts or ingested_at, as the listing; the sweep iterates these).
func (s *Service) Projects(ctx context.Context) ([]string, error) {
	since, floor := s.window(s.now())
	rows, err := s.pool.Query(ctx, projectsSQL, since, floor)
	if err != nil {
		return nil, fmt.Errorf("projects with open operations: %w", err)
	}
	defer rows.Close()
	out := []string{}
	for rows.Next() {
		var p string
		if err := rows.Scan(&p); err != nil {
			return nil, fmt.Errorf("projects with open operations: %w", err)
		}
		out = append(out, p)
	}
	return out, rows.Err()
}

// MaxKnownProjects bounds one page of KnownProjects.
const MaxKnownProjects = 1000

// ProjectsParams selects a page of KnownProjects: the projects after
// After (the previous page's last), starting with Prefix, at most Limit
// (0 means MaxKnownProjects).
type ProjectsParams struct {
	After, Prefix string
	Limit         int
}

// ProjectsPage is a page of projects in name order; Next, when not empty,
// is the After of the next page.
type ProjectsPage struct {
	Projects []string
	Next     string
}

// KnownProjects returns a page of the projects that have any event in the
// journal, sorted by name. Unlike Projects it is not bounded by the window
// nor by open operations: a project whose operations the supervisor has
// all settled as unknown has nothing open, yet its operator's queue is
// full. Its cost follows the page's size (a skip scan of an index), not
// the number of events.
func (s *Service) KnownProjects(ctx context.Context, p ProjectsParams) (ProjectsPage, error) {
	limit := p.Limit
	if limit <= 0 || limit > MaxKnownProjects {
		limit = MaxKnownProjects
	}
	from, inclusive := p.After, false
	if p.Prefix > from {
		from, inclusive = p.Prefix, true
	}
	rows, err := s.pool.Query(ctx, knownProjectsSQL, from, inclusive, p.Prefix, limit+1)
	if err != nil {
		return ProjectsPage{}, fmt.Errorf("known projects: %w", err)
	}
	out, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return ProjectsPage{}, fmt.Errorf("known projects: %w", err)
	}
	return PageOfProjects(out, limit), nil
}

// PageOfProjects cuts names (sorted, at most one past limit) to a page.
func PageOfProjects(names []string, limit int) ProjectsPage {
	if len(names) > limit {
		return ProjectsPage{Projects: names[:limit], Next: names[limit-1]}
	}
	if names == nil {
		names = []string{}
	}
	return ProjectsPage{Projects: names}
}

// livenessAnswer is one run's liveness within a listing.
type livenessAnswer struct {
	running, known bool
}

// listingLiveness resolves run liveness for one listing: journal answers
// for external runs, at most budget Liveness calls for kernel runs, errors
// turned into "unknown" and a degraded page.
type listingLiveness struct {
	s        *Service
	known    map[string]livenessAnswer
	budget   int
	degraded bool
	failing  bool
}

// kernelRun reports whether c's run is the kernel's own: its run.started
// is under the kernel's source or, while that event has not reached the
// journal, its tool.started is.
func kernelRun(c candidate) bool {
	if c.runSource != nil {
		return *c.runSource == kernel.SourceKernel
	}
	return c.key.SourceID == kernel.SourceKernel
}

// needsCall reports whether c's run is a kernel run whose liveness only the
// Liveness can tell.
func (l *listingLiveness) needsCall(c candidate) bool {
	return c.failure == nil && !c.runEnded && l.s.cfg.Liveness != nil && kernelRun(c)
}

// livenessConcurrency bounds parallel Liveness calls of one listing.
const livenessConcurrency = 4

func (l *listingLiveness) resolve(ctx context.Context, project string, cands []candidate) {
	var runs []string
	seen := map[string]bool{}
	for _, c := range cands {
		if !l.needsCall(c) || seen[c.runID] {
			continue
		}
		if _, done := l.known[c.runID]; done {
			continue
		}
		seen[c.runID] = true
		runs = append(runs, c.runID)
	}
	budget := l.budget
	if l.failing {
		budget = 0
	}
	if len(runs) > budget {
		for _, r := range runs[budget:] {
			l.known[r] = livenessAnswer{}
			l.degraded = true
		}
		runs = runs[:budget]
	}
	l.budget -= len(runs)
	answers := make([]livenessAnswer, len(runs))
	sem := make(chan struct{}, livenessConcurrency)
	var wg sync.WaitGroup
	var failing atomic.Bool
	for i, r := range runs {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer func() { <-sem; wg.Done() }()
			// Once one call failed, Temporal is taken to be down for the
			// rest of this listing: an outage costs one call timeout, not
			// one per run.
			if failing.Load() {
				return
			}
			running, err := l.s.cfg.Liveness.Running(ctx, project, r)
			answers[i] = livenessAnswer{running: running, known: err == nil}
			if err != nil {
				failing.Store(true)
			}
		}()
	}
	wg.Wait()
	l.failing = l.failing || failing.Load()
	for i, r := range runs {
		l.known[r] = answers[i]
		if !answers[i].known {
			l.degraded = true
		}
	}
}

// running answers c's run liveness: known=false when it could not be
// established.
func (l *listingLiveness) running(c candidate) (running, known bool) {
	if c.runEnded {
		return false, true
	}
	if l.needsCall(c) {
		a := l.known[c.runID]
		return a.running, a.known
	}
	if c.runSource == nil {
		// No run.started in the journal: nothing says the run started, so
		// nothing says it stopped either. Never claim a crash on that.
		return false, false
	}
	return true, true
}
