package runner

import (
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/seed-7bc021c3/reckon/kernel"
	"github.com/seed-7bc021c3/reckon/kernel/manifest"
)

// Registered names of the workflow and its activities.
const (
	WorkflowName      = "kernel.run"
	ActRecordEvent    = "kernel.record_event"
	ActRunTool        = "kernel.run_tool"
	ActSummarizeChild = "kernel.summarize_child_run"
	// ActSnapshotWorkspace records a workspace manifest (runs started
	// since ChangeWorkspaceManifests).
	ActSnapshotWorkspace = "kernel.snapshot_workspace"
	// ActResolveTool names the server an MCP tool resolves to on this
	// worker (runs started since ChangeRecordServer), a local activity.
	ActResolveTool = "kernel.resolve_tool"
)

// Error types of workflow and activity failures the kernel raises itself.
const (
	errTypeRunFailed = "run_failed"
)

// Timeouts tune the activities of a run. They travel in the workflow input
// so that every replay schedules activities with the same options.
type Timeouts struct {
	// ToolStartToClose bounds one tool execution; default 11m (the
	// sandbox's largest command timeout plus a margin).
	ToolStartToClose time.Duration `json:"tool_start_to_close,omitempty"`
	// ToolHeartbeat is how long a silent tool execution may go before it
	// is declared failed (a dead worker); default DefaultToolHeartbeat.
	// The worker heartbeats every fifth of it.
	ToolHeartbeat time.Duration `json:"tool_heartbeat,omitempty"`
	// RecordAttempts bounds RecordEvent's retries; default 50 (minutes of
	// backoff). The run never proceeds past an unrecorded event.
	RecordAttempts int32 `json:"record_attempts,omitempty"`
	// Await bounds a run's wait for the settlement of an operation whose
	// step says on_uncertain: await (RECKON_AWAIT_TIMEOUT); default
	// DefaultAwaitTimeout. Carried in the input, a replay sets the timer
	// the run set.
	Await time.Duration `json:"await,omitempty"`
}

// DefaultToolHeartbeat is Timeouts.ToolHeartbeat's default. It bounds how
// long the operation of a dead worker stays invisible: its call ends
// tool.failed(effect=uncertain) once the heartbeat timeout fires; a
// heartbeat every 2 s keeps 8 s of slack before a live call is misjudged.
const DefaultToolHeartbeat = 10 * time.Second

func (t Timeouts) withDefaults() Timeouts {
	if t.ToolStartToClose <= 0 {
		t.ToolStartToClose = 11 * time.Minute
	}
	if t.ToolHeartbeat <= 0 {
		t.ToolHeartbeat = DefaultToolHeartbeat
	}
	if t.RecordAttempts <= 0 {
		t.RecordAttempts = 50
	}
	if t.Await <= 0 {
		t.Await = DefaultAwaitTimeout
	}
	return t
}

// RunInput is the input of the run workflow.
type RunInput struct {
	Project string `json:"project"`
	RunID   string `json:"run_id"`
	// Workspace is the run's absolute working directory.
	Workspace   string   `json:"workspace"`
	ParentRunID string   `json:"parent_run_id,omitempty"`
	Plan        Plan     `json:"plan"`
	Timeouts    Timeouts `json:"timeouts,omitempty"`
	// WorkspaceTools names the tools of the plan (child plans included)
	// that write the workspace, as the starter's tool set said at start:
	// only those get a manifest before and after their call, and any other
	// tool call (an MCP tool, delegate) skips the snapshot activity, a
	// whole activity round trip. Nil (runs started before it) means
	// unknown: every tool call asks the snapshot activity, which decides
	// on the worker. Never omitted when known, so that an empty list stays
	// an empty list.
	WorkspaceTools []string `json:"workspace_tools"`
}

// RunOutput is the result of a completed run.
type RunOutput struct {
	Operations int `json:"operations"`
}

// ToolOutcome is RunTool's answer when the tool's own outcome is known:
// success, or a failure the tool classified. A failure of the activity
// itself (timeout, crash, injected fault) is an activity error instead.
type ToolOutcome struct {
	OK        bool   `json:"ok"`
	Summary   string `json:"summary,omitempty"`
	ErrorType string `json:"error_type,omitempty"`
	Error     string `json:"error,omitempty"`
	Effect    string `json:"effect,omitempty"`
}

// ChildRef names a run.
type ChildRef struct {
	Project string `json:"project"`
	RunID   string `json:"run_id"`
}

