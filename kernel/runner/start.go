package runner

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"

	"github.com/seed-7bc021c3/reckon/kernel"
	"github.com/seed-7bc021c3/reckon/kernel/journal"
	"github.com/seed-7bc021c3/reckon/kernel/plan"
)

// Starter starts runs idempotently and reports their state.
type Starter struct {
	Pool      *pgxpool.Pool
	Journal   *journal.Store
	Client    client.Client
	TaskQueue string
	// DataDir holds workspaces: <DataDir>/workspaces/<project>/<run_id>.
	DataDir string
	// Tools validates plans at the boundary.
	Tools    ToolSet
	Timeouts Timeouts
	// AgentModel is RECKON_AGENT_MODEL, the model of agent runs that name
	// none; empty refuses agent runs (RECKON_AGENT_BASE_URL unset).
	AgentModel string
}

// StartParams starts a run: the body of POST /v1/runs.
type StartParams struct {
	Project string `json:"project"`
	RunID   string `json:"run_id,omitempty"`
	Plan    Plan   `json:"plan"`
	// Agent, instead of Plan, runs a model-driven agent (AgentWorkflow).
	Agent *Agent `json:"agent,omitempty"`
}

// ErrAgentUnconfigured is the message of an agent run refused because the
// process has no agent model.
const ErrAgentUnconfigured = "agent: agent runs need a model: set RECKON_AGENT_BASE_URL and RECKON_AGENT_MODEL (and RECKON_AGENT_API_KEY when the endpoint needs one), see docs/agents.md"

// validate checks the run's plan or agent against the starter's tools.
func (s *Starter) validate(req StartParams) error {
	if req.Agent == nil {
		return req.Plan.Validate(s.Tools)
	}
	if len(req.Plan.Steps) > 0 {
		return kernel.Errorf(kernel.EInvalid, "plan: a run carries a plan or an agent, not both")
	}
	if s.AgentModel == "" {
		return kernel.Errorf(kernel.EInvalid, "%s", ErrAgentUnconfigured)
	}
	return req.Agent.Validate(s.Tools)
}

// Workspace is the absolute workspace directory of a run.
func (s *Starter) Workspace(project, runID string) (string, error) {
	abs, err := filepath.Abs(filepath.Join(s.DataDir, "workspaces", project, runID))
	if err != nil {
		return "", fmt.Errorf("workspace of %s/%s: %w", project, runID, err)
	}
	return abs, nil
}

// NewRunID returns a fresh run id for a start request that chose none.
func NewRunID() string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return "run-" + hex.EncodeToString(b[:])
}

// Start validates the request and starts its run, unless a run with this id
// exists: the same plan again returns it (created=false), a different plan
// is an EConflict. A start interrupted between recording the run and
// starting its workflow is completed by the next identical request.
func (s *Starter) Start(ctx context.Context, req StartParams) (runID string, created bool, err error) {
	if err := kernel.ValidateID("project", req.Project); err != nil {
		return "", false, err
	}
	if req.RunID == "" {
		req.RunID = NewRunID()
	}
	if err := kernel.ValidateID("run_id", req.RunID); err != nil {
		return "", false, err
	}
	if strings.Contains(req.RunID, kernel.ChildSeparator) {
		return "", false, kernel.Errorf(kernel.EInvalid,
			"run_id: must not contain %q, which the kernel reserves for child runs (<run_id>%s<operation_id>), got %q", kernel.ChildSeparator, kernel.ChildSeparator, req.RunID)
	}
	if err := s.validate(req); err != nil {
		return "", false, err
	}
	return s.start(ctx, req)
}

// StartUnchecked starts a run without validating its plan, for tests and
// drills that need a plan the API would reject (a step that fails
// validation at execution).
func (s *Starter) StartUnchecked(ctx context.Context, req StartParams) (string, bool, error) {
	return s.start(ctx, req)
}

