package runner

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/rs/zerolog"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"github.com/seed-7bc021c3/reckon/kernel"
	"github.com/seed-7bc021c3/reckon/kernel/fault"
	"github.com/seed-7bc021c3/reckon/kernel/journal"
	"github.com/seed-7bc021c3/reckon/kernel/manifest"
	"github.com/seed-7bc021c3/reckon/kernel/outbox"
	"github.com/seed-7bc021c3/reckon/kernel/plan"
	"github.com/seed-7bc021c3/reckon/kernel/priorstate"
)

// MaxSummaryBytes bounds tool.completed.result_summary and tool.failed.error.
const MaxSummaryBytes = 1000

// Activities are the run workflow's activities and the dependencies they
// need. Every worker process builds one.
type Activities struct {
	Pool    *pgxpool.Pool
	Journal *journal.Store
	Tools   ToolSet
	// Fault injects drill faults; nil injects none.
	Fault *fault.Injector
	// Unconfined says run_command runs without bubblewrap; every event
	// this worker records then carries "unconfined": true.
	Unconfined bool
	// DeliveryPoll is how often SummarizeChildRun checks that the child's
	// outbox rows reached the journal; default 100ms.
	DeliveryPoll time.Duration
	// Manifest bounds workspace manifests (RECKON_MANIFEST_MAX_FILES,
	// RECKON_MANIFEST_BUDGET); zero values take the defaults.
	Manifest manifest.Limits
	// Model answers agent runs' model turns; nil refuses them.
	Model *AgentModel
	Log   zerolog.Logger
}

// Register registers the run workflow and the activities on r.
func Register(r worker.Registry, a *Activities) {
	r.RegisterWorkflowWithOptions(RunWorkflow, workflow.RegisterOptions{Name: WorkflowName})
	r.RegisterActivityWithOptions(a.RecordEvent, activity.RegisterOptions{Name: ActRecordEvent})
	r.RegisterActivityWithOptions(a.RunTool, activity.RegisterOptions{Name: ActRunTool})
	r.RegisterActivityWithOptions(a.SummarizeChildRun, activity.RegisterOptions{Name: ActSummarizeChild})
	r.RegisterActivityWithOptions(a.SnapshotWorkspace, activity.RegisterOptions{Name: ActSnapshotWorkspace})
	r.RegisterActivityWithOptions(a.ResolveTool, activity.RegisterOptions{Name: ActResolveTool})
	r.RegisterActivityWithOptions(a.Settlement, activity.RegisterOptions{Name: ActSettlement})
	r.RegisterWorkflowWithOptions(AgentWorkflow, workflow.RegisterOptions{Name: AgentWorkflowName})
	r.RegisterActivityWithOptions(a.ModelTurn, activity.RegisterOptions{Name: ActModelTurn})
}

// ResolvedTool is where a tool's calls go on this worker: the server and
// the server's own name for the tool (kernel.Upstream), and the server's
// endpoint identity (kernel.Endpointed); empty for a tool that names no
// server, or that this worker lacks.
type ResolvedTool struct {
	Server       string `json:"server,omitempty"`
	UpstreamTool string `json:"upstream_tool,omitempty"`
	// ServerEndpoint came after ChangeRecordServer without a version of
	// its own: it is only copied into tool.started, and a result recorded
	// before it decodes with it empty, so a replay rebuilds the
	// tool.started it recorded then (without server_endpoint).
	ServerEndpoint string `json:"server_endpoint,omitempty"`
}

// ResolveTool resolves tool as RunTool would, for its tool.started
// (ChangeRecordServer). It may list a server's tools, never calls one.
func (a *Activities) ResolveTool(_ context.Context, tool string) (ResolvedTool, error) {
	t, ok := a.Tools.Lookup(tool)
	if !ok {
		return ResolvedTool{}, nil
	}
	up, ok := t.(kernel.Upstream)
	if !ok {
		return ResolvedTool{}, nil
	}
	server, name := up.Upstream()
	out := ResolvedTool{Server: server, UpstreamTool: name}
	if e, ok := t.(kernel.Endpointed); ok {
		out.ServerEndpoint = e.ServerEndpoint()
	}
	return out, nil
}

