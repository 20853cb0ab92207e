package temporalx

import (
	"bytes"
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/rs/zerolog"
)

// TestSDKKeysAreSnakeCase: the Temporal SDK's keys land in reckon's
// convention (Error → error, RunID → run_id, durations in _ms), so one
// query finds a run's lines whoever wrote them.
func TestSDKKeysAreSnakeCase(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		"RunID": "run_id", "WorkflowID": "workflow_id", "Error": "error", "ActivityType": "activity_type",
		"wf-namespace": "wf_namespace", "run_id": "run_id", "Attempt": "attempt", "TaskQueue": "task_queue", "IDType": "id_type",
	} {
		if got := SnakeKey(in); got != want {
			t.Errorf("SnakeKey(%q) = %q, want %q", in, got, want)
		}
	}
	var buf bytes.Buffer
	l := SDKLogger(zerolog.New(&buf))
	l.Warn("activity failed", "RunID", "r1", "Error", errors.New("boom"), "Duration", 1500*time.Millisecond)
	var m map[string]any
	if err := json.Unmarshal(buf.Bytes(), &m); err != nil {
		t.Fatal(err)
	}
	if m["run_id"] != "r1" || m["error"] != "boom" || m["duration_ms"] != 1500.0 {
		t.Fatalf("SDK line = %s", buf.String())
	}
	for _, k := range []string{"RunID", "Error", "Duration"} {
		if _, ok := m[k]; ok {
			t.Fatalf("SDK key %s kept: %s", k, buf.String())
		}
	}
}
