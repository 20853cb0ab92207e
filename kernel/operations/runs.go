package operations

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/seed-7bc021c3/reckon/kernel"
)

// Run statuses of the runs index (GET /v1/runs), from the journal's
// lifecycle events (migrations/functions/journal_runs_refresh.sql).
const (
	RunRunning = "running"
	// RunAwaiting is a run whose kernel run.awaiting has no run.resumed:
	// it waits for the settlement of an operation.
	RunAwaiting  = "awaiting"
	RunCompleted = "completed"
	RunFailed    = "failed"
)

// RunStatuses lists every status a run of the index may have.
var RunStatuses = []string{RunRunning, RunAwaiting, RunCompleted, RunFailed}

// Run kinds: who records the run's events.
const (
	// RunKindKernel is a run the kernel executes (POST /v1/runs) or a
	// child run one of its delegations started.
	RunKindKernel = "kernel"
	// RunKindGateway is a run of the MCP gateway (an MCP session, or a run
	// id its client named).
	RunKindGateway = "gateway"
	// RunKindAgent is a run an agent reports itself (POST /v1/events).
	RunKindAgent = "agent"
)

// RunSummary is one run as GET /v1/runs lists it.
type RunSummary struct {
	Project string `json:"project"`
	RunID   string `json:"run_id"`
	// Kind is kernel, gateway or agent; SourceID the source of the run's
	// first journaled event.
	Kind     string `json:"kind"`
	SourceID string `json:"source_id"`
	// Status is the journal's: running, awaiting, completed or failed.
	Status string `json:"status"`
	// StartedAt is the time of the run's run.started, or of its first
	// event when it has none; EndedAt that of its newest run.completed
	// or run.failed.
	StartedAt time.Time  `json:"started_at"`
	EndedAt   *time.Time `json:"ended_at"`
	// ParentRunID is the run that started this one (its run.started's
	// parent_run_id, when its id descends from that run's).
	ParentRunID *string `json:"parent_run_id"`
	// ChildRuns counts the runs whose parent this run is (GET
	// /v1/runs?parent_run_id= lists them).
	ChildRuns  int       `json:"child_runs"`
	Operations RunCounts `json:"operations"`
}

// RunCounts counts a run's operations (those with a tool.started), as
// kernel.Replay does: settled when any of their events settles them,
// unresolved otherwise (in flight included).
type RunCounts struct {
	Total      int `json:"total"`
	Unresolved int `json:"unresolved"`
	Settled    int `json:"settled"`
}

// RunsParams selects a page of a project's runs.
type RunsParams struct {
	Project string
	// Status keeps the runs of one status (RunStatuses) when set.
	Status string
	// ParentRunID keeps the child runs of one run when set.
	ParentRunID string
	// Cursor is a RunsPage.NextCursor; empty starts at the newest run.
	Cursor string
	// Limit bounds the page; 0 means DefaultRunsLimit, at most
	// MaxRunsLimit.
	Limit int
}

// RunsPage is one page of runs, newest first (the order the journal first
// saw them).
type RunsPage struct {
	Runs []RunSummary `json:"runs"`
	// NextCursor continues the list; empty on the last page.
	NextCursor string `json:"next_cursor"`
}

// Page sizes of the runs list. A page counts its runs' operations, so its
// cost follows the page's runs, never the journal's history.
const (
	DefaultRunsLimit = 50
	MaxRunsLimit     = 200
)

const runsCursorPrefix = "rn1:"

// Runs returns a page of a project's runs from the runs index
// (journal_runs, migration 00055): newest first, optionally one status's
// or one run's children. Its cost is an index range of the page's size,
// the page's operation counts, and a primary-key probe per run.
func (s *Service) Runs(ctx context.Context, p RunsParams) (RunsPage, error) {
	limit, err := runsLimit(p)
	if err != nil {
		return RunsPage{}, err
	}
	before := int64(math.MaxInt64)
	if p.Cursor != "" {
		if before, err = decodeRunsCursor(p.Cursor); err != nil {
			return RunsPage{}, err
		}
	}
	sql, args := runsQuery(p, before, limit+1)
	rows, err := s.pool.Query(ctx, sql, args...)
	if err != nil {
		return RunsPage{}, fmt.Errorf("runs of %s: %w", p.Project, err)
	}
	runs, listed, err := scanRuns(rows, p.Project)
	if err != nil {
		return RunsPage{}, err
	}
	page := RunsPage{Runs: runs}
	if len(runs) > limit {
		page.Runs = runs[:limit]
		page.NextCursor = kernel.EncodeSeqCursor(runsCursorPrefix, listed[limit-1])
	}
	if err := s.countOperations(ctx, p.Project, page.Runs); err != nil {
		return RunsPage{}, err
	}
	return page, nil
}