// lookupPinned resolves call.Tool on this worker; a call pinned to a
// server (call.Server, recorded in its tool.started) resolves only to that
// server's tool, by its qualified name if the bare one now goes elsewhere
// (a server that was down when the run resolved it is back), and, when
// its endpoint is recorded too (call.ServerEndpoint), only where this
// worker's server of that name has that endpoint. ok is false when this
// worker cannot make the call the journal says is being made.
func (a *Activities) lookupPinned(call kernel.ToolCall) (kernel.Tool, bool) {
	pinned := func(t kernel.Tool) bool {
		if call.Server == "" {
			return true
		}
		up, ok := t.(kernel.Upstream)
		if !ok {
			return false
		}
		server, name := up.Upstream()
		if server != call.Server || name != call.UpstreamTool {
			return false
		}
		if call.ServerEndpoint == "" {
			return true
		}
		e, ok := t.(kernel.Endpointed)
		return ok && e.ServerEndpoint() == call.ServerEndpoint
	}
	if t, ok := a.Tools.Lookup(call.Tool); ok && pinned(t) {
		return t, true
	}
	if call.Server == "" {
		return nil, false
	}
	t, ok := a.Tools.Lookup(kernel.MCPToolName(call.Server, call.UpstreamTool))
	return t, ok && pinned(t)
}

// SnapshotInput asks for a manifest of a run's workspace around one
// operation's tool call.
type SnapshotInput struct {
	Project     string `json:"project"`
	RunID       string `json:"run_id"`
	OperationID string `json:"operation_id"`
	Tool        string `json:"tool"`
	// Phase is manifest.PhaseBefore or manifest.PhaseAfter.
	Phase     string `json:"phase"`
	Workspace string `json:"workspace"`
}

// SnapshotWorkspace records a manifest of the run's workspace (before the
// call, or after a completed one) in kernel_workspace_manifests and returns
// its summary for the event; nil when the tool does not write the
// workspace (kernel.WorkspaceTool). A workspace that cannot be walked
// yields a manifest that says so (Truncated), which proves nothing; only a
// failure to store it fails the activity, which Temporal retries — the
// first stored manifest of a key is the one every attempt returns.
func (a *Activities) SnapshotWorkspace(ctx context.Context, in SnapshotInput) (*kernel.WorkspaceManifest, error) {
	tool, ok := a.Tools.Lookup(in.Tool)
	if !ok {
		return nil, nil
	}
	if !kernel.WritesWorkspace(tool) {
		return nil, nil
	}
	defer heartbeat(ctx)()
	st := manifest.Store{Pool: a.Pool}
	key := manifest.Key{Project: in.Project, RunID: in.RunID, OperationID: in.OperationID, Phase: in.Phase}
	if m, ok, err := st.Get(ctx, key); err != nil {
		return nil, err
	} else if ok {
		sum := m.Summary()
		return &sum, nil
	}
	// Hash again what the run's previous manifest hashed, so the two
	// compare on content where their metadata could not decide.
	prev, _, err := st.Latest(ctx, in.Project, in.RunID)
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(in.Workspace, 0o755); err != nil {
		return nil, fmt.Errorf("workspace %s: %w", in.Workspace, err)
	}
	m, err := manifest.Take(ctx, in.Workspace, manifest.Options{Limits: a.Manifest, HashAlso: prev.Hashed()})
	if err != nil {
		m = manifest.Manifest{TakenAt: time.Now().UTC(), Entries: []manifest.Entry{}, Truncated: err.Error()}
	}
	if m, err = st.Put(ctx, key, m); err != nil {
		return nil, err
	}
	sum := m.Summary()
	return &sum, nil
}

// heartbeatsPerTimeout is how many heartbeats a tool call sends within its
// heartbeat timeout: a live call misses four in a row before it is judged
// dead.
const heartbeatsPerTimeout = 5