func (s *Starter) start(ctx context.Context, req StartParams) (string, bool, error) {
	var body any = req.Plan
	if req.Agent != nil {
		body = struct {
			Agent *Agent `json:"agent"`
		}{req.Agent}
	}
	planJSON, err := json.Marshal(body)
	if err != nil {
		return "", false, fmt.Errorf("marshal plan: %w", err)
	}
	if len(planJSON) > MaxPlanBytes {
		return "", false, plan.TooLarge(len(planJSON))
	}
	digest, err := plan.DigestJSON(planJSON)
	if err != nil {
		return "", false, err
	}
	wfID := kernel.WorkflowID(req.Project, req.RunID)
	// Starts of one run id take turns. Without it, a start that failed and
	// found no workflow could take back the run's row just after a
	// concurrent identical start had started the workflow: a run running
	// without its row (no owner, no workspace for the probes, its id free
	// for another plan). Every statement of the start runs on the locked
	// connection, so concurrent starts never wait on the pool for a second.
	// Starts of one run id in this process take turns in memory first
	// (startTurns), so that a burst of identical requests waits without
	// holding a pool connection each; the advisory lock orders them
	// across processes.
	release, err := startTurns.take(ctx, req.Project+"\x00"+req.RunID)
	if err != nil {
		return "", false, fmt.Errorf("start run %s/%s: wait for a concurrent start: %w", req.Project, req.RunID, err)
	}
	defer release()
	conn, err := s.Pool.Acquire(ctx)
	if err != nil {
		return "", false, fmt.Errorf("start run %s/%s: %w", req.Project, req.RunID, err)
	}
	defer conn.Release()
	if _, err := conn.Exec(ctx, lockRunStartSQL, req.Project, req.RunID); err != nil {
		return "", false, fmt.Errorf("start run %s/%s: wait for a concurrent start: %w", req.Project, req.RunID, err)
	}
	defer func() {
		if _, err := conn.Exec(context.WithoutCancel(ctx), unlockRunStartSQL, req.Project, req.RunID); err != nil {
			// A session lock must not go back to the pool with the
			// connection: closed, the pool drops it and the lock ends.
			_ = conn.Conn().Close(context.WithoutCancel(ctx))
		}
	}()
	if err := s.refuseClaimed(ctx, conn, req); err != nil {
		return "", false, err
	}
	var inserted bool
	err = conn.QueryRow(ctx, insertRunSQL, req.Project, req.RunID, planJSON, digest, wfID).Scan(&inserted)
	if errors.Is(err, pgx.ErrNoRows) {
		var stored []byte
		if err := conn.QueryRow(ctx, runDigestSQL, req.Project, req.RunID).Scan(&stored); err != nil {
			return "", false, fmt.Errorf("read run %s/%s: %w", req.Project, req.RunID, err)
		}
		if !bytes.Equal(stored, digest) {
			return "", false, kernel.Errorf(kernel.EConflict, "run %s of project %s already exists with a different plan; choose another run_id", req.RunID, req.Project)
		}
	} else if err != nil {
		return "", false, fmt.Errorf("record run %s/%s: %w", req.Project, req.RunID, err)
	}
	ws, err := s.Workspace(req.Project, req.RunID)
	if err != nil {
		return "", false, err
	}
	if err := os.MkdirAll(ws, 0o755); err != nil {
		return "", false, fmt.Errorf("create workspace %s: %w", ws, err)
	}
	wfName, input := s.workflow(req, ws)
	_, err = s.Client.ExecuteWorkflow(ctx, client.StartWorkflowOptions{
		ID:                                       wfID,
		TaskQueue:                                s.TaskQueue,
		WorkflowIDReusePolicy:                    enumspb.WORKFLOW_ID_REUSE_POLICY_REJECT_DUPLICATE,
		WorkflowExecutionErrorWhenAlreadyStarted: true,
	}, wfName, input)
	switch {
	case err == nil:
		// This request started the workflow: created, even when an
		// earlier attempt recorded the run and failed before starting it.
		return req.RunID, true, nil
	case temporal.IsWorkflowExecutionAlreadyStartedError(err):
		// An earlier request started it (and was answered so, see below).
		return req.RunID, inserted, nil
	}
	// The start failed, or its answer was lost. If the workflow exists
	// after all, the run started: say so. If it certainly does not, take
	// back the row this request wrote, so the id is not taken forever by a
	// run that never ran (a 409 for the next plan, a 404 for GET).
	if _, derr := s.Client.DescribeWorkflowExecution(ctx, wfID, ""); derr == nil {
		return req.RunID, true, nil
	} else if nf := (*serviceerror.NotFound)(nil); errors.As(derr, &nf) && inserted {
		if _, xerr := conn.Exec(context.WithoutCancel(ctx), deleteRunSQL, req.Project, req.RunID); xerr != nil {
			return "", false, fmt.Errorf("start workflow %s: %v; and take back its run row: %w", wfID, err, xerr)
		}
	}
	var ia *serviceerror.InvalidArgument
	if errors.As(err, &ia) {
		return "", false, kernel.Errorf(kernel.EInvalid, "start workflow %s: Temporal refused it: %v", wfID, err)
	}
	return "", false, kernel.Errorf(kernel.EUnavailable, "start workflow %s: %v", wfID, err)
}