// ChildSummary is SummarizeChildRun's answer: the child run's counts and
// the delegation's effect they imply (kernel.ChildSummary.Effect). Its
// JSON is part of recorded workflow histories.
type ChildSummary struct {
	kernel.ChildSummary
	Effect string `json:"effect"`
}

// stepResult is the outcome of one operation as the workflow records it.
type stepResult struct {
	ToolOutcome
	ChildRunID string
	// Child is a failed delegation's child summary, when it was taken.
	Child *kernel.ChildSummary
}

type run struct {
	in RunInput
	t  Timeouts
	// idPrefix starts every kernel event id of the run: see EventID.
	idPrefix string
	// localRecord: RecordEvent runs as a local activity (ChangeLocalRecord).
	localRecord bool
	// manifests says the run records workspace manifests around workspace
	// tools (ChangeWorkspaceManifests).
	manifests bool
	// recordServer says the run records the server of each MCP call in
	// its tool.started and pins the call to it (ChangeRecordServer).
	recordServer bool
	// agent is the agent run this run's steps belong to (AgentWorkflow);
	// nil for a plan run.
	agent *agentRun
}

// ChangeRecordServer is the workflow.GetVersion change id under which a
// run resolves each MCP tool's server before its tool.started (version
// 1, a local activity, ActResolveTool), records it there (server,
// upstream_tool, as the MCP gateway does) and pins the call to it. Before
// it, the call went to whichever server the worker resolved, which the
// journal did not say: with two servers offering a tool, or the first
// unreachable when the worker looked, a probe could not know which one to
// ask. Runs recorded before it replay at DefaultVersion and resolve in
// the call as before.
const ChangeRecordServer = "record-mcp-server"

// ChangeWorkspaceManifests is the workflow.GetVersion change id under which
// runs record a workspace manifest before each workspace tool call and
// after each completed one (version 1). Runs recorded before it replay at
// workflow.DefaultVersion and schedule no snapshot activity.
const ChangeWorkspaceManifests = "workspace-manifests"

// ChangeProjectEventIDs is the workflow.GetVersion change id under which
// kernel event ids gained the project (kernel.EventID, version 1). Runs
// recorded before it replay at workflow.DefaultVersion and keep their old
// ids (kernel.LegacyEventID) to the end.
const ChangeProjectEventIDs = "project-scoped-event-ids"

// ChangeLocalRecord is the workflow.GetVersion change id under which
// RecordEvent runs as a local activity (version 1): in the workflow
// worker, inside the workflow task, instead of a server round trip (task
// scheduled, polled, completed, a new workflow task) per event. A tool
// call's tool.completed and the next call's tool.started then cost two
// outbox commits within one workflow task. The guarantees hold: the
// workflow waits for the local activity's commit before it schedules the
// tool, and a local activity that ran but whose workflow task was lost
// runs again on replay, which re-enqueues the identical event (workflow
// time) as a no-op. Runs recorded before it replay at DefaultVersion and
// keep regular activities.
const ChangeLocalRecord = "local-record-event"

// ChangeNoReissueOnCancel is the workflow.GetVersion change id under which
// a canceled run no longer re-issues the step whose call the cancel ended
// (version 1). Before it, the re-issue recorded a tool.started whose call
// was never scheduled (the context was already canceled) and a
// tool.failed(uncertain) for it: an operation that certainly did nothing,
// listed as uncertain. The version is asked only when a re-issue meets a
// canceled run, so histories without one replay unchanged.
const ChangeNoReissueOnCancel = "no-reissue-on-cancel"

// reissueCanceled reports whether a re-issue must not start because the
// run is canceled (runs recorded before ChangeNoReissueOnCancel still
// re-issue).
func reissueCanceled(ctx workflow.Context) bool {
	return ctx.Err() != nil && workflow.GetVersion(ctx, ChangeNoReissueOnCancel, workflow.DefaultVersion, 1) == 1
}