// maxHeartbeatThrottle caps how long the SDK holds a heartbeat back before
// sending it to the server. Its own throttle is 80 % of the heartbeat
// timeout, which would leave a live call only a fifth of the timeout of
// slack against a stalled send on a loaded machine.
const maxHeartbeatThrottle = time.Second

// stickyScheduleToStart bounds how long a workflow task waits on the
// sticky queue of the worker that last ran the workflow before any worker
// may take it. When that worker died with a tool call in flight, the task
// that records tool.failed waits this long after the heartbeat timeout
// (the SDK's default is 5 s); a live but busy worker loses only its cache
// of the workflow, which is replayed from history.
const stickyScheduleToStart = 2 * time.Second

// NewWorker returns a worker (not yet started) that executes runs from the
// task queue.
func NewWorker(c client.Client, taskQueue string, a *Activities) worker.Worker {
	w := worker.New(c, taskQueue, worker.Options{
		MaxHeartbeatThrottleInterval: maxHeartbeatThrottle,
		StickyScheduleToStartTimeout: stickyScheduleToStart,
	})
	Register(w, a)
	return w
}

// RecordEvent writes one event to the outbox. Re-enqueueing the same event
// is a no-op, so Temporal may retry it freely; a different payload under
// the same key is a conflict and is not retried.
func (a *Activities) RecordEvent(ctx context.Context, ev kernel.Event) error {
	if a.Unconfined {
		data, err := withField(ev.Data, "unconfined", true)
		if err != nil {
			return temporal.NewNonRetryableApplicationError(err.Error(), kernel.EInvalid, err)
		}
		ev.Data = data
	}
	if done, err := a.recordedInJournal(ctx, ev); err != nil || done {
		return err
	}
	if err := outbox.Enqueue(ctx, a.Pool, ev); err != nil {
		if kernel.ErrorCode(err) == kernel.EConflict {
			if same, serr := a.sameButTime(ctx, ev); serr != nil {
				return serr
			} else if same {
				return nil
			}
		}
		switch code := kernel.ErrorCode(err); code {
		case kernel.EInvalid, kernel.EConflict:
			return temporal.NewNonRetryableApplicationError(err.Error(), code, err)
		}
		return err
	}
	return nil
}

// sameButTime reports whether the outbox already holds ev with another
// timestamp and nothing else changed. RecordEvent runs as a local activity
// (ChangeLocalRecord): when a worker dies after the event was enqueued but
// before its workflow task completed, the task runs again at a later
// workflow time and records the same event with a later ts. That is the
// same event, recorded once: the first timestamp stands and the retry is a
// no-op. Any other difference stays a conflict.
func (a *Activities) sameButTime(ctx context.Context, ev kernel.Event) (bool, error) {
	stored, ok, err := outbox.Stored(ctx, a.Pool, ev.Key())
	if err != nil || !ok {
		return false, err
	}
	return sameButTime(stored, ev), nil
}

// sameButTime reports whether ev is stored but for its timestamp.
//
// run.awaiting's until is the workflow time plus the await bound, so it
// moves with the ts: it is taken from the stored event too
// (TestSameButTimeOfAnAwait).
func sameButTime(stored, ev kernel.Event) bool {
	ev.TS = stored.TS
	if ev.Type == kernel.TypeRunAwaiting && stored.Type == ev.Type {
		var was kernel.RunAwaiting
		if json.Unmarshal(stored.Data, &was) != nil {
			return false
		}
		data, err := withField(ev.Data, "until", was.Until)
		if err != nil {
			return false
		}
		ev.Data = data
	}
	mine, err := ev.Prepare()
	if err != nil {
		return false
	}
	theirs, err := stored.Prepare()
	if err != nil {
		return false
	}
	return bytes.Equal(mine.Digest, theirs.Digest)
}