// workflow is the workflow a run starts, and its input.
func (s *Starter) workflow(req StartParams, ws string) (string, any) {
	if req.Agent == nil {
		return WorkflowName, RunInput{
			Project: req.Project, RunID: req.RunID, Workspace: ws, Plan: req.Plan, Timeouts: s.Timeouts,
			WorkspaceTools: s.workspaceTools(req.Plan.ToolNames()),
		}
	}
	model := req.Agent.Model
	if model == "" {
		model = s.AgentModel
	}
	return AgentWorkflowName, AgentInput{
		Project: req.Project, RunID: req.RunID, Workspace: ws, Agent: *req.Agent, Model: model, Timeouts: s.Timeouts,
		WorkspaceTools: s.workspaceTools(req.Agent.Tools),
	}
}

// workspaceTools lists the tools among names that write the workspace
// (RunInput.WorkspaceTools). A tool this starter does not know is listed:
// the worker's snapshot activity then decides, as it did for every tool
// before. Without a tool set it returns nil (unknown).
func (s *Starter) workspaceTools(names []string) []string {
	if s.Tools == nil {
		return nil
	}
	out := []string{}
	for _, name := range names {
		if name == kernel.DelegateTool {
			continue
		}
		tool, ok := s.Tools.Lookup(name)
		if !ok {
			out = append(out, name)
			continue
		}
		if kernel.WritesWorkspace(tool) {
			out = append(out, name)
		}
	}
	return out
}

// refuseClaimed refuses a new run whose id, or the id of a child run its
// plan may start, already has events that the kernel did not write, or is
// a run of the MCP gateway: a caller who wrote them first would have them
// read as the kernel's run.
// Once the run is recorded, ingest refuses such writes (operations.Owners). A
// write racing this check tries the start's lock (lockRunStartSQL) shared in
// its own transaction (journal.IngestAgentEvents) and is refused when a
// start holds it, so the check sees its events or it sees the run's row.
func (s *Starter) refuseClaimed(ctx context.Context, conn *pgxpool.Conn, req StartParams) error {
	var exists bool
	if err := conn.QueryRow(ctx, runExistsSQL, req.Project, req.RunID).Scan(&exists); err != nil {
		return fmt.Errorf("read run %s/%s: %w", req.Project, req.RunID, err)
	}
	if exists {
		return nil // an idempotent start, decided below
	}
	var source, runID string
	// An agent's child run ids embed the model's call ids, unknown before
	// the run: only its own id is checked.
	ids := []string{req.RunID}
	if req.Agent == nil {
		ids = req.Plan.RunIDs(req.RunID)
	}
	err := conn.QueryRow(ctx, foreignEventSQL, req.Project, ids).Scan(&source, &runID)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("check run %s/%s for foreign events: %w", req.Project, req.RunID, err)
	}
	return kernel.Errorf(kernel.EConflict,
		"run_id: run %q of project %q already has events written by source %q (in run %q); a kernel run's events come only from the kernel, so choose another run_id",
		req.RunID, req.Project, source, runID)
}

