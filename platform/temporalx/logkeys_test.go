package temporalx

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"go.temporal.io/server/common/log/tag"
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

// TestServerLoggerDemotesStartTransients: the server's errors stay errors,
// but the two start-up transients it recovers from itself — a call the
// frontend refused while not yet healthy, and the first load of the Nexus
// endpoints from a matching service not yet in the ring (it then reads
// them from persistence) — are logged at debug.
func TestServerLoggerDemotesStartTransients(t *testing.T) {
	t.Parallel()
	var buf bytes.Buffer
	l := serverLogger{l: zerolog.New(&buf)}
	level := func() string {
		t.Helper()
		var m map[string]any
		if err := json.Unmarshal(buf.Bytes(), &m); err != nil {
			t.Fatalf("%v: %s", err, buf.Bytes())
		}
		buf.Reset()
		return fmt.Sprint(m["level"])
	}
	l.Error(nexusInitFallback, tag.Error(errors.New("Not enough hosts to serve the request")))
	if got := level(); got != "debug" {
		t.Errorf("the Nexus cache's fallback logged at %s, want debug", got)
	}
	l.Error("service failures", tag.Error(errors.New("Frontend is not healthy yet")))
	if got := level(); got != "debug" {
		t.Errorf("a refusal while starting logged at %s, want debug", got)
	}
	l.Error("error from matching", tag.Error(errors.New("Not enough hosts to serve the request")))
	if got := level(); got != "error" {
		t.Errorf("another error logged at %s, want error", got)
	}
}
