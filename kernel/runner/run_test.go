package runner

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/client"

	"github.com/seed-7bc021c3/reckon/kernel"
	"github.com/seed-7bc021c3/reckon/kernel/fault"
)

func TestCleanSuccess(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOpts{})
	step := cmd("echo ok > proof.txt")
	step.Postcondition = json.RawMessage(`{"path": "proof.txt", "sha256": "abc"}`)
	evs, err := e.run("r1", Plan{Steps: []Step{step}})
	if err != nil {
		t.Fatalf("run failed: %v", err)
	}
	wantShape(t, evs, "run.started", "tool.started op-1", "tool.completed op-1", "run.completed")
	if got := e.readFile("r1", "proof.txt"); got != "ok\n" {
		t.Fatalf("proof.txt = %q", got)
	}
	rs := data(t, evs[0])
	if rs["workspace"] != e.workspace("r1") || rs["plan_summary"] != "1 step: run_command" {
		t.Fatalf("run.started data = %v", rs)
	}
	ts := data(t, evs[1])
	if pc, _ := ts["postcondition"].(map[string]any); pc["path"] != "proof.txt" {
		t.Fatalf("tool.started lacks the postcondition: %v", ts)
	}
	if ts["tool"] != "run_command" || ts["attempt"] != float64(1) {
		t.Fatalf("tool.started data = %v", ts)
	}
	for _, ev := range evs {
		if ev.SourceID != kernel.SourceKernel || ev.Actor != "kernel" || !strings.HasPrefix(ev.EventID, e.project+"/r1/") {
			t.Fatalf("event %s/%s actor %s breaks the kernel's id conventions", ev.SourceID, ev.EventID, ev.Actor)
		}
	}
	if evs[1].EventID != e.project+"/r1/op-1/started" || evs[2].EventID != e.project+"/r1/op-1/completed" {
		t.Fatalf("event ids %s %s", evs[1].EventID, evs[2].EventID)
	}
}

func TestValidationRejectionIsEffectNone(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOpts{})
	evs, err := e.run("r1", Plan{Steps: []Step{
		{Tool: "run_command", Args: json.RawMessage(`{"timeout_s": 5}`)},
		cmd("echo never > never.txt"),
	}})
	if err == nil {
		t.Fatal("run with an invalid step completed")
	}
	wantShape(t, evs, "run.started", "tool.started op-1", "tool.failed op-1 argument_validation effect=none", "run.failed")
	if msg := data(t, evs[3])["error"].(string); !strings.Contains(msg, "op-1") || !strings.Contains(msg, "command") {
		t.Fatalf("run.failed error does not name the operation and field: %q", msg)
	}
}

func TestUnknownToolAtExecutionIsEffectNone(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOpts{})
	evs, _ := e.run("r1", Plan{Steps: []Step{{Tool: "mcp__nowhere"}}})
	wantShape(t, evs, "run.started", "tool.started op-1", "tool.failed op-1 unknown_tool effect=none", "run.failed")
}

// A command that exits nonzero ran: whatever it did before failing stays
// done, so the failure is uncertain and the run stops.
func TestFailingCommandIsUncertain(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOpts{})
	evs, err := e.run("r1", Plan{Steps: []Step{cmd("echo partial > partial.txt; exit 3"), cmd("echo never > never.txt")}})
	if err == nil {
		t.Fatal("run completed")
	}
	wantShape(t, evs, "run.started", "tool.started op-1", "tool.failed op-1 command_failed effect=uncertain", "run.failed")
	if got := e.readFile("r1", "partial.txt"); got != "partial\n" {
		t.Fatalf("partial effect = %q", got)
	}
	if msg := data(t, evs[2])["error"].(string); !strings.Contains(msg, "code 3") {
		t.Fatalf("tool.failed error = %q", msg)
	}
}