// RunSummary returns one run of the runs index, or nil when the journal
// holds no event of it (a kernel run whose first events are still in the
// outbox, say).
func (s *Service) RunSummary(ctx context.Context, project, runID string) (*RunSummary, error) {
	rows, err := s.pool.Query(ctx, runByIDSQL, project, runID)
	if err != nil {
		return nil, fmt.Errorf("run %s of %s: %w", runID, project, err)
	}
	runs, _, err := scanRuns(rows, project)
	if err != nil || len(runs) == 0 {
		return nil, err
	}
	if err := s.countOperations(ctx, project, runs); err != nil {
		return nil, err
	}
	return &runs[0], nil
}

// runsLimit checks a runs page request and returns its limit.
func runsLimit(p RunsParams) (int, error) {
	if p.Project == "" {
		return 0, kernel.Errorf(kernel.EInvalid, "project is required: ?project=<name>")
	}
	if p.Status != "" && !slices.Contains(RunStatuses, p.Status) {
		return 0, kernel.Errorf(kernel.EInvalid, "status must be one of %s, got %q", strings.Join(RunStatuses, ", "), kernel.Abbreviate(p.Status, 64))
	}
	switch {
	case p.Limit == 0:
		return DefaultRunsLimit, nil
	case p.Limit < 0 || p.Limit > MaxRunsLimit:
		return 0, kernel.Errorf(kernel.EInvalid, "limit must be between 1 and %d, got %d", MaxRunsLimit, p.Limit)
	}
	return p.Limit, nil
}

// runsQuery picks the statement of a page: one per index (all runs, one
// status, one run's children), so that each is planned for its own index
// rather than a generic plan reading one index for every filter.
func runsQuery(p RunsParams, before int64, n int) (string, []any) {
	switch {
	case p.ParentRunID != "":
		return runsOfParentSQL, []any{p.Project, before, n, p.ParentRunID, p.Status}
	case p.Status != "":
		return runsOfStatusSQL, []any{p.Project, before, n, p.Status}
	}
	return runsSQL, []any{p.Project, before, n}
}

func decodeRunsCursor(c string) (int64, error) {
	if n, ok := kernel.DecodeSeqCursor(c, runsCursorPrefix); ok {
		return n, nil
	}
	return 0, kernel.Errorf(kernel.EInvalid, "cursor %q is not a next_cursor of GET /v1/runs; pass it unchanged, or start without one", kernel.Abbreviate(c, 64))
}

// scanRuns reads rows of runColumnsSQL; listed is each run's place in
// the list's order.
func scanRuns(rows pgx.Rows, project string) (runs []RunSummary, listed []int64, err error) {
	defer rows.Close()
	runs = []RunSummary{}
	for rows.Next() {
		r := RunSummary{Project: project}
		var n int64
		if err := rows.Scan(&n, &r.RunID, &r.SourceID, &r.Status, &r.StartedAt, &r.EndedAt, &r.ParentRunID, &r.Kind, &r.ChildRuns); err != nil {
			return nil, nil, fmt.Errorf("runs of %s: scan: %w", project, err)
		}
		r.StartedAt = r.StartedAt.UTC()
		if r.EndedAt != nil {
			t := r.EndedAt.UTC()
			r.EndedAt = &t
		}
		runs, listed = append(runs, r), append(listed, n)
	}
	if err := rows.Err(); err != nil {
		return nil, nil, fmt.Errorf("runs of %s: %w", project, err)
	}
	return runs, listed, nil
}