// RunWorkflow executes a plan. Every step is recorded before it runs and
// after it ends; the run stops at the first failed step unless the step
// asks for a re-issue after an uncertain failure, or to wait for the
// failure's settlement (await). The workflow returns an
// error (the run failed) after recording run.failed.
func RunWorkflow(ctx workflow.Context, in RunInput) (RunOutput, error) {
	r := &run{in: in, t: in.Timeouts.withDefaults(), idPrefix: kernel.EventID(in.Project, in.RunID, "")}
	if workflow.GetVersion(ctx, ChangeProjectEventIDs, workflow.DefaultVersion, 1) == workflow.DefaultVersion {
		r.idPrefix = kernel.LegacyEventID(in.RunID, "")
	}
	r.localRecord = workflow.GetVersion(ctx, ChangeLocalRecord, workflow.DefaultVersion, 1) == 1
	r.manifests = workflow.GetVersion(ctx, ChangeWorkspaceManifests, workflow.DefaultVersion, 1) == 1
	r.recordServer = workflow.GetVersion(ctx, ChangeRecordServer, workflow.DefaultVersion, 1) == 1
	if err := r.record(ctx, kernel.TypeRunStarted, "run/started", kernel.RunStarted{
		PlanSummary: in.Plan.Summary(), ParentRunID: in.ParentRunID, Workspace: in.Workspace,
	}); err != nil {
		return RunOutput{}, err
	}
	ops := 0
	for i, step := range in.Plan.Steps {
		out, err := r.runStep(ctx, i, step)
		ops += out.ops
		if err != nil {
			return RunOutput{}, err
		}
		if ctx.Err() != nil {
			// Canceled (an operator's request): the step's outcome is
			// recorded above; no further step starts.
			msg := fmt.Sprintf("run canceled during operation %s (%s)", out.opID, step.Tool)
			if err := r.record(ctx, kernel.TypeRunFailed, "run/failed", kernel.RunFailed{Error: msg}); err != nil {
				return RunOutput{}, err
			}
			return RunOutput{}, temporal.NewCanceledError(msg)
		}
		if !out.OK {
			msg := out.failure
			if msg == "" {
				msg = fmt.Sprintf("operation %s (%s) failed: %s: %s (effect=%s)", out.opID, step.Tool, out.ErrorType, out.Error, out.Effect)
			}
			if err := r.record(ctx, kernel.TypeRunFailed, "run/failed", kernel.RunFailed{Error: msg}); err != nil {
				return RunOutput{}, err
			}
			return RunOutput{}, temporal.NewNonRetryableApplicationError(msg, errTypeRunFailed, nil)
		}
	}
	if err := r.record(ctx, kernel.TypeRunCompleted, "run/completed", struct{}{}); err != nil {
		return RunOutput{}, err
	}
	return RunOutput{Operations: ops}, nil
}

// stepOutcome is what became of one plan step: its last operation's
// result (OK also when a wait settled it occurred), that operation, how
// many operations the step took, and run.failed's error when a wait ended
// the step without a result to report.
type stepOutcome struct {
	stepResult
	opID    string
	ops     int
	failure string
}

// runStep runs plan step i: its operation, then as its on_uncertain says
// after an uncertain failure, a re-issue as a new operation (op-<i>-r<k>,
// at most MaxReissues) or a wait for the failure's settlement.
func (r *run) runStep(ctx workflow.Context, i int, s Step) (stepOutcome, error) {
	out := stepOutcome{opID: fmt.Sprintf("op-%d", i+1)}
	for k := 0; ; k++ {
		prev := ""
		if k > 0 {
			prev, out.opID = out.opID, fmt.Sprintf("op-%d-r%d", i+1, k)
		}
		res, err := r.step(ctx, s, out.opID, prev)
		if err != nil {
			return out, err
		}
		out.stepResult = res
		out.ops++
		again, err := r.again(ctx, s, &out, k < MaxReissues)
		if err != nil || !again {
			return out, err
		}
	}
}

// again reports whether the step is issued once more after out's
// operation ended (left: a re-issue is still allowed). A step that says
// reissue is, after an uncertain failure, unless the run is canceled; one
// that says await waits for the settlement first: occurred counts the
// step as done (out.OK), none issues it again, anything else (an
// operator's unknown, none with no re-issue left, the await bound) ends
// the run with out.failure.
func (r *run) again(ctx workflow.Context, s Step, out *stepOutcome, left bool) (bool, error) {
	res := out.stepResult
	// The conditions keep their order: reissueCanceled asks a version,
	// and histories recorded before the wait replay the same calls.
	if !res.OK && res.Effect == kernel.EffectUncertain && s.OnUncertain == OnUncertainReissue && left && !reissueCanceled(ctx) {
		return true, nil
	}
	if !r.awaits(ctx, s, res) {
		return false, nil
	}
	end, err := r.await(ctx, out.opID)
	if err != nil {
		return false, err
	}
	switch st := end.settlement; {
	case !end.timedOut && !st.Found:
		return false, nil // canceled while waiting: the caller records it
	case st.Effect == kernel.EffectOccurred:
		out.OK = true
		return false, nil
	case st.Effect == kernel.EffectNone && left:
		return true, nil
	}
	out.failure = awaitFailure(s, out.opID, end, r.t.Await)
	return false, nil
}