// The live drill: the effect commits, the worker reports a crash, the
// journal says uncertain, the plan's re-issue is a new operation that names
// the first, and the ground truth is recorded where only drills look.
func TestLiveDrillFaultAfterEffect(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOpts{fault: fault.Config{AfterEffect: "run_command"}})
	step := cmd(`echo "$RECKON_OPERATION_ID" >> effects.txt`)
	step.OnUncertain = OnUncertainReissue
	evs, err := e.run("drill", Plan{Steps: []Step{step, cmd(`echo "$RECKON_OPERATION_ID" >> effects.txt`)}})
	if err != nil {
		t.Fatalf("run failed: %v", err)
	}
	wantShape(t, evs, "run.started",
		"tool.started op-1", "tool.failed op-1 injected_fault effect=uncertain",
		"tool.started op-1-r1", "tool.completed op-1-r1",
		"tool.started op-2", "tool.completed op-2",
		"run.completed")
	if got := e.readFile("drill", "effects.txt"); got != "op-1\nop-1-r1\nop-2\n" {
		t.Fatalf("effects.txt = %q: want one effect per operation, the faulted one included", got)
	}
	if d := data(t, evs[3]); d["reissue_of"] != "op-1" {
		t.Fatalf("re-issue does not name op-1: %v", d)
	}
	recs, ferr := fault.Records(context.Background(), e.pool.Pool, e.project, "drill")
	if ferr != nil {
		t.Fatal(ferr)
	}
	if len(recs) != 1 || recs[0].OperationID != "op-1" || recs[0].Truth != kernel.EffectOccurred || recs[0].Fault != fault.AfterEffect {
		t.Fatalf("ground truth = %+v", recs)
	}
}

func TestFaultBeforeEffect(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOpts{fault: fault.Config{BeforeEffect: "op-2"}})
	evs, err := e.run("r1", Plan{Steps: []Step{cmd("echo one >> f.txt"), cmd("echo two >> f.txt")}})
	if err == nil {
		t.Fatal("run completed")
	}
	wantShape(t, evs, "run.started", "tool.started op-1", "tool.completed op-1",
		"tool.started op-2", "tool.failed op-2 injected_fault effect=uncertain", "run.failed")
	if got := e.readFile("r1", "f.txt"); got != "one\n" {
		t.Fatalf("f.txt = %q: the before-effect fault must keep op-2 from running", got)
	}
	recs, _ := fault.Records(context.Background(), e.pool.Pool, e.project, "r1")
	if len(recs) != 1 || recs[0].OperationID != "op-2" || recs[0].Truth != kernel.EffectNone {
		t.Fatalf("ground truth = %+v", recs)
	}
	// Nothing in the journal tells the two kinds apart.
	if msg := data(t, evs[4])["error"]; msg != fault.Message {
		t.Fatalf("error = %v", msg)
	}
}

func TestDelegationSuccess(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOpts{})
	child := &Plan{Steps: []Step{cmd("echo child > c.txt")}}
	evs, err := e.run("p1", Plan{Steps: []Step{{Tool: kernel.DelegateTool, Plan: child}}})
	if err != nil {
		t.Fatalf("run failed: %v", err)
	}
	wantShape(t, evs, "run.started", "tool.started op-1", "tool.completed op-1", "run.completed")
	if d := data(t, evs[1]); d["child_run_id"] != "p1.op-1" {
		t.Fatalf("tool.started lacks child_run_id: %v", d)
	}
	if d := data(t, evs[2]); d["child_run_id"] != "p1.op-1" {
		t.Fatalf("tool.completed lacks child_run_id: %v", d)
	}
	cevs := e.events("p1.op-1")
	wantShape(t, cevs, "run.started", "tool.started op-1", "tool.completed op-1", "run.completed")
	if d := data(t, cevs[0]); d["parent_run_id"] != "p1" {
		t.Fatalf("child run.started = %v", d)
	}
	if got := e.readFile("p1.op-1", "c.txt"); got != "child\n" {
		t.Fatalf("child effect = %q", got)
	}
}

func TestDelegationStartFailureIsEffectNone(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOpts{})
	// Occupy the child's deterministic workflow id first.
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	squatter, err := temporalConn.Client.ExecuteWorkflow(ctx, client.StartWorkflowOptions{
		ID: kernel.WorkflowID(e.project, "p1.op-1"), TaskQueue: e.starter.TaskQueue,
		WorkflowIDReusePolicy: enumspb.WORKFLOW_ID_REUSE_POLICY_REJECT_DUPLICATE,
	}, WorkflowName, RunInput{Project: e.project, RunID: "p1.op-1", Workspace: e.workspace("squatter"), Plan: Plan{Steps: []Step{cmd("true")}}})
	if err != nil {
		t.Fatal(err)
	}
	if err := squatter.Get(ctx, nil); err != nil {
		t.Fatal(err)
	}
	evs, runErr := e.run("p1", Plan{Steps: []Step{{Tool: kernel.DelegateTool, Plan: &Plan{Steps: []Step{cmd("echo child > c.txt")}}}}})
	if runErr == nil {
		t.Fatal("run completed")
	}
	wantShape(t, evs, "run.started", "tool.started op-1", "tool.failed op-1 delegated_run_start_failed effect=none", "run.failed")
	if d := data(t, evs[2]); d["child_run_id"] != "p1.op-1" {
		t.Fatalf("tool.failed lacks child_run_id: %v", d)
	}
}

