package runner

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	historypb "go.temporal.io/api/history/v1"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"
	"google.golang.org/protobuf/encoding/protojson"

	"github.com/rs/zerolog"

	"github.com/seed-7bc021c3/reckon/internal/fakeopenai"
	"github.com/seed-7bc021c3/reckon/kernel"
	"github.com/seed-7bc021c3/reckon/kernel/fault"
	"github.com/seed-7bc021c3/reckon/platform/temporalx"
)

// recordedHistories are real histories of the run workflow, recorded once
// from the embedded server by RECKON_RECORD_HISTORY=1 go test -run
// TestRecordHistories ./kernel/runner/ and committed. Replaying them
// against today's workflow code fails on any non-deterministic change:
// such a change needs workflow versioning (workflow.GetVersion), not a new
// recording. Legacy histories were recorded by an older workflow (before
// ChangeProjectEventIDs) and are never recorded again: they prove that
// runs in flight across an upgrade replay and keep their old event ids.
//
// Frozen histories were recorded by a workflow since changed under a
// version (v1: project-scoped ids, RecordEvent as a regular activity, no
// manifests); only the current ones (v2: local RecordEvent, workspace
// manifests, workspace_tools in the input) are recorded again, so every
// version a run in flight may have stays covered. A current history's
// kernel events go through local activities, whose inputs a history does
// not keep: for those the check is that their markers are there.
var recordedHistories = []struct {
	name           string
	legacy, frozen bool
	plan           Plan
	// settle lists, in order, the waits of the run and how each is
	// settled while the recording runs.
	settle []recordedSettlement
	// agent, when set, records an agent run instead of plan, its model
	// answering from script.
	agent  *Agent
	script []fakeopenai.AgentStep
}{
	// after-effect fault on op-1 → re-issue op-1-r1; a delegate whose child
	// fails uncertain → summarize_child_run; run.failed.
	{"drill_reissue_delegate_failed.json", true, true, reissueDelegatePlan, nil, nil, nil},
	// run_command, then a delegate that completes.
	{"delegate_ok.json", true, true, delegateOKPlan, nil, nil, nil},
	// The same plans under project-scoped event ids.
	{"v1_drill_reissue_delegate_failed.json", false, true, reissueDelegatePlan, nil, nil, nil},
	{"v1_delegate_ok.json", false, true, delegateOKPlan, nil, nil, nil},
	// The same plans under the current workflow.
	{"v2_drill_reissue_delegate_failed.json", false, false, reissueDelegatePlan, nil, nil, nil},
	{"v2_delegate_ok.json", false, false, delegateOKPlan, nil, nil, nil},
	// Two waits (ChangeAwait): op-1 faults after its effect and a probe
	// settles it occurred; op-2 fails, an operator settles it none, and
	// its re-issue op-2-r1 completes.
	{"v2_await_resumed.json", false, false, awaitPlan, []recordedSettlement{
		{"op-1", kernel.EffectOccurred, kernel.BasisProbe}, {"op-2", kernel.EffectNone, kernel.BasisOperator},
	}, nil, nil},
	// An agent run (AgentWorkflow): its run_command faults after the
	// effect, the run waits, a probe settles it occurred, the model is
	// told so, delegates to a child agent and answers.
	{"agent_await_delegate.json", false, false, Plan{}, []recordedSettlement{
		{"op-1-h1", kernel.EffectOccurred, kernel.BasisProbe},
	}, &Agent{Input: "append once, then delegate", Tools: []string{"run_command", "delegate"}}, []fakeopenai.AgentStep{
		calls(appendCall("h1")),
		calls(call("h2", "delegate", `{"input": "say ok"}`)),
		final("ok"),
		final("appended once and delegated"),
	}},
}

// recordedSettlement is one wait of a recorded run and how it is settled.
type recordedSettlement struct{ op, effect, basis string }

var (
	reissueDelegatePlan = Plan{Steps: []Step{
		{Tool: "run_command", Args: json.RawMessage(`{"command": "echo \"$RECKON_OPERATION_ID\" >> effects.txt", "timeout_s": 30}`), OnUncertain: OnUncertainReissue},
		{Tool: kernel.DelegateTool, Plan: &Plan{Steps: []Step{cmd("exit 4")}}},
	}}
	awaitPlan = Plan{Steps: []Step{
		appendStep(OnUncertainAwait),
		{Tool: "run_command", Args: json.RawMessage(`{"command": "test -f again.txt || { touch again.txt; exit 3; }", "timeout_s": 30}`), OnUncertain: OnUncertainAwait},
	}}
	delegateOKPlan = Plan{Steps: []Step{
		cmd("echo ok > proof.txt"),
		{Tool: kernel.DelegateTool, Plan: &Plan{Steps: []Step{cmd("echo child > c.txt")}}},
	}}
)