// recordedInJournal judges ev against the journal when the journal
// already holds its key. The outbox keeps a delivered row for its
// retention (24 h) only: an event recorded again after that (a workflow
// task run again after every worker was down for a day) would go into the
// outbox again, and its delivery be parked as a conflict, with an alert,
// for an event recorded once. The same event, or the same but for its time
// (sameButTime), is done; anything else is the conflict Enqueue answers
// within the retention. A key the journal lacks is Enqueue's to judge: not
// yet delivered, its row is still in the outbox. A nil Journal (tests of
// other rules) skips the check.
func (a *Activities) recordedInJournal(ctx context.Context, ev kernel.Event) (bool, error) {
	if a.Journal == nil {
		return false, nil
	}
	stored, err := a.Journal.Event(ctx, ev.Key())
	switch {
	case kernel.ErrorCode(err) == kernel.ENotFound:
		return false, nil
	case err != nil:
		return false, fmt.Errorf("record event: %w", err)
	case sameButTime(stored.Event, ev):
		return true, nil
	}
	err = kernel.Errorf(kernel.EConflict, "event %s is already in the journal with a different payload; nothing was overwritten", ev.Key())
	return false, temporal.NewNonRetryableApplicationError(err.Error(), kernel.EConflict, err)
}

func withField(data json.RawMessage, key string, v any) (json.RawMessage, error) {
	m := map[string]json.RawMessage{}
	if len(data) > 0 && string(data) != "null" {
		if err := json.Unmarshal(data, &m); err != nil {
			return nil, fmt.Errorf("event data: %w", err)
		}
	}
	raw, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	m[key] = raw
	return json.Marshal(m)
}

// RunTool executes one tool call, once. The tool's own outcome (success or
// a classified failure) is the activity's result; an injected fault is an
// activity error, as a crashed worker would be.
func (a *Activities) RunTool(ctx context.Context, call kernel.ToolCall) (ToolOutcome, error) {
	log := a.Log.With().Str("run_id", call.RunID).Str("operation_id", call.OperationID).Str("tool", call.Tool).Logger()
	tool, ok := a.lookupPinned(call)
	if !ok {
		msg := fmt.Sprintf("tool %q is not available on this worker", call.Tool)
		if call.Server != "" {
			msg = fmt.Sprintf("tool %q of server %q, where its tool.started says the call goes, is not available on this worker", call.UpstreamTool, call.Server)
			if call.ServerEndpoint != "" {
				msg = fmt.Sprintf("tool %q of server %q at endpoint %s, where its tool.started says the call goes, is not available on this worker (its server of that name, if any, is configured with another url or command)", call.UpstreamTool, call.Server, call.ServerEndpoint)
			}
		}
		return ToolOutcome{ErrorType: kernel.ErrorTypeUnknownTool, Effect: kernel.EffectNone, Error: msg}, nil
	}
	// Heartbeat from here to the answer, not only around Execute: the
	// prior-state read (an MCP server to start and ask) and the fault
	// claim can outlast the heartbeat timeout, and a live worker judged
	// dead then executed the call after the workflow had recorded it
	// failed (and might be re-issuing it).
	defer heartbeat(ctx)()
	if err := os.MkdirAll(call.Workspace, 0o755); err != nil {
		return ToolOutcome{ErrorType: kernel.ErrorTypeValidation, Effect: kernel.EffectNone,
			Error: fmt.Sprintf("workspace %s: %v", call.Workspace, err)}, nil
	}
	if err := tool.Validate(call); err != nil {
		// Validate has no side effect by contract: whatever it returns,
		// nothing ran.
		out := failure(err)
		var te *kernel.ToolError
		if !errors.As(err, &te) {
			out.ErrorType = kernel.ErrorTypeValidation
		}
		out.Effect = kernel.EffectNone
		return out, nil
	}
	a.recordPrior(ctx, tool, call)
	if err := a.Fault.Before(ctx, call); err != nil {
		log.Warn().Err(err).Msg("fault injected before the effect")
		return ToolOutcome{}, crash(err)
	}
	res, err := tool.Execute(ctx, call)
	if err != nil {
		return failure(err), nil
	}
	if err := a.Fault.After(ctx, call, res); err != nil {
		log.Warn().Err(err).Msg("fault injected after the effect")
		return ToolOutcome{}, crash(err)
	}
	return ToolOutcome{OK: true, Summary: kernel.Abbreviate(kernel.Storable(res.Summary), MaxSummaryBytes)}, nil
}