func TestDelegatedChildFailureSettled(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOpts{})
	child := &Plan{Steps: []Step{cmd("echo a > a.txt"), {Tool: "run_command", Args: json.RawMessage(`{}`)}}}
	evs, _ := e.run("p1", Plan{Steps: []Step{{Tool: kernel.DelegateTool, Plan: child}}})
	wantShape(t, evs, "run.started", "tool.started op-1", "tool.failed op-1 delegated_run_failed effect=occurred", "run.failed")
	var d kernel.ToolFailed
	if err := evs[2].DecodeData(&d); err != nil {
		t.Fatal(err)
	}
	if d.ChildRunID != "p1.op-1" || d.ChildOpsTotal == nil || *d.ChildOpsTotal != 2 || d.ChildOpsUnresolved == nil || *d.ChildOpsUnresolved != 0 ||
		d.ChildOpsNone != 1 || d.ChildOpsUnknown != 0 {
		t.Fatalf("tool.failed = %+v", d)
	}
}

func TestDelegatedChildFailureUnsettled(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOpts{})
	child := &Plan{Steps: []Step{cmd("echo a > a.txt"), cmd("exit 4")}}
	evs, _ := e.run("p1", Plan{Steps: []Step{{Tool: kernel.DelegateTool, Plan: child}}})
	wantShape(t, evs, "run.started", "tool.started op-1", "tool.failed op-1 delegated_run_failed effect=uncertain", "run.failed")
	var d kernel.ToolFailed
	if err := evs[2].DecodeData(&d); err != nil {
		t.Fatal(err)
	}
	if d.ChildRunID != "p1.op-1" || *d.ChildOpsTotal != 2 || *d.ChildOpsUnresolved != 1 {
		t.Fatalf("tool.failed = %+v", d)
	}
	if !strings.Contains(d.Error, "p1.op-1") {
		t.Fatalf("error does not name the child: %q", d.Error)
	}
}

// startUntilBegun starts run id with plan and returns once its first
// command has written begin.txt to the workspace.
func (e *env) startUntilBegun(ctx context.Context, t *testing.T, id string, plan Plan) {
	t.Helper()
	if _, _, err := e.starter.StartUnchecked(ctx, StartParams{Project: e.project, RunID: id, Plan: plan}); err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(e.workspace(id), "begin.txt")); err == nil {
			return
		}
		if ctx.Err() != nil {
			t.Fatal("the command never began")
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// cancelRun cancels run id, which must then fail rather than complete,
// and returns its events.
func (e *env) cancelRun(ctx context.Context, t *testing.T, id string) []kernel.Event {
	t.Helper()
	if err := temporalConn.Client.CancelWorkflow(ctx, kernel.WorkflowID(e.project, id), ""); err != nil {
		t.Fatal(err)
	}
	if err := e.wait(ctx, id); err == nil {
		t.Fatal("canceled run completed")
	}
	return e.events(id)
}

// Canceling a run mid-command: the command is stopped, its operation is
// recorded as uncertain (it ran for a while) and run.failed says why.
func TestCancelRunMidCommand(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOpts{timeouts: Timeouts{ToolHeartbeat: time.Second}})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	plan := Plan{Steps: []Step{cmd("echo begin > begin.txt; sleep 20; echo end > end.txt"), cmd("echo never > never.txt")}}
	e.startUntilBegun(ctx, t, "c1", plan)
	evs := e.cancelRun(ctx, t, "c1")
	wantShape(t, evs, "run.started", "tool.started op-1", "tool.failed op-1 activity_failed effect=uncertain", "run.failed")
	if msg := data(t, evs[3])["error"].(string); !strings.Contains(msg, "canceled") || !strings.Contains(msg, "op-1") {
		t.Fatalf("run.failed error = %q", msg)
	}
	if v, err := e.starter.View(ctx, e.project, "c1", EventPage{}); err != nil || v.Status != StatusFailed {
		t.Fatalf("view: %+v %v", v.Status, err)
	}
}