// replay replays the JSON history at path against the current workflow code.
func replay(path string) error {
	r := worker.NewWorkflowReplayer()
	r.RegisterWorkflowWithOptions(RunWorkflow, workflow.RegisterOptions{Name: WorkflowName})
	r.RegisterWorkflowWithOptions(AgentWorkflow, workflow.RegisterOptions{Name: AgentWorkflowName})
	return r.ReplayWorkflowHistoryFromJSONFile(temporalx.SDKLogger(zerolog.Nop()), path)
}

// TestRecordHistories runs the recorded plans on the real server and checks
// that their fresh histories replay against the workflow code (the same
// check TestReplayRecordedHistories makes on the committed ones). With
// RECKON_RECORD_HISTORY=1 it also rewrites the committed histories in
// testdata.
func TestRecordHistories(t *testing.T) {
	dir := t.TempDir()
	if os.Getenv("RECKON_RECORD_HISTORY") == "1" {
		dir = "testdata"
	}
	m, model := scripted(t)
	e := newEnv(t, envOpts{fault: fault.Config{AfterEffect: "run_command"}, model: model})
	e.resumer(nil)
	for _, rh := range recordedHistories {
		if rh.frozen {
			continue
		}
		runID := "rec-" + strings.TrimSuffix(rh.name, ".json")
		switch {
		case rh.agent != nil:
			m.Script("scripted", rh.script...)
			e.startAgent(runID, *rh.agent)
			for _, s := range rh.settle {
				e.settleAwaited(runID, s.op, s.effect, s.basis)
			}
		case len(rh.settle) == 0:
			_, _ = e.run(runID, rh.plan)
		default:
			e.start(runID, rh.plan)
			for _, s := range rh.settle {
				e.awaiting(runID, s.op)
				e.settle(runID, s.op, s.effect, s.basis)
			}
			if err := e.wait(context.Background(), runID); err != nil {
				t.Fatalf("%s: %v", rh.name, err)
			}
		}
		it := temporalConn.Client.GetWorkflowHistory(context.Background(), kernel.WorkflowID(e.project, runID), "", false, 0)
		h := &historypb.History{}
		for it.HasNext() {
			ev, err := it.Next()
			if err != nil {
				t.Fatal(err)
			}
			h.Events = append(h.Events, ev)
		}
		raw, err := protojson.MarshalOptions{Indent: "  "}.Marshal(h)
		if err != nil {
			t.Fatal(err)
		}
		path := filepath.Join(dir, rh.name)
		if err := os.WriteFile(path, raw, 0o644); err != nil {
			t.Fatal(err)
		}
		if err := replay(path); err != nil {
			t.Errorf("fresh history of %s does not replay: %v", rh.name, err)
		}
		t.Logf("recorded %s: %d events", rh.name, len(h.Events))
	}
}

// TestReplayRecordedHistories is the determinism check: recorded real
// histories must replay against the current workflow code, and each keeps
// the event ids it was recorded with.
func TestReplayRecordedHistories(t *testing.T) {
	for _, rh := range recordedHistories {
		path := filepath.Join("testdata", rh.name)
		if err := replay(path); err != nil {
			t.Errorf("%s does not replay: %v", rh.name, err)
		}
		h := loadHistory(t, path)
		if !rh.frozen {
			if localActivityMarkers(h) == 0 {
				t.Errorf("%s: no local-activity markers: not a history of the current workflow", rh.name)
			}
			continue
		}
		evs := recordedEvents(t, rh.name, h)
		if len(evs) == 0 {
			t.Fatalf("%s: no recorded kernel events", rh.name)
		}
		for _, ev := range evs {
			want := kernel.EventID(ev.Project, ev.RunID, "")
			if rh.legacy {
				want = kernel.LegacyEventID(ev.RunID, "")
			}
			if !strings.HasPrefix(ev.EventID, want) {
				t.Errorf("%s: event id %q, want it to start with %q", rh.name, ev.EventID, want)
			}
		}
	}
}

// loadHistory reads a recorded history.
func loadHistory(t *testing.T, path string) *historypb.History {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	h := &historypb.History{}
	if err := protojson.Unmarshal(raw, h); err != nil {
		t.Fatal(err)
	}
	return h
}

// localActivityMarkers counts the local-activity markers of a recorded
// history (RecordEvent since ChangeLocalRecord).
func localActivityMarkers(h *historypb.History) int {
	n := 0
	for _, he := range h.Events {
		if m := he.GetMarkerRecordedEventAttributes(); m != nil && m.GetMarkerName() == "LocalActivity" {
			n++
		}
	}
	return n
}

// recordedEvents are the kernel events a recorded history hands to the
// RecordEvent activity (before ChangeLocalRecord).
func recordedEvents(t *testing.T, name string, h *historypb.History) []kernel.Event {
	t.Helper()
	var out []kernel.Event
	for _, he := range h.Events {
		a := he.GetActivityTaskScheduledEventAttributes()
		if a == nil || a.GetActivityType().GetName() != ActRecordEvent {
			continue
		}
		var ev kernel.Event
		if err := json.Unmarshal(a.GetInput().GetPayloads()[0].GetData(), &ev); err != nil {
			t.Fatalf("%s: RecordEvent input: %v", name, err)
		}
		out = append(out, ev)
	}
	return out
}
