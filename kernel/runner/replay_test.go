package runner

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	historypb "go.temporal.io/api/history/v1"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"
	"google.golang.org/protobuf/encoding/protojson"

	"github.com/rs/zerolog"
	"github.com/seed-7bc021c3/reckon/kernel/fault"
	"github.com/seed-7bc021c3/reckon/kernel/temporalx"
)

// recordedHistories are real histories of the run workflow, recorded once
// from the embedded server by RECKON_RECORD_HISTORY=1 go test -run
// TestRecordHistories ./kernel/runner/ and committed. Replaying them
// against today's workflow code fails on any non-deterministic change:
// such a change needs workflow versioning (workflow.GetVersion), not a new
// recording.
var recordedHistories = map[string]Plan{
	// after-effect fault on op-1 → re-issue op-1-r1; a delegate whose child
	// fails uncertain → summarize_child_run; run.failed.
	"drill_reissue_delegate_failed.json": {Steps: []Step{
		{Tool: "run_command", Args: json.RawMessage(`{"command": "echo \"$RECKON_OPERATION_ID\" >> effects.txt", "timeout_s": 30}`), OnUncertain: OnUncertainReissue},
		{Tool: DelegateTool, Plan: &Plan{Steps: []Step{cmd("exit 4")}}},
	}},
	// run_command, then a delegate that completes.
	"delegate_ok.json": {Steps: []Step{
		cmd("echo ok > proof.txt"),
		{Tool: DelegateTool, Plan: &Plan{Steps: []Step{cmd("echo child > c.txt")}}},
	}},
}

// replay replays the JSON history at path against the current workflow code.
func replay(path string) error {
	r := worker.NewWorkflowReplayer()
	r.RegisterWorkflowWithOptions(RunWorkflow, workflow.RegisterOptions{Name: WorkflowName})
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
	e := newEnv(t, envOpts{fault: fault.Config{AfterEffect: "run_command"}})
	for name, plan := range recordedHistories {
		runID := "rec-" + name[:len(name)-len(".json")]
		_, _ = e.run(runID, plan)
		it := temporalConn.Client.GetWorkflowHistory(context.Background(), WorkflowID(e.project, runID), "", false, 0)
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
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, raw, 0o644); err != nil {
			t.Fatal(err)
		}
		if err := replay(path); err != nil {
			t.Errorf("fresh history of %s does not replay: %v", name, err)
		}
		t.Logf("recorded %s: %d events", name, len(h.Events))
	}
}

// TestReplayRecordedHistories is the determinism check: recorded real
// histories must replay against the current workflow code.
func TestReplayRecordedHistories(t *testing.T) {
	for name := range recordedHistories {
		if err := replay(filepath.Join("testdata", name)); err != nil {
			t.Errorf("%s does not replay: %v", name, err)
		}
	}
}