// recordPrior reads and records the downstream state a PriorReader tool's
// call would change, before the call. It never stops the call: without a
// prior state the probe only proves less.
func (a *Activities) recordPrior(ctx context.Context, tool kernel.Tool, call kernel.ToolCall) {
	pr, ok := tool.(kernel.PriorReader)
	if !ok {
		return
	}
	at := time.Now().UTC()
	state, ok, err := pr.ReadPrior(ctx, call)
	if !ok {
		return
	}
	p := priorstate.Prior{Tool: call.Tool, TakenAt: at, State: state}
	if err != nil {
		p.State, p.Error = nil, err.Error()
	}
	if err := (priorstate.Store{Pool: a.Pool}).Put(ctx, call.Project, call.RunID, call.OperationID, p); err != nil {
		a.Log.Warn().Err(err).Str("operation_id", call.OperationID).Msg("prior state not recorded")
	}
}

// failure turns a tool error into a classified outcome.
func failure(err error) ToolOutcome {
	et, eff := kernel.Classify(err)
	return ToolOutcome{ErrorType: et, Effect: eff, Error: kernel.Abbreviate(kernel.Storable(toolMessage(err)), MaxSummaryBytes)}
}

// toolMessage is a tool error's message without the error type a
// *kernel.ToolError prefixes (that type travels in its own field).
func toolMessage(err error) string { return plan.ToolMessage(err) }

// crash reports a crash-style failure of the activity.
func crash(err error) error {
	if fault.IsInjected(err) {
		return temporal.NewNonRetryableApplicationError(fault.Message, kernel.ErrorTypeInjectedFault, nil)
	}
	return temporal.NewNonRetryableApplicationError(err.Error(), kernel.ErrorTypeActivityFailed, err)
}

// heartbeat beats for the running activity until the returned stop is
// called, so that a dead worker is noticed within the heartbeat timeout
// while a long, live tool call is not.
func heartbeat(ctx context.Context) (stop func()) {
	hb := activity.GetInfo(ctx).HeartbeatTimeout
	if hb <= 0 {
		return func() {}
	}
	every := hb / heartbeatsPerTimeout
	if every < 50*time.Millisecond {
		every = 50 * time.Millisecond
	}
	done := make(chan struct{})
	finished := make(chan struct{})
	go func() {
		defer close(finished)
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-ctx.Done():
				return
			case <-t.C:
				activity.RecordHeartbeat(ctx)
			}
		}
	}()
	return func() {
		close(done)
		<-finished
	}
}

// SummarizeChildRun replays a failed child run's events from the journal,
// after waiting until every outbox row of the child has been delivered, and
// says what the failure means for the delegate operation: all child
// operations settled → occurred (none when it performed none); otherwise
// uncertain.
func (a *Activities) SummarizeChildRun(ctx context.Context, ref ChildRef) (ChildSummary, error) {
	every := a.DeliveryPoll
	if every <= 0 {
		every = 100 * time.Millisecond
	}
	if err := outbox.WaitDelivered(ctx, a.Pool, ref.Project, ref.RunID, every); err != nil {
		return ChildSummary{}, err
	}
	evs, err := runEvents(ctx, a.Journal, ref.Project, ref.RunID)
	if err != nil {
		return ChildSummary{}, err
	}
	return Summarize(evs), nil
}

// runEvents are a run's journal events in journal order.
func runEvents(ctx context.Context, j *journal.Store, project, runID string) ([]kernel.Event, error) {
	stored, err := j.RunEvents(ctx, project, runID)
	if err != nil {
		return nil, err
	}
	evs := make([]kernel.Event, len(stored))
	for i, e := range stored {
		evs[i] = e.Event
	}
	return evs, nil
}

// Summarize replays a child run's events (kernel.Replay, the one
// settlement rule) into the delegation's summary.
func Summarize(events []kernel.Event) ChildSummary {
	c := kernel.Replay(events).Summary()
	return ChildSummary{ChildSummary: c, Effect: c.Effect()}
}