// record writes one kernel event through the RecordEvent activity. Its
// timestamp is workflow time, so a replay rebuilds the identical event and
// a retried activity is an idempotent no-op.
func (r *run) record(ctx workflow.Context, typ, suffix string, data any) error {
	if ctx.Err() != nil || r.localRecord {
		// A canceled run still records what happened to it, and a cancel
		// that arrives while an event is being recorded (the database
		// slow or down, the record retrying) must not cut it short: a
		// call's outcome would be lost and the run left without its end.
		// A local activity's cancel issues no command and its outcome is
		// replayed from its marker, so histories that recorded such a cut
		// replay the same; a regular activity's cancel is a command of its
		// own, so runs from before ChangeLocalRecord keep the old way.
		ctx, _ = workflow.NewDisconnectedContext(ctx)
	}
	ev, err := kernel.NewEvent(kernel.SourceKernel, r.idPrefix+suffix, r.in.Project, r.in.RunID, typ, kernel.ActorKernel, workflow.Now(ctx), data)
	if err != nil {
		return temporal.NewNonRetryableApplicationError(err.Error(), "invalid_event", nil)
	}
	retry := &temporal.RetryPolicy{
		InitialInterval:    200 * time.Millisecond,
		BackoffCoefficient: 2,
		MaximumInterval:    10 * time.Second,
		MaximumAttempts:    r.t.RecordAttempts,
	}
	var fut workflow.Future
	if r.localRecord {
		lctx := workflow.WithLocalActivityOptions(ctx, workflow.LocalActivityOptions{
			StartToCloseTimeout: 30 * time.Second, RetryPolicy: retry,
		})
		fut = workflow.ExecuteLocalActivity(lctx, ActRecordEvent, ev)
	} else {
		actx := workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
			StartToCloseTimeout: 30 * time.Second, RetryPolicy: retry,
		})
		fut = workflow.ExecuteActivity(actx, ActRecordEvent, ev)
	}
	if err := fut.Get(ctx, nil); err != nil {
		return fmt.Errorf("record %s %s: %w", typ, ev.EventID, err)
	}
	return nil
}

// step runs one operation: tool.started, the tool (one attempt) or the
// child run, then tool.completed or tool.failed.
func (r *run) step(ctx workflow.Context, s Step, opID, reissueOf string) (stepResult, error) {
	started := kernel.ToolStarted{
		OperationID: opID, Tool: s.Tool, Args: s.Args, Attempt: 1, ReissueOf: reissueOf,
		Postcondition: s.Postcondition,
	}
	var resolved ResolvedTool
	if s.Tool == kernel.DelegateTool {
		started.ChildRunID = kernel.ChildRunID(r.in.RunID, opID)
	} else {
		resolved = r.resolve(ctx, s.Tool)
		started.Server, started.UpstreamTool, started.ServerEndpoint = resolved.Server, resolved.UpstreamTool, resolved.ServerEndpoint
		started.WorkspaceManifest = r.snapshot(ctx, s.Tool, opID, manifest.PhaseBefore)
	}
	if err := r.record(ctx, kernel.TypeToolStarted, opID+"/started", started); err != nil {
		return stepResult{}, err
	}
	var res stepResult
	switch {
	case s.Tool == kernel.DelegateTool && r.agent != nil:
		res = r.agent.delegate(ctx, s, opID)
	case s.Tool == kernel.DelegateTool:
		res = r.delegate(ctx, s, opID)
	default:
		res = r.runTool(ctx, s, opID, resolved)
	}
	if res.OK {
		done := kernel.ToolCompleted{OperationID: opID, ResultSummary: res.Summary, ChildRunID: res.ChildRunID}
		if s.Tool != kernel.DelegateTool && started.WorkspaceManifest != nil {
			done.WorkspaceManifest = r.snapshot(ctx, s.Tool, opID, manifest.PhaseAfter)
		}
		err := r.record(ctx, kernel.TypeToolCompleted, opID+"/completed", done)
		return res, err
	}
	err := r.record(ctx, kernel.TypeToolFailed, opID+"/failed", kernel.ToolFailed{
		OperationID: opID, ErrorType: res.ErrorType, Error: res.Error, Effect: res.Effect,
		ChildRunID: res.ChildRunID,
	}.WithChildSummary(res.Child))
	return res, err
}

