package kernel

import (
	"bytes"
	"encoding/json"
	"reflect"
	"testing"
	"time"
)

// TestEventJSONDecodesToThePreparedEvent: the JSON the outbox stores for a
// prepared event decodes to that event — its key, envelope, canonical data
// and the same instant in UTC — and so has the same payload digest.
func TestEventJSONDecodesToThePreparedEvent(t *testing.T) {
	t.Parallel()
	zone := time.FixedZone("x", -7*3600)
	for _, ev := range []Event{
		{SourceID: "agent \"q\"", EventID: "r/op-1/started\n", Project: "acme", RunID: "r", Type: TypeToolStarted,
			TS: time.Date(2026, 11, 30, 10, 0, 0, 123456789, zone), Actor: "agent",
			Data: []byte(`{"tool":"run_command","operation_id":"op-1","args":{"n":1.50,"s":"<é>\t\u0001","z":[3,1e2]}}`)},
		{SourceID: SourceKernel, EventID: "r/op-1/reconciled", Project: "acme", RunID: "r", Type: TypeOperationReconciled,
			TS: time.Date(2026, 11, 30, 10, 0, 1, 0, time.UTC), Actor: "operator:alice",
			ParentEventID: &EventKey{SourceID: "agent", EventID: "r/op-1/started"},
			Data:          []byte(`{"operation_id":"op-1","effect":"unknown","note":"n","basis":"operator"}`)},
		{SourceID: "agent", EventID: "r/run/completed", Project: "acme", RunID: "r", Type: TypeRunCompleted,
			TS: time.Date(2026, 11, 30, 10, 0, 2, 0, time.UTC), Actor: "agent"},
	} {
		p, err := ev.Prepare()
		if err != nil {
			t.Fatalf("%s: %v", ev.Key(), err)
		}
		body := p.EventJSON(ev.Key())
		if !json.Valid(body) {
			t.Fatalf("%s: not JSON: %s", ev.Key(), body)
		}
		var got Event
		if err := json.Unmarshal(body, &got); err != nil {
			t.Fatal(err)
		}
		want := ev
		want.TS, want.Data = ev.TS.UTC(), json.RawMessage(p.CanonicalData)
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("%s: decoded\n%+v\nwant\n%+v\nfrom %s", ev.Key(), got, want, body)
		}
		q, err := got.Prepare()
		if err != nil || !bytes.Equal(q.Digest, p.Digest) {
			t.Fatalf("%s: the decoded event's digest differs (%v)", ev.Key(), err)
		}
	}
}
