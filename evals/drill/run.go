package drill

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"

	"go.temporal.io/api/serviceerror"

	"github.com/seed-7bc021c3/reckon/evals"
	"github.com/seed-7bc021c3/reckon/kernel"
	"github.com/seed-7bc021c3/reckon/kernel/fault"
	"github.com/seed-7bc021c3/reckon/kernel/operations"
	"github.com/seed-7bc021c3/reckon/kernel/outbox"
	"github.com/seed-7bc021c3/reckon/kernel/runner"
	"github.com/seed-7bc021c3/reckon/pipeline"
	"github.com/seed-7bc021c3/reckon/pipeline/supervisor"
	"github.com/seed-7bc021c3/reckon/pipeline/triage"
	"github.com/seed-7bc021c3/reckon/platform/proctab"
)

// KindDelegateChild is the scenario of a fixture recorded from the child
// run of a delegate_unsettled drill: the child's own wall.
const KindDelegateChild = "delegate_child"

// Params tune one drill (a call's parameters).
type Params struct {
	Project string
	Seed    uint64
	// GeneratedBy is the command line recorded in every fixture.
	GeneratedBy string
	// SweepDelay is how long after the run the sweep that builds its wall
	// is taken to run: the sweeper's and the probes' clock is set that far
	// ahead, past the MCP probe's grace for in-flight calls, as the first
	// scheduled sweep after the grace would see it. Default 6m.
	SweepDelay time.Duration
	// RunTimeout bounds one run (default 3m).
	RunTimeout time.Duration
	// Generate makes the suite's scenarios (default Generate, the built-in
	// kinds; Tau2Suite.Generate for tau2-retail, GenerateSQLite and
	// GenerateGit for the real-server suites).
	Generate func(seed uint64, count int) []Scenario
}

func (o Params) withDefaults() Params {
	if o.Project == "" {
		o.Project = "drill"
	}
	if o.SweepDelay <= 0 {
		o.SweepDelay = 6 * time.Minute
	}
	if o.RunTimeout <= 0 {
		o.RunTimeout = 3 * time.Minute
	}
	if o.Generate == nil {
		o.Generate = Generate
	}
	return o
}

// Drill runs one scenario live and returns its fixtures: the run's wall,
// and for delegate_unsettled the child run's wall too.
func (st *Stack) Drill(ctx context.Context, sc Scenario, o Params) ([]*evals.Fixture, error) {
	o = o.withDefaults()
	if err := st.provides(sc); err != nil {
		return nil, err
	}
	rctx, cancel := context.WithTimeout(ctx, o.RunTimeout)
	defer cancel()
	if sc.KernelAgent != nil {
		return st.kernelAgentDrill(rctx, sc, o)
	}
	var children []string
	var err error
	if err := st.seedStore(rctx, sc, o.Project); err != nil {
		return nil, fmt.Errorf("run %s: %w", sc.RunID, err)
	}
	if sc.Agent != nil {
		err = st.agentRun(rctx, o.Project, sc)
	} else {
		children, err = st.kernelRun(rctx, sc, o)
	}
	if err != nil {
		return nil, err
	}
	if sc.OtherWrite != nil {
		if err := st.otherAgentWrites(rctx, sc); err != nil {
			return nil, err
		}
	}
	var early string
	if sc.SweepSkew != 0 {
		if early, err = st.earlySweep(rctx, o, sc); err != nil {
			return nil, err
		}
	}

	var out []*evals.Fixture
	f, err := st.record(rctx, o, sc, sc.RunID, sc.Kind)
	if err != nil {
		return nil, err
	}
	f.Notes += early
	if sc.Tau2 != nil {
		if err := st.tau2Truth(sc, f); err != nil {
			return nil, err
		}
	}
	if err := st.storeTruth(rctx, sc, o.Project, f); err != nil {
		return nil, err
	}
	out = append(out, f)
	if sc.Kind == KindDelegateUnsettled {
		for _, child := range children {
			f, err := st.record(rctx, o, sc, child, KindDelegateChild)
			if err != nil {
				return nil, err
			}
			out = append(out, f)
		}
	}
	return out, nil
}