// With RECKON_SANDBOX_UNCONFINED every event of the run says so.
func TestUnconfinedEveryEventSaysSo(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOpts{unconfined: true})
	evs, err := e.run("u1", Plan{Steps: []Step{cmd("echo ok > proof.txt")}})
	if err != nil {
		t.Fatal(err)
	}
	wantShape(t, evs, "run.started", "tool.started op-1", "tool.completed op-1", "run.completed")
	for _, ev := range evs {
		if data(t, ev)["unconfined"] != true {
			t.Fatalf("%s does not say the sandbox was off: %s", ev.EventID, ev.Data)
		}
	}
}

// Canceling a run while a step that asks for a re-issue runs: the canceled
// call is uncertain, and no re-issue is recorded, since a canceled run
// starts no further call (a re-issue under a canceled context would never
// be scheduled, yet its tool.started would list an operation that never ran
// as uncertain).
func TestCancelRunDoesNotReissue(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOpts{timeouts: Timeouts{ToolHeartbeat: time.Second}})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	step := cmd("echo begin >> begin.txt; sleep 20; echo end > end.txt")
	step.OnUncertain = OnUncertainReissue
	plan := Plan{Steps: []Step{step, cmd("echo never > never.txt")}}
	e.startUntilBegun(ctx, t, "c2", plan)
	evs := e.cancelRun(ctx, t, "c2")
	wantShape(t, evs, "run.started", "tool.started op-1", "tool.failed op-1 activity_failed effect=uncertain", "run.failed")
	if got := e.readFile("c2", "begin.txt"); got != "begin\n" {
		t.Fatalf("begin.txt = %q: the command ran more than once", got)
	}
}

// A cancel that reaches the run while it is recording a call's outcome
// (the database slow or down) does not cut that record short: the call
// ran and completed, so its tool.completed is journaled, and run.failed
// says the run was canceled. Cutting it short left the operation without
// a terminal event and the run without its end.
func TestCancelDuringRecordKeepsTheOutcome(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOpts{})
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	plan := Plan{Steps: []Step{cmd("echo begin > begin.txt; sleep 1; echo end > end.txt"), cmd("echo never > never.txt")}}
	// Hold the outbox locked from the command's start, so that recording
	// its outcome waits, as it does while the database is unavailable.
	lockTx, err := e.pool.Pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = lockTx.Rollback(context.Background()) }()
	e.startUntilBegun(ctx, t, "c3", plan)
	if _, err := lockTx.Exec(ctx, "LOCK TABLE kernel_event_outbox IN EXCLUSIVE MODE"); err != nil {
		t.Fatal(err)
	}
	// Cancel once the call and the manifest after it have reported (three
	// activities: the manifests before and after, the call), while
	// tool.completed waits for the outbox.
	for completedActivities(ctx, t, e.project, "c3") < 3 {
		if ctx.Err() != nil {
			t.Fatal("the command never ended")
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err := temporalConn.Client.CancelWorkflow(ctx, kernel.WorkflowID(e.project, "c3"), ""); err != nil {
		t.Fatal(err)
	}
	// The cancel reaches the workflow code with the next workflow task,
	// which a pending local activity brings within the task timeout (10 s).
	time.Sleep(12 * time.Second)
	if err := lockTx.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	if err := e.wait(ctx, "c3"); err == nil {
		t.Fatal("canceled run completed")
	}
	evs := e.events("c3")
	wantShape(t, evs, "run.started", "tool.started op-1", "tool.completed op-1", "run.failed")
}

// completedActivities counts the ActivityTaskCompleted events in a run's
// workflow history.
func completedActivities(ctx context.Context, t *testing.T, project, runID string) int {
	t.Helper()
	n := 0
	it := temporalConn.Client.GetWorkflowHistory(ctx, kernel.WorkflowID(project, runID), "", false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	for it.HasNext() {
		ev, err := it.Next()
		if err != nil {
			t.Fatal(err)
		}
		if ev.EventType == enumspb.EVENT_TYPE_ACTIVITY_TASK_COMPLETED {
			n++
		}
	}
	return n
}