// resolve names the server, the server's tool and the server's endpoint
// an MCP tool resolves to on a worker, for its tool.started
// (ChangeRecordServer); empty for other tools, for runs from before it,
// and when the tool resolves to nothing or the resolution failed: the
// call then resolves as it did before, and a tool the worker lacks is
// refused there (effect none).
func (r *run) resolve(ctx workflow.Context, tool string) ResolvedTool {
	if !r.recordServer || !strings.HasPrefix(tool, kernel.MCPPrefix) || ctx.Err() != nil {
		return ResolvedTool{}
	}
	lctx := workflow.WithLocalActivityOptions(ctx, workflow.LocalActivityOptions{
		// Resolving may list a server's tools (bounded by the tool set's
		// discovery timeout, 10 s by default).
		StartToCloseTimeout: time.Minute,
		RetryPolicy:         &temporal.RetryPolicy{MaximumAttempts: 1},
	})
	var out ResolvedTool
	if err := workflow.ExecuteLocalActivity(lctx, ActResolveTool, tool).Get(ctx, &out); err != nil {
		return ResolvedTool{}
	}
	return out
}

// snapshot records a manifest of the run's workspace for a workspace tool
// (nil for any other tool, for runs from before manifests, and when the
// snapshot failed: a missing manifest only leaves the probe without
// evidence, so it never stops the run).
func (r *run) snapshot(ctx workflow.Context, tool, opID, phase string) *kernel.WorkspaceManifest {
	if !r.manifests || ctx.Err() != nil {
		return nil
	}
	if r.in.WorkspaceTools != nil && !slices.Contains(r.in.WorkspaceTools, tool) {
		return nil
	}
	actx := workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		StartToCloseTimeout: 2 * time.Minute,
		// A worker that dies mid-walk is noticed within the tool heartbeat
		// timeout and the walk runs again elsewhere; without a heartbeat
		// the run would stall the whole StartToClose (a SIGKILLed worker
		// right after a command held its run two minutes).
		HeartbeatTimeout: r.t.ToolHeartbeat,
		RetryPolicy:      &temporal.RetryPolicy{InitialInterval: time.Second, MaximumAttempts: 5},
	})
	var sum *kernel.WorkspaceManifest
	if err := workflow.ExecuteActivity(actx, ActSnapshotWorkspace, SnapshotInput{
		Project: r.in.Project, RunID: r.in.RunID, OperationID: opID, Tool: tool, Phase: phase, Workspace: r.in.Workspace,
	}).Get(ctx, &sum); err != nil {
		workflow.GetLogger(ctx).Warn("workspace manifest not recorded", "operation_id", opID, "phase", phase, "error", err)
		return nil
	}
	return sum
}

// runTool runs the step's tool, pinned to where its tool.started says the
// call goes (to: the resolution recorded there).
func (r *run) runTool(ctx workflow.Context, s Step, opID string, to ResolvedTool) stepResult {
	actx := workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		StartToCloseTimeout: r.t.ToolStartToClose,
		HeartbeatTimeout:    r.t.ToolHeartbeat,
		// Exactly one attempt: a consequential call is never re-executed
		// behind anyone's back. A re-issue is a new operation.
		RetryPolicy: &temporal.RetryPolicy{MaximumAttempts: 1},
	})
	call := kernel.ToolCall{
		Project: r.in.Project, RunID: r.in.RunID, OperationID: opID,
		Tool: s.Tool, Args: s.Args, Workspace: r.in.Workspace,
		Server: to.Server, UpstreamTool: to.UpstreamTool, ServerEndpoint: to.ServerEndpoint,
	}
	var out ToolOutcome
	if err := workflow.ExecuteActivity(actx, ActRunTool, call).Get(ctx, &out); err != nil {
		return stepResult{ToolOutcome: activityFailure(err)}
	}
	if !out.OK && !kernel.ValidToolFailedEffect(out.Effect) {
		out.Effect = kernel.EffectUncertain
	}
	return stepResult{ToolOutcome: out}
}