// Run statuses of GET /v1/runs/{run_id}.
const (
	StatusRunning = "running"
	// StatusAwaiting is a kernel run that waits for the settlement of an
	// operation (RunView.Awaiting says which).
	StatusAwaiting  = "awaiting"
	StatusCompleted = "completed"
	StatusFailed    = "failed"
)

// RunView is the body of GET /v1/runs/{run_id}: the run's status and one
// page of its events.
type RunView struct {
	RunID   string `json:"run_id"`
	Project string `json:"project"`
	Status  string `json:"status"`
	// Awaiting names the operation an awaiting run waits for, since when
	// (its run.awaiting's time), and until when at most (the await bound).
	Awaiting *Awaiting      `json:"awaiting,omitempty"`
	Events   []kernel.Event `json:"events"`
	// NextCursor continues the events after this page; null on the last.
	NextCursor *string `json:"next_cursor"`
}

// Awaiting is the wait of an awaiting run (RunView.Awaiting).
type Awaiting struct {
	OperationID string    `json:"operation_id"`
	Since       time.Time `json:"since"`
	Until       string    `json:"until,omitempty"`
}

// Pages of a run's events (GET /v1/runs/{run_id}?cursor=&limit=): a page
// holds at most limit events (DefaultEventLimit, at most MaxEventLimit)
// and stops early once its events' data passes MaxEventPageBytes (always
// at least one event), so no answer is unbounded whatever the run holds.
const (
	DefaultEventLimit = 100
	MaxEventLimit     = 1000
	MaxEventPageBytes = 4 << 20
)

// EventPage selects a page of a run's events.
type EventPage struct {
	Cursor string // a RunView.NextCursor; empty: the first page
	Limit  int    // 0: DefaultEventLimit
}

// View reports a run's status and a page of its events in journal order.
// A kernel run's status comes from Temporal; a run Temporal does not know
// (an external agent's) from its journal events. ENotFound when neither
// knows it.
//
// Ids are held to what ingest accepts (any text of up to kernel.MaxKeyLen
// bytes), not to the kernel's own alphabet (kernel.ValidateID): an
// external agent's run may be named "session:42". Only an id the kernel
// could have started is asked of Temporal.
func (s *Starter) View(ctx context.Context, project, runID string, page EventPage) (RunView, error) {
	if err := kernel.ValidateKey("project", project); err != nil {
		return RunView{}, err
	}
	if err := kernel.ValidateKey("run_id", runID); err != nil {
		return RunView{}, err
	}
	kernelID := kernel.ValidateID("project", project) == nil && kernel.ValidateID("run_id", runID) == nil
	var after int64
	if page.Cursor != "" {
		var err error
		if after, err = journal.DecodeEventCursor(page.Cursor); err != nil {
			return RunView{}, err
		}
	}
	limit := page.Limit
	switch {
	case limit == 0:
		limit = DefaultEventLimit
	case limit < 0 || limit > MaxEventLimit:
		return RunView{}, kernel.Errorf(kernel.EInvalid, "limit must be between 1 and %d, got %d", MaxEventLimit, limit)
	}
	// One more than the page, to know whether another follows.
	stored, err := s.Journal.RunEventsPage(ctx, project, runID, after, limit+1)
	if err != nil {
		return RunView{}, err
	}
	v := RunView{RunID: runID, Project: project, Events: []kernel.Event{}}
	size := 0
	for i, e := range stored {
		if i == limit || (i > 0 && size+len(e.Data) > MaxEventPageBytes) {
			c := journal.EncodeEventCursor(stored[i-1].Seq)
			v.NextCursor = &c
			break
		}
		size += len(e.Data)
		v.Events = append(v.Events, e.Event)
	}
	known, terminal, err := s.Journal.RunTerminal(ctx, project, runID)
	if err != nil {
		return RunView{}, err
	}
	// Only an id the kernel could have started can be a workflow of its.
	if kernelID {
		d, err := s.Client.DescribeWorkflowExecution(ctx, kernel.WorkflowID(project, runID), "")
		var nf *serviceerror.NotFound
		switch {
		case err == nil:
			v.Status = workflowStatus(d.GetWorkflowExecutionInfo().GetStatus())
			if v.Status == StatusRunning {
				return s.withWait(ctx, v)
			}
			return v, nil
		case !errors.As(err, &nf):
			return RunView{}, kernel.Errorf(kernel.EUnavailable, "describe run %s/%s in Temporal: %v", project, runID, err)
		}
	}
	if !known {
		return RunView{}, kernel.Errorf(kernel.ENotFound, "no run %s in project %s", runID, project)
	}
	v.Status = journalStatus(terminal)
	return v, nil
}

