package kernel

import (
	"testing"
	"time"
)

// BenchmarkPrepare measures the per-event CPU cost of ingest and enqueue.
func BenchmarkPrepare(b *testing.B) {
	e := Event{SourceID: "bench", EventID: "e-1", Project: "bench", RunID: "run-1", Type: TypeToolStarted, TS: time.Now(), Actor: "agent",
		Data: []byte(`{"operation_id":"op-1","tool":"run_command","args":{"command":"echo 1 > f"}}`)}
	for i := 0; i < b.N; i++ {
		if _, err := e.Prepare(); err != nil {
			b.Fatal(err)
		}
	}
}