// countOperations fills the operation counts of runs, in one statement
// (runCountsSQL): per run, one pass over its operations' events in the
// journal's operation index.
func (s *Service) countOperations(ctx context.Context, project string, runs []RunSummary) error {
	if len(runs) == 0 {
		return nil
	}
	ids := make([]string, len(runs))
	for i, r := range runs {
		ids[i] = r.RunID
	}
	rows, err := s.pool.Query(ctx, runCountsSQL, project, ids)
	if err != nil {
		return fmt.Errorf("operation counts of runs in %s: %w", project, err)
	}
	defer rows.Close()
	got := map[string]RunCounts{}
	for rows.Next() {
		var id string
		var c RunCounts
		if err := rows.Scan(&id, &c.Total, &c.Settled); err != nil {
			return fmt.Errorf("operation counts of runs in %s: scan: %w", project, err)
		}
		c.Unresolved = c.Total - c.Settled
		got[id] = c
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("operation counts of runs in %s: %w", project, err)
	}
	for i := range runs {
		runs[i].Operations = got[runs[i].RunID]
	}
	return nil
}

// States of a run's operations beyond the listing's unresolved ones.
const (
	// StateInFlight: no settling event, and not unresolved yet (young, its
	// run still running): the listing does not show it.
	StateInFlight = "in_flight"
	// StateSettled: an event settles it (RunOperation.Effect says how).
	StateSettled = "settled"
)

// RunOperation is one operation of a run (GET /v1/runs/{run_id}/operations),
// in whatever state: the listing's item, with State also in_flight or
// settled, and for a settled one its effect and the event that settled it.
type RunOperation struct {
	Item
	// Effect is what the newest settling event says: occurred, none or
	// unknown (kernel.SettledEffect); empty while unsettled.
	Effect string `json:"effect,omitempty"`
	// SettledBy is that event.
	SettledBy *Settlement `json:"settled_by,omitempty"`
}

// Settlement names the event that settled an operation.
type Settlement struct {
	Key   kernel.EventKey `json:"key"`
	Type  string          `json:"type"`
	Actor string          `json:"actor"`
	// Basis is a reconciliation's basis (operator, probe or inference).
	Basis string    `json:"basis,omitempty"`
	TS    time.Time `json:"ts"`
}

// RunOperationsParams selects a page of a run's operations.
type RunOperationsParams struct {
	Project, RunID string
	// Cursor is a RunOperationsPage.NextCursor; empty starts at the run's
	// first operation.
	Cursor string
	// Limit bounds the page; 0 means DefaultLimit, at most MaxLimit.
	Limit int
}

// RunOperationsPage is a page of a run's operations in the order they
// started.
type RunOperationsPage struct {
	Operations []RunOperation `json:"operations"`
	NextCursor string         `json:"next_cursor"`
	// Degraded says the run's liveness could not be established (its
	// unsettled operations carry liveness_unknown), as in the listing.
	Degraded bool `json:"degraded"`
}

const runOpsCursorPrefix = "ro1:"

// RunOperations returns a page of a run's operations, each with its
// state: the listing's rules (classify) for the unsettled ones, whatever
// their age, and the newest settling event for the others. Its cost
// follows the run's events up to the page's end.
func (s *Service) RunOperations(ctx context.Context, p RunOperationsParams) (RunOperationsPage, error) {
	limit, err := pageParams(p.Project, p.Limit)
	if err != nil {
		return RunOperationsPage{}, err
	}
	if p.RunID == "" {
		return RunOperationsPage{}, kernel.Errorf(kernel.EInvalid, "run id is required")
	}
	var after int64
	if p.Cursor != "" {
		if after, err = decodeRunOpsCursor(p.Cursor); err != nil {
			return RunOperationsPage{}, err
		}
	}
	var runSource *string
	var runEnded bool
	if err := s.pool.QueryRow(ctx, runLifecycleSQL, p.Project, p.RunID).Scan(&runSource, &runEnded); err != nil {
		return RunOperationsPage{}, fmt.Errorf("lifecycle of run %s in %s: %w", p.RunID, p.Project, err)
	}
	rows, err := s.pool.Query(ctx, runOperationsSQL, p.Project, p.RunID, after, limit+1)
	if err != nil {
		return RunOperationsPage{}, fmt.Errorf("operations of run %s in %s: %w", p.RunID, p.Project, err)
	}
	found, err := scanRunOperations(rows, p.RunID, runSource, runEnded)
	if err != nil {
		return RunOperationsPage{}, err
	}
	page := RunOperationsPage{}
	if len(found) > limit {
		found = found[:limit]
		page.NextCursor = kernel.EncodeSeqCursor(runOpsCursorPrefix, found[limit-1].c.pos.seq)
	}
	if page.Operations, page.Degraded, err = s.runOperationItems(ctx, p.Project, found); err != nil {
		return RunOperationsPage{}, err
	}
	return page, nil
}