// withWait makes a running kernel run awaiting when the journal shows it
// in a wait (a run.awaiting whose operation has no run.resumed). Events
// reach the journal through the outbox, so for a moment after a wait
// begins or ends the status says what the journal said just before.
func (s *Starter) withWait(ctx context.Context, v RunView) (RunView, error) {
	var w Awaiting
	err := s.Pool.QueryRow(ctx, runAwaitingSQL, v.Project, v.RunID).Scan(&w.OperationID, &w.Since, &w.Until)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return v, nil
	case err != nil:
		return RunView{}, fmt.Errorf("read the wait of run %s/%s: %w", v.Project, v.RunID, err)
	}
	w.Since = w.Since.UTC()
	v.Status, v.Awaiting = StatusAwaiting, &w
	return v, nil
}

func workflowStatus(st enumspb.WorkflowExecutionStatus) string {
	switch st {
	case enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING, enumspb.WORKFLOW_EXECUTION_STATUS_CONTINUED_AS_NEW:
		return StatusRunning
	case enumspb.WORKFLOW_EXECUTION_STATUS_COMPLETED:
		return StatusCompleted
	default: // failed, terminated, timed out, canceled
		return StatusFailed
	}
}

// journalStatus is the status of a run Temporal does not know, from its
// newest terminal event's type ("" while it has none).
func journalStatus(terminal string) string {
	switch terminal {
	case kernel.TypeRunCompleted:
		return StatusCompleted
	case kernel.TypeRunFailed:
		return StatusFailed
	}
	return StatusRunning
}

// startTurns orders the starts of one run id within this process.
var startTurns = turnstile{turns: map[string]*turn{}}

// turnstile is a lock per key whose waiters give up when their context
// ends. Keys are dropped when nobody holds or waits for them.
type turnstile struct {
	mu    sync.Mutex
	turns map[string]*turn
}

// turn is one key's lock (a channel of capacity one: held while full) and
// how many callers hold or wait for it.
type turn struct {
	held  chan struct{}
	users int
}

// take waits for key's turn, or for ctx to end, and returns the function
// that ends the turn.
func (ts *turnstile) take(ctx context.Context, key string) (release func(), err error) {
	ts.mu.Lock()
	t := ts.turns[key]
	if t == nil {
		t = &turn{held: make(chan struct{}, 1)}
		ts.turns[key] = t
	}
	t.users++
	ts.mu.Unlock()
	leave := func() {
		ts.mu.Lock()
		if t.users--; t.users == 0 {
			delete(ts.turns, key)
		}
		ts.mu.Unlock()
	}
	select {
	case t.held <- struct{}{}:
		return func() { <-t.held; leave() }, nil
	case <-ctx.Done():
		leave()
		return nil, ctx.Err()
	}
}