// provides says which server the stack lacks for sc, nil when it has all.
func (st *Stack) provides(sc Scenario) error {
	if usesTool(sc.Plan, "mcp__write_file") && !st.Filesystem {
		return fmt.Errorf("scenario %s needs the filesystem MCP server (node and testdata/npm; scripts/ensure-deps.sh)", sc.RunID)
	}
	if err := st.providesStore(sc); err != nil {
		return err
	}
	if sc.Tau2 != nil && st.tau2 == nil {
		return fmt.Errorf("scenario %s needs the tau2 retail server (--suite tau2-retail --data DIR)", sc.RunID)
	}
	if (sc.Kind == KindMemoryAfter || sc.Kind == KindMemoryBefore || sc.Kind == KindSharedStore) && !st.Memory {
		return fmt.Errorf("scenario %s needs the memory MCP server (node and testdata/npm; scripts/ensure-deps.sh)", sc.RunID)
	}
	return nil
}

// kernelRun runs sc's plan on a worker of its own until the run (and its
// children) ended and their events are journaled, losing its worker
// mid-command or leaving a command's process running past its call as sc
// says, and returns the child runs.
func (st *Stack) kernelRun(ctx context.Context, sc Scenario, o Params) ([]string, error) {
	client := st.Temporal.Client
	acts, starter := st.runWorker(sc)
	if sc.Outlives != nil {
		st.outliving(acts, starter)
	}
	w := runner.NewWorker(client, starter.TaskQueue, acts)
	if err := w.Start(); err != nil {
		return nil, fmt.Errorf("start worker: %w", err)
	}
	var stopOnce sync.Once
	stopWorker := func() { stopOnce.Do(w.Stop) }
	defer stopWorker()
	ws, err := starter.Workspace(o.Project, sc.RunID)
	if err != nil {
		return nil, err
	}
	plan, err := runnerPlan(sc.Plan, ws)
	if err != nil {
		return nil, err
	}
	if _, _, err := starter.Start(ctx, runner.StartParams{Project: o.Project, RunID: sc.RunID, Plan: plan}); err != nil {
		return nil, fmt.Errorf("start run: %w", err)
	}
	switch {
	case sc.Lose != nil:
		err = st.lose(ctx, o.Project, sc, ws, stopWorker)
	case sc.Outlives != nil:
		err = st.outlived(ctx, o.Project, sc, ws)
	}
	if err != nil {
		return nil, err
	}
	// The run's own outcome does not matter (a faulted run fails, a lost
	// one is terminated); only that it ended. The parent waits for its
	// children.
	if err := client.GetWorkflow(ctx, kernel.WorkflowID(o.Project, sc.RunID), "").Get(ctx, nil); err != nil && ctx.Err() != nil {
		return nil, fmt.Errorf("run %s did not end within %s: %w", sc.RunID, o.RunTimeout, ctx.Err())
	}
	children, err := st.childRuns(ctx, o.Project, sc.RunID, sc.Plan)
	if err != nil {
		return nil, err
	}
	for _, run := range append([]string{sc.RunID}, children...) {
		if err := outbox.WaitDelivered(ctx, st.Core.Pool, o.Project, run, 20*time.Millisecond); err != nil {
			return nil, fmt.Errorf("outbox of %s: %w", run, err)
		}
	}
	if sc.ReconcileChild {
		for _, child := range children {
			if err := st.reconcileAsOperator(ctx, o.Project, child); err != nil {
				return nil, err
			}
		}
	}
	return children, nil
}

