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

// largeArrayEvent is a valid event of about 8 MiB (the API's body limit)
// whose args hold 4 million numbers: the shape that made validation cost
// about 100 bytes an element when data was decoded into a tree.
func largeArrayEvent() Event {
	const n = 4 << 20
	data := make([]byte, 0, 2*n+64)
	data = append(data, `{"operation_id":"op-1","tool":"run_command","args":[`...)
	for i := range n {
		if i > 0 {
			data = append(data, ',')
		}
		data = append(data, '0')
	}
	data = append(data, "]}"...)
	return Event{SourceID: "bench", EventID: "e-1", Project: "bench", RunID: "run-1", Type: TypeToolStarted,
		TS: time.Now(), Actor: "agent", Data: data}
}

// BenchmarkPrepareLargeArray measures Prepare's time and memory on
// largeArrayEvent (see -benchmem's B/op).
func BenchmarkPrepareLargeArray(b *testing.B) {
	e := largeArrayEvent()
	b.ReportAllocs()
	for b.Loop() {
		if _, err := e.Prepare(); err != nil {
			b.Fatal(err)
		}
	}
}