// runOpRow is one row of runOperationsSQL: the operation as the listing's
// candidate, and its newest settling event when it has one.
type runOpRow struct {
	c       candidate
	settled *kernel.Event
	basis   string
}

func scanRunOperations(rows pgx.Rows, runID string, runSource *string, runEnded bool) ([]runOpRow, error) {
	defer rows.Close()
	var out []runOpRow
	for rows.Next() {
		r := runOpRow{c: candidate{runID: runID, runSource: runSource, runEnded: runEnded}}
		var sk struct{ source, event, typ, actor *string }
		var sts *time.Time
		var sdata []byte
		if err := rows.Scan(&r.c.pos.seq, &r.c.key.SourceID, &r.c.key.EventID, &r.c.operationID, &r.c.pos.ts, &r.c.ingestedAt,
			&r.c.data, &r.c.failure, &r.c.failureKey.source, &r.c.failureKey.event,
			&sk.source, &sk.event, &sk.typ, &sk.actor, &sts, &sdata); err != nil {
			return nil, fmt.Errorf("operations of run %s: scan: %w", runID, err)
		}
		r.c.pos.ts = r.c.pos.ts.UTC()
		if sk.source != nil {
			r.settled = &kernel.Event{SourceID: *sk.source, EventID: *sk.event, RunID: runID, Type: *sk.typ, Actor: *sk.actor, TS: sts.UTC(), Data: sdata}
			var d struct {
				Basis string `json:"basis"`
			}
			_ = json.Unmarshal(sdata, &d)
			r.basis = d.Basis
		}
		out = append(out, r)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("operations of run %s: %w", runID, err)
	}
	return out, nil
}

// runOperationItems turns the rows into items: a settled operation says
// what settled it; an unsettled one is classified as the listing does
// (one liveness call at most: the rows are one run's).
func (s *Service) runOperationItems(ctx context.Context, project string, rows []runOpRow) ([]RunOperation, bool, error) {
	now := s.now()
	lv := &listingLiveness{s: s, known: map[string]livenessAnswer{}, budget: s.cfg.LivenessCalls}
	var open []candidate
	for _, r := range rows {
		if r.settled == nil {
			open = append(open, r.c)
		}
	}
	lv.resolve(ctx, project, open)
	out := make([]RunOperation, 0, len(rows))
	items := make([]Item, 0, len(rows))
	for _, r := range rows {
		op, err := s.runOperation(r, project, now, lv)
		if err != nil {
			return nil, false, err
		}
		out = append(out, op)
		items = append(items, op.Item)
	}
	if err := s.childSummaries(ctx, project, items); err != nil {
		return nil, false, err
	}
	for i := range out {
		out[i].ChildSummary = items[i].ChildSummary
	}
	return out, lv.degraded, nil
}

// runOperation is one row as a RunOperation: what settled it, or the
// listing's state (in_flight where the listing would not show it yet).
func (s *Service) runOperation(r runOpRow, project string, now time.Time, lv *listingLiveness) (RunOperation, error) {
	if e := r.settled; e != nil {
		it, err := itemOf(r.c, project)
		if err != nil {
			return RunOperation{}, err
		}
		it.State = StateSettled
		return RunOperation{Item: it, Effect: kernel.SettledEffect(*e),
			SettledBy: &Settlement{Key: e.Key(), Type: e.Type, Actor: e.Actor, Basis: r.basis, TS: e.TS}}, nil
	}
	it, listed, err := s.classify(r.c, project, now, lv)
	if !listed {
		it.State = StateInFlight
	}
	return RunOperation{Item: it}, err
}

func decodeRunOpsCursor(c string) (int64, error) {
	if n, ok := kernel.DecodeSeqCursor(c, runOpsCursorPrefix); ok {
		return n, nil
	}
	return 0, kernel.Errorf(kernel.EInvalid, "cursor %q is not a next_cursor of GET /v1/runs/{run_id}/operations; pass it unchanged, or start without one", kernel.Abbreviate(c, 64))
}