// activityFailure classifies a RunTool activity that did not answer: the
// execution boundary may have been crossed, so the effect is uncertain.
func activityFailure(err error) ToolOutcome {
	out := ToolOutcome{ErrorType: kernel.ErrorTypeActivityFailed, Effect: kernel.EffectUncertain}
	var appErr *temporal.ApplicationError
	var toErr *temporal.TimeoutError
	var panicErr *temporal.PanicError
	switch {
	case errors.As(err, &appErr) && appErr.Type() == kernel.ErrorTypeInjectedFault:
		out.ErrorType, out.Error = kernel.ErrorTypeInjectedFault, appErr.Message()
	case errors.As(err, &toErr):
		out.Error = fmt.Sprintf("tool activity timed out (%s): the worker died or stalled during the call; whether its effect landed is unknown",
			toErr.TimeoutType().String())
	case temporal.IsCanceledError(err):
		out.Error = "the run was canceled while the tool ran; it was asked to stop, and whether its effect landed is unknown"
	case errors.As(err, &panicErr):
		out.Error = "tool activity panicked: " + panicErr.Error()
	case errors.As(err, &appErr):
		out.Error = appErr.Message()
	default:
		out.Error = err.Error()
	}
	return out
}

// delegate runs the child plan as a child workflow with a deterministic id.
func (r *run) delegate(ctx workflow.Context, s Step, opID string) stepResult {
	childRun := kernel.ChildRunID(r.in.RunID, opID)
	if s.Plan == nil {
		return stepResult{ChildRunID: childRun, ToolOutcome: ToolOutcome{ErrorType: kernel.ErrorTypeValidation, Effect: kernel.EffectNone, Error: "plan: required for a delegate step"}}
	}
	var out RunOutput
	res := r.child(ctx, childRun, WorkflowName, RunInput{
		Project:     r.in.Project,
		RunID:       childRun,
		Workspace:   filepath.Join(filepath.Dir(r.in.Workspace), childRun),
		ParentRunID: r.in.RunID,
		Plan:        *s.Plan,
		Timeouts:    r.in.Timeouts,
		// The parent's list covers its child plans.
		WorkspaceTools: r.in.WorkspaceTools,
	}, &out)
	if res.OK {
		res.Summary = fmt.Sprintf("child run %s completed (%d operations)", childRun, out.Operations)
	}
	return res
}

// child runs workflow as the child run childRun with input, decoding its
// result into out; a failed child is summarized from its journal events
// (ChildSummary), which decides the delegation's effect.
func (r *run) child(ctx workflow.Context, childRun, workflowName string, input, out any) stepResult {
	res := stepResult{ChildRunID: childRun}
	cctx := workflow.WithChildOptions(ctx, workflow.ChildWorkflowOptions{
		WorkflowID:            kernel.WorkflowID(r.in.Project, childRun),
		WorkflowIDReusePolicy: enumspb.WORKFLOW_ID_REUSE_POLICY_REJECT_DUPLICATE,
	})
	fut := workflow.ExecuteChildWorkflow(cctx, workflowName, input)
	if err := fut.GetChildWorkflowExecution().Get(ctx, nil); err != nil {
		// Rejected before it began (duplicate id, namespace gone): nothing
		// of the child ran.
		res.ToolOutcome = ToolOutcome{ErrorType: kernel.ErrorTypeDelegationStart, Effect: kernel.EffectNone,
			Error: fmt.Sprintf("child run %s was not started: %s", childRun, causeMessage(err))}
		return res
	}
	childErr := fut.Get(ctx, out)
	if childErr == nil {
		res.ToolOutcome = ToolOutcome{OK: true}
		return res
	}
	res.ToolOutcome = ToolOutcome{ErrorType: kernel.ErrorTypeDelegationFail, Effect: kernel.EffectUncertain,
		Error: fmt.Sprintf("child run %s failed: %s", childRun, causeMessage(childErr))}
	sctx := workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		StartToCloseTimeout: 2 * time.Minute,
		RetryPolicy:         &temporal.RetryPolicy{InitialInterval: time.Second, MaximumAttempts: 5},
	})
	var sum ChildSummary
	if err := workflow.ExecuteActivity(sctx, ActSummarizeChild, ChildRef{Project: r.in.Project, RunID: childRun}).Get(ctx, &sum); err != nil {
		res.Error += fmt.Sprintf("; its operations could not be summarized: %s", causeMessage(err))
		return res
	}
	res.Effect = sum.Effect
	res.Child = &sum.ChildSummary
	return res
}

// causeMessage is the innermost message of a Temporal error chain, without
// the wrappers' event ids and identities.
func causeMessage(err error) string {
	var appErr *temporal.ApplicationError
	if errors.As(err, &appErr) {
		return appErr.Message()
	}
	for {
		next := errors.Unwrap(err)
		if next == nil {
			return err.Error()
		}
		err = next
	}
}