// runWorker is the activities of sc's own worker, its faults injected,
// and the starter of its run on that worker's task queue.
func (st *Stack) runWorker(sc Scenario) (*runner.Activities, *runner.Starter) {
	acts := &runner.Activities{
		Pool: st.Core.Pool, Journal: st.Core.Journal, Tools: st.Tools,
		Fault:      fault.New(st.Core.Pool, fault.Config{AfterEffect: sc.Fault.AfterEffect, BeforeEffect: sc.Fault.BeforeEffect}),
		Unconfined: st.Core.Cfg.SandboxUnconfined, DeliveryPoll: 20 * time.Millisecond, Log: st.Core.Log,
		Manifest: st.Core.ManifestLimits(),
	}
	starter := &runner.Starter{Pool: st.Core.Pool, Journal: st.Core.Journal, Client: st.Temporal.Client, TaskQueue: "drill-" + sc.RunID,
		DataDir: st.Core.Cfg.DataDir, Tools: st.Tools}
	return acts, starter
}

// otherAgentWrites makes sc's other agent's call to the store the run
// wrote, as a client of its own (its own project, run and key).
func (st *Stack) otherAgentWrites(ctx context.Context, sc Scenario) error {
	w := sc.OtherWrite
	tool, ok := st.Tools.Lookup(w.Tool)
	if !ok {
		return fmt.Errorf("scenario %s: the other agent's tool %s is not configured", sc.RunID, w.Tool)
	}
	args, err := json.Marshal(w.Args)
	if err != nil {
		return fmt.Errorf("scenario %s: the other agent's args: %w", sc.RunID, err)
	}
	ws, err := os.MkdirTemp("", "drill-other-agent-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(ws)
	if _, err := tool.Execute(ctx, kernel.ToolCall{Project: "other-agent", RunID: "other-" + sc.RunID, OperationID: "write-1",
		Tool: w.Tool, Args: args, Workspace: ws}); err != nil {
		return fmt.Errorf("scenario %s: the other agent's write: %w", sc.RunID, err)
	}
	return nil
}

// earlySweep builds sc's wall as a sweep EarlySweep after the run, its
// clock sc.SweepSkew ahead of the database's, would, and says what it did
// for the fixture's notes. Measured on the database's clock, a never_seen
// is too young to prove none there: that sweep must defer the operation,
// and a drill whose early sweep decides it fails (a probe measuring across
// the two clocks).
func (st *Stack) earlySweep(ctx context.Context, o Params, sc Scenario) (string, error) {
	_, err := st.buildWall(ctx, o.Project, sc.RunID, EarlySweep, sc.SweepSkew)
	var d deferredError
	switch {
	case errors.As(err, &d):
		return fmt.Sprintf(" A sweep %s after the run, its clock %s ahead of the database's, deferred %s: on the database's clock the call was too young for never_seen to prove none.",
			EarlySweep, sc.SweepSkew, strings.Join(d.ops, ", ")), nil
	case err != nil:
		return "", err
	case sc.Fault.BeforeEffect != "":
		return "", fmt.Errorf("run %s: a sweep %s after the run, its clock %s ahead of the database's, walled %s instead of deferring it: a wait was measured across clocks",
			sc.RunID, EarlySweep, sc.SweepSkew, sc.Fault.BeforeEffect)
	}
	return fmt.Sprintf(" A sweep %s after the run, its clock %s ahead of the database's, could already decide it.", EarlySweep, sc.SweepSkew), nil
}

// lose loses the run in the middle of sc.Lose's step: once the command is
// under way (see Lose), the run's workflow is terminated (no event will ever
// record the step's end) and its worker stopped, which cancels the
// activity and kills the command. When no process of the command is left,
// the workspace shows whether the effect landed; that observation is the
// operation's ground truth.
func (st *Stack) lose(ctx context.Context, project string, sc Scenario, ws string, stopWorker func()) error {
	l := sc.Lose
	if err := poll(ctx, func() (bool, error) {
		if l.AfterEffect {
			_, err := os.Stat(filepath.Join(ws, l.Effect))
			return err == nil, nil
		}
		return processWith(l.Marker)
	}); err != nil {
		return fmt.Errorf("run %s: the command of %s never got under way: %w", sc.RunID, l.OperationID, err)
	}
	if err := st.Temporal.Client.TerminateWorkflow(ctx, kernel.WorkflowID(project, sc.RunID), "",
		"drill: the run's workflow and worker were lost mid-step"); err != nil {
		return fmt.Errorf("terminate run %s: %w", sc.RunID, err)
	}
	stopWorker()
	gone := func() (bool, error) {
		running, err := processWith(l.Marker)
		return !running, err
	}
	// Stopping the worker cancels the activity, whose sandbox kills its own
	// init and bubblewrap's process group. The drill stands for a worker
	// that dies, whose commands die with it, so it still checks: past a
	// grace it kills what is left of the command, as that death would, and
	// says so in the log (a warning that points at a sandbox bug). The
	// ground truth is still what the workspace shows afterwards.
	gctx, cancel := context.WithTimeout(ctx, commandGrace)
	err := poll(gctx, gone)
	cancel()
	if err != nil && ctx.Err() == nil {
		n, kerr := killWith(l.Marker)
		if kerr != nil {
			return fmt.Errorf("run %s: kill the command of %s left after its worker stopped: %w", sc.RunID, l.OperationID, kerr)
		}
		st.Core.Log.Warn().Str("run_id", sc.RunID).Str("operation_id", l.OperationID).Int("killed", n).
			Dur("grace", commandGrace).Msg("drill: the command outlived its stopped worker; killed as the worker's death would")
		err = poll(ctx, gone)
	}
	if err != nil {
		return fmt.Errorf("run %s: the command of %s outlived its worker: %w", sc.RunID, l.OperationID, err)
	}
	return st.observeEffect(ctx, project, sc.RunID, ws, l, fault.Lost, "once no process of the command was left",
		map[bool]string{true: "the scenario lost the run after the effect", false: "the scenario lost the run before the effect"}[l.AfterEffect])
}

// observeEffect records, as the truth of l's operation (fault kind
// faultKind), whether l's effect is in the workspace ws now that nothing
// of its command can change it any more (when: since when), and fails
// when that is not what the scenario meant (meant says what it meant).
func (st *Stack) observeEffect(ctx context.Context, project, runID, ws string, l *Lose, faultKind, when, meant string) error {
	truth, seen := kernel.EffectNone, "absent"
	if _, err := os.Stat(filepath.Join(ws, l.Effect)); err == nil {
		truth, seen = kernel.EffectOccurred, "present"
	}
	if want := map[bool]string{true: kernel.EffectOccurred, false: kernel.EffectNone}[l.AfterEffect]; truth != want {
		return fmt.Errorf("run %s: %s is %s %s, but %s", runID, l.Effect, seen, when, meant)
	}
	detail, _ := json.Marshal(map[string]string{"observed": fmt.Sprintf("%s %s in the workspace %s", l.Effect, seen, when)})
	return fault.RecordObserved(ctx, st.Core.Pool, fault.Record{
		Project: project, RunID: runID, OperationID: l.OperationID, Tool: kernel.ToolRunCommand,
		Fault: faultKind, Truth: truth, Detail: detail,
	})
}

// poll checks cond every 10 ms until it holds, fails or ctx ends.
func poll(ctx context.Context, cond func() (bool, error)) error {
	for {
		ok, err := cond()
		if err != nil || ok {
			return err
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// commandGrace is how long a lost run's command may take to die once its
// worker stopped before the drill kills it.
const commandGrace = 5 * time.Second

// killWith sends SIGKILL to every process of this machine (but this one)
// with s in its command line, and returns how many it signalled.
func killWith(s string) (int, error) { return proctab.KillMatching(s, nil) }

// processWith reports whether a process of this machine has s in its
// command line.
func processWith(s string) (bool, error) {
	pids, err := proctab.Matching(s)
	return len(pids) > 0, err
}

// runnerPlan turns a generated plan into the kernel's, with the workspace
// placeholder in args replaced by the run's workspace.
func runnerPlan(p Plan, workspace string) (runner.Plan, error) {
	raw, err := json.Marshal(p)
	if err != nil {
		return runner.Plan{}, fmt.Errorf("marshal plan: %w", err)
	}
	ws, _ := json.Marshal(workspace)
	raw = []byte(strings.ReplaceAll(string(raw), WorkspacePlaceholder, string(ws[1:len(ws)-1])))
	return runner.DecodePlan(raw)
}

// usesTool reports whether a step of p, or of a plan it delegates, calls tool.
func usesTool(p Plan, tool string) bool {
	for _, s := range p.Steps {
		if s.Tool == tool || (s.Plan != nil && usesTool(*s.Plan, tool)) {
			return true
		}
	}
	return false
}

// childRuns returns the child runs the run's delegate steps started, per
// Temporal (the kernel's own record of executions).
func (st *Stack) childRuns(ctx context.Context, project, runID string, p Plan) ([]string, error) {
	var out []string
	for i, s := range p.Steps {
		if s.Tool != kernel.DelegateTool {
			continue
		}
		child := kernel.ChildRunID(runID, fmt.Sprintf("op-%d", i+1))
		started, err := st.workflowExists(ctx, project, child)
		if err != nil {
			return nil, err
		}
		if started {
			if err := st.Temporal.Client.GetWorkflow(ctx, kernel.WorkflowID(project, child), "").Get(ctx, nil); err != nil && ctx.Err() != nil {
				return nil, fmt.Errorf("child run %s did not end: %w", child, ctx.Err())
			}
			out = append(out, child)
		}
	}
	return out, nil
}

func (st *Stack) workflowExists(ctx context.Context, project, runID string) (bool, error) {
	_, err := st.Temporal.Client.DescribeWorkflowExecution(ctx, kernel.WorkflowID(project, runID), "")
	var nf *serviceerror.NotFound
	switch {
	case err == nil:
		return true, nil
	case errors.As(err, &nf):
		return false, nil
	default:
		return false, fmt.Errorf("describe run %s: %w", runID, err)
	}
}

// reconcileAsOperator settles a child run's faulted operations the way a
// person who checked downstream state would: through the operations
// service's reconcile path, with the truth the fault injector recorded.
func (st *Stack) reconcileAsOperator(ctx context.Context, project, runID string) error {
	recs, err := fault.Records(ctx, st.Core.Pool, project, runID)
	if err != nil {
		return err
	}
	for _, r := range recs {
		_, err := st.Ops.Reconcile(ctx, operations.ReconcileParams{
			Project: project, RunID: runID, OperationID: r.OperationID, Effect: r.Truth,
			Note:  fmt.Sprintf("drill operator: checked the downstream state of %s; the effect %s", r.OperationID, map[string]string{"occurred": "landed", "none": "never happened"}[r.Truth]),
			Basis: kernel.BasisOperator, Actor: "operator:drill",
		})
		if err != nil {
			return fmt.Errorf("reconcile %s/%s as operator: %w", runID, r.OperationID, err)
		}
	}
	return outbox.WaitDelivered(ctx, st.Core.Pool, project, runID, 20*time.Millisecond)
}

// later is the operations service with the database's clock, as a run's
// read reports it, by ahead: a drill's sweep sees the run as a sweep that
// much later would.
type later struct {
	*operations.Service
	by time.Duration
}

// ReadRun implements triage.Operations.
func (l later) ReadRun(ctx context.Context, project, runID string) (operations.RunRead, error) {
	read, err := l.Service.ReadRun(ctx, project, runID)
	read.ReadAt = read.ReadAt.Add(l.by)
	return read, err
}

// buildWall builds runID's wall with the pipeline's own sweep (dry run:
// nothing written, no locks) and its probes, as a sweep delay after now
// would: the database's clock the sweep reads with the run (the one clock
// the probes measure waits on) is presented delay ahead (later), and the
// sweeper's own clock delay+skew ahead, so the sweep measures and records
// a skew of skew between the two.
func (st *Stack) buildWall(ctx context.Context, project, runID string, delay, skew time.Duration) (pipeline.Wall, error) {
	now := func() time.Time { return time.Now().Add(delay + skew) }
	c := &supervisor.Recorder{}
	sw, err := st.Core.NewSweeper(later{Service: st.Ops, by: delay}, func(sc *triage.Config) {
		sc.Supervisor = c
		sc.Now = now
		sc.Concurrency = 1
	})
	if err != nil {
		return pipeline.Wall{}, err
	}
	rep, err := sw.Sweep(ctx, triage.SweepParams{Project: project, RunID: runID, DryRun: true})
	if err != nil {
		return pipeline.Wall{}, fmt.Errorf("sweep %s: %w", runID, err)
	}
	var deferred []string
	for _, wr := range rep.Walls {
		switch wr.Outcome {
		case triage.OutcomeDryRun:
		case triage.OutcomeDeferred:
			deferred = append(deferred, wr.Operations...)
		default:
			return pipeline.Wall{}, fmt.Errorf("sweep %s: wall outcome %s: %s", runID, wr.Outcome, wr.Error)
		}
	}
	walls := c.Walls()
	switch {
	case len(deferred) > 0:
		return pipeline.Wall{}, deferredError{run: runID, ops: deferred}
	case len(walls) == 0:
		return pipeline.Wall{}, fmt.Errorf("run %s: %w", runID, errNoWall)
	case len(walls) == 1:
		return walls[0], nil
	default:
		return pipeline.Wall{}, fmt.Errorf("run %s: the sweep split the pile into %d walls; drills record single walls", runID, len(walls))
	}
}

// deferredError says the sweep left operations of the run for a later
// sweep: a probe can tell about them only later.
type deferredError struct {
	run string
	ops []string
}

func (e deferredError) Error() string {
	return fmt.Sprintf("run %s: the sweep deferred %s (a probe can tell only later)", e.run, strings.Join(e.ops, ", "))
}

// truthOf returns the ground truth of every operation of the wall from
// the facts the kernel itself uses: the fault injector's record (or what
// the drill observed), and for a delegation its child run's effects
// (childTruth). An operation with neither is an error: its truth is not
// known, and the drill never guesses it.
func (st *Stack) truthOf(ctx context.Context, project, runID string, w pipeline.Wall) (map[string]string, error) {
	byOp, err := st.faultTruths(ctx, project, runID)
	if err != nil {
		return nil, err
	}
	truth := map[string]string{}
	for _, op := range w.Operations {
		if t, ok := byOp[op.OperationID]; ok {
			truth[op.OperationID] = t
			continue
		}
		if op.Tool == kernel.DelegateTool {
			child := op.ChildRunID
			if child == "" {
				child = kernel.ChildRunID(runID, op.OperationID)
			}
			t, err := st.childTruth(ctx, project, child)
			if err != nil {
				return nil, fmt.Errorf("run %s: delegation %s: %w", runID, op.OperationID, err)
			}
			truth[op.OperationID] = t
			continue
		}
		failure := "no failure recorded"
		if op.Failure != nil {
			failure = op.Failure.ErrorType + ": " + op.Failure.Error
		}
		return nil, fmt.Errorf("run %s: operation %s (%s, %s) is unsettled but no fault was injected into it (%s): its truth is unknown", runID, op.OperationID, op.Tool, op.State, failure)
	}
	return truth, nil
}

// faultTruths is the truth the fault injector (or the drill) recorded per
// operation of the run.
func (st *Stack) faultTruths(ctx context.Context, project, runID string) (map[string]string, error) {
	recs, err := fault.Records(ctx, st.Core.Pool, project, runID)
	if err != nil {
		return nil, err
	}
	byOp := map[string]string{}
	for _, r := range recs {
		byOp[r.OperationID] = r.Truth
	}
	return byOp, nil
}

// childTruth is a delegation's truth: what its child run did, by the
// kernel's own rule for a delegation's effect (kernel.ChildSummary.Effect)
// applied to the truth of each child operation — none when the child
// never started or performed nothing, or when every operation it
// performed truly had no effect; occurred when one did. A child
// operation's truth is its fault record, else the effect the journal
// settled it with (a completed command occurred, a refused one did not);
// an unsettled child operation without a record has no known truth.
func (st *Stack) childTruth(ctx context.Context, project, child string) (string, error) {
	evs, err := st.Core.Journal.RunEvents(ctx, project, child)
	if err != nil {
		return "", err
	}
	plain := make([]kernel.Event, len(evs))
	for i, e := range evs {
		plain[i] = e.Event
	}
	r := kernel.Replay(plain)
	byOp, err := st.faultTruths(ctx, project, child)
	if err != nil {
		return "", err
	}
	sum := kernel.ChildSummary{Total: len(r.Operations)}
	for _, op := range r.Operations {
		t, ok := byOp[op]
		if !ok {
			t, ok = r.Effects[op]
		}
		switch {
		case !ok || t == kernel.EffectUnknown:
			return "", fmt.Errorf("child run %s: operation %s has no recorded truth and no settled effect", child, op)
		case t == kernel.EffectNone:
			sum.None++
		}
	}
	return sum.Effect(), nil
}

// record builds runID's wall and truth into a fixture, recording for each
// operation whether the wall's evidence decides it (evals.Decidable, at
// the time of the drill) or a person is needed.
func (st *Stack) record(ctx context.Context, o Params, sc Scenario, runID, kind string) (*evals.Fixture, error) {
	w, err := st.buildWall(ctx, o.Project, runID, o.SweepDelay, sc.SweepSkew)
	if err != nil {
		return nil, err
	}
	truth, err := st.truthOf(ctx, o.Project, runID, w)
	if err != nil {
		return nil, err
	}
	notes := sc.Notes
	if runID != sc.RunID {
		notes = "child run of " + sc.RunID + ": " + notes
	}
	f := &evals.Fixture{
		Version: evals.FixtureVersion, ID: runID, Scenario: kind, Seed: o.Seed, GeneratedBy: o.GeneratedBy,
		Wall: w, Truth: truth, NeedsPerson: map[string]bool{},
	}
	var parts []string
	for _, op := range w.Operations {
		id := op.OperationID
		d := "not decidable from the wall: a person is needed"
		e, ok := evals.Decidable(op)
		if ok {
			d = "decidable from the wall as " + e
			if e != truth[id] {
				d += " — DISAGREES WITH THE TRUTH"
			}
		}
		f.NeedsPerson[id] = !ok
		f.ExpectNeedsAttention = f.ExpectNeedsAttention || !ok
		parts = append(parts, fmt.Sprintf("%s truth %s (%s)", id, truth[id], d))
	}
	sort.Strings(parts)
	f.Notes = notes + ". " + strings.Join(parts, "; ") + "."
	if err := f.Validate(); err != nil {
		return nil, fmt.Errorf("fixture of %s: %w", runID, err)
	}
	return f, nil
}

// Progress reports one finished scenario.
type Progress struct {
	Done, Total int
	Scenario    Scenario
	Fixtures    []*evals.Fixture
	Err         error
	Took        time.Duration
}

// SuiteResult summarises a generated suite.
type SuiteResult struct {
	Written []string
	Failed  []string
	// Scenarios counts the written fixtures by scenario kind, as the
	// manifest records them.
	Scenarios map[string]int
	// Disagreements lists the fixtures whose wall evidence decides an
	// operation to another effect than its recorded truth: a probe unsound
	// on that scenario, or a truth taken from the wrong facts. Either way
	// the suite lies, and GenerateSuite fails naming them.
	Disagreements []string
}

// drillFunc drills one scenario into its fixtures (Stack.Drill).
type drillFunc func(ctx context.Context, sc Scenario, o Params) ([]*evals.Fixture, error)

// GenerateSuite drills count scenarios from seed and writes their fixtures
// and the suite's manifest to out. A previous suite in out (the files its
// manifest lists) is removed first. A scenario that fails is reported and
// the suite goes on; the error says how many failed. A fixture whose wall
// evidence disagrees with its recorded truth fails the suite too, naming
// it (written, for inspection, not for committing).
func (st *Stack) GenerateSuite(ctx context.Context, o Params, count int, out string, progress func(Progress)) (SuiteResult, error) {
	return generateSuite(ctx, st.Drill, o, count, out, progress)
}

// generateSuite is GenerateSuite drilling each scenario with drill.
func generateSuite(ctx context.Context, drill drillFunc, o Params, count int, out string, progress func(Progress)) (SuiteResult, error) {
	o = o.withDefaults()
	res := SuiteResult{Scenarios: map[string]int{}}
	handMade, replaced, err := removePreviousSuite(out)
	if err != nil {
		return res, err
	}
	scs := o.Generate(o.Seed, count)
	var interrupted error
	for i, sc := range scs {
		if err := ctx.Err(); err != nil {
			// Still write the manifest of what was drilled, so the next
			// run replaces these fixtures instead of mixing them in.
			interrupted = fmt.Errorf("drill interrupted after %d of %d scenarios: %w", i, len(scs), err)
			break
		}
		t0 := time.Now()
		fx, err := drill(ctx, sc, o)
		if err == nil {
			for _, f := range fx {
				if _, werr := evals.WriteFixture(out, f); werr != nil {
					err = werr
					break
				}
				res.Written = append(res.Written, f.ID)
				res.Scenarios[f.Scenario]++
				if disagrees(f) {
					res.Disagreements = append(res.Disagreements, f.ID)
				}
			}
		}
		if err != nil {
			res.Failed = append(res.Failed, fmt.Sprintf("%s: %v", sc.RunID, err))
		}
		if progress != nil {
			progress(Progress{Done: i + 1, Total: len(scs), Scenario: sc, Fixtures: fx, Err: err, Took: time.Since(t0)})
		}
	}
	sort.Strings(res.Written)
	// Once a previous suite was removed, its manifest is rewritten even
	// when nothing was drilled (interrupted at once, or every scenario
	// failed): it is the only record of the hand-made fixtures left in the
	// folder, and a suite without it would drop them from the next one.
	if len(res.Written) > 0 || replaced {
		if err := evals.WriteManifest(out, evals.Manifest{
			Version: evals.FixtureVersion, GeneratedBy: o.GeneratedBy, Seed: o.Seed, Count: len(res.Written),
			GeneratedAt: time.Now().UTC(), Scenarios: res.Scenarios, Fixtures: res.Written, HandMade: handMade,
		}); err != nil {
			return res, err
		}
	}
	var errs []error
	if interrupted != nil {
		errs = append(errs, interrupted)
	}
	if len(res.Failed) > 0 {
		errs = append(errs, fmt.Errorf("%d of %d scenarios failed:\n  %s", len(res.Failed), len(scs), strings.Join(res.Failed, "\n  ")))
	}
	if len(res.Disagreements) > 0 {
		errs = append(errs, fmt.Errorf("the wall's decisive evidence disagrees with the recorded truth in %s (see their notes): a probe is unsound there or the truth was taken from the wrong facts; the suite is not fit to commit",
			strings.Join(res.Disagreements, ", ")))
	}
	return res, errors.Join(errs...)
}

// disagrees reports whether the wall's own evidence decides an operation
// of f to an effect other than its recorded truth.
func disagrees(f *evals.Fixture) bool {
	for _, op := range f.Wall.Operations {
		if e, ok := evals.Decidable(op); ok && e != f.Truth[op.OperationID] {
			return true
		}
	}
	return false
}

// removePreviousSuite deletes the drilled fixtures a previous manifest in
// dir lists, and the manifest, so a regenerated suite holds no stale
// cases. The hand-made fixtures it lists stay, and are returned for the
// new manifest; replaced says whether there was a previous suite.
func removePreviousSuite(dir string) (handMade []string, replaced bool, err error) {
	m, err := evals.ReadManifest(dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, err
	}
	for _, id := range m.Fixtures {
		if strings.ContainsAny(id, `/\`) {
			continue
		}
		if err := os.Remove(filepath.Join(dir, id+".json")); err != nil && !errors.Is(err, os.ErrNotExist) {
			return nil, false, fmt.Errorf("remove previous fixture: %w", err)
		}
	}
	if err := os.Remove(filepath.Join(dir, evals.ManifestFile)); err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, false, fmt.Errorf("remove previous manifest: %w", err)
	}
	return m.HandMade, true, nil
}
