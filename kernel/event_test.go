package kernel

import (
	"bytes"
	"strings"
	"testing"
	"time"
)

func TestCanonicalIgnoresKeyOrderAndWhitespace(t *testing.T) {
	t.Parallel()
	a, err := Canonical([]byte(`{"b": 1, "a": {"y": [1, 2.0, "x"], "x": null}}`))
	if err != nil {
		t.Fatal(err)
	}
	b, err := Canonical([]byte("{\n \"a\":{\"x\":null,\"y\":[1,2,\"x\"]},\"b\":1.0}"))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(a, b) {
		t.Fatalf("canonical forms differ:\n%s\n%s", a, b)
	}
	if string(a) != `{"a":{"x":null,"y":[1,2,"x"]},"b":1}` {
		t.Fatalf("unexpected canonical form %s", a)
	}
}

func TestCanonicalChangedValueDiffers(t *testing.T) {
	t.Parallel()
	for _, pair := range [][2]string{
		{`{"a":1}`, `{"a":2}`},
		{`{"a":"1"}`, `{"a":1}`},
		{`{"a":[1,2]}`, `{"a":[2,1]}`},
		{`{"a":null}`, `{}`},
		{`{"a":9007199254740993}`, `{"a":9007199254740992}`},
		{`{"a":0.1}`, `{"a":0.10000001}`},
	} {
		a, _ := Canonical([]byte(pair[0]))
		b, _ := Canonical([]byte(pair[1]))
		if bytes.Equal(a, b) {
			t.Errorf("%s and %s have the same canonical form %s", pair[0], pair[1], a)
		}
	}
}

func TestPayloadDigestIgnoresKeyAndTimezoneSpelling(t *testing.T) {
	t.Parallel()
	ts := time.Date(2026, 11, 30, 10, 0, 0, 0, time.UTC)
	e1 := Event{SourceID: "a", EventID: "1", Project: "p", RunID: "r", Type: TypeToolCompleted, TS: ts, Actor: "agent",
		Data: []byte(`{"operation_id":"op-1","result_summary":"ok"}`)}
	e2 := e1
	e2.SourceID, e2.EventID = "b", "2"
	e2.TS = ts.In(time.FixedZone("x", 3600))
	e2.Data = []byte(`{ "result_summary":"ok", "operation_id":"op-1" }`)
	digest := func(e Event) []byte {
		p, err := e.Prepare()
		if err != nil {
			t.Fatal(err)
		}
		return p.Digest
	}
	d1, d2 := digest(e1), digest(e2)
	if !bytes.Equal(d1, d2) {
		t.Fatal("digest depends on the key, the zone spelling or key order")
	}
	e2.Data = []byte(`{"operation_id":"op-1","result_summary":"ok!"}`)
	d2 = digest(e2)
	if bytes.Equal(d1, d2) {
		t.Fatal("changed data gives the same digest")
	}
}

func TestDecodeEventNamesTheField(t *testing.T) {
	t.Parallel()
	base := `"source_id":"s","event_id":"e","project":"p","run_id":"r","actor":"agent","ts":"2026-11-30T10:00:00Z"`
	cases := []struct {
		name, json, field string
	}{
		{"missing project", `{"source_id":"s","event_id":"e","run_id":"r","type":"run.completed","actor":"agent","ts":"2026-11-30T10:00:00Z"}`, `"project"`},
		{"bad ts", `{"source_id":"s","event_id":"e","project":"p","run_id":"r","type":"run.completed","actor":"agent","ts":"yesterday"}`, `"ts"`},
		{"unknown type", `{` + base + `,"type":"tool.exploded"}`, `"type"`},
		{"bad actor", `{"source_id":"s","event_id":"e","project":"p","run_id":"r","actor":"robot","ts":"2026-11-30T10:00:00Z","type":"run.completed"}`, `"actor"`},
		{"tool.started without operation_id", `{` + base + `,"type":"tool.started","data":{"tool":"run_command"}}`, `"data.operation_id"`},
		{"tool.started without tool", `{` + base + `,"type":"tool.started","data":{"operation_id":"op-1"}}`, `"data.tool"`},
		{"tool.failed bad effect", `{` + base + `,"type":"tool.failed","data":{"operation_id":"op-1","error_type":"x","effect":"maybe"}}`, `"data.effect"`},
		{"reconciled bad effect", `{` + base + `,"type":"operation.reconciled","parent_event_id":{"source_id":"s","event_id":"x"},"data":{"operation_id":"op-1","effect":"uncertain","basis":"operator","note":"n"}}`, `"data.effect"`},
		{"reconciled long note", `{` + base + `,"type":"operation.reconciled","parent_event_id":{"source_id":"s","event_id":"x"},"data":{"operation_id":"op-1","effect":"none","basis":"operator","note":"` + strings.Repeat("x", 2001) + `"}}`, `"data.note"`},
		{"reconciled no parent", `{` + base + `,"type":"operation.reconciled","data":{"operation_id":"op-1","effect":"none","basis":"operator","note":"n"}}`, `"parent_event_id"`},
		{"reconciled proposal on a settled effect", `{` + base + `,"type":"operation.reconciled","parent_event_id":{"source_id":"s","event_id":"x"},"data":{"operation_id":"op-1","effect":"none","proposed_effect":"none","basis":"inference","note":"n"}}`, `"data.proposed_effect"`},
		{"reconciled proposal outside the vocabulary", `{` + base + `,"type":"operation.reconciled","parent_event_id":{"source_id":"s","event_id":"x"},"data":{"operation_id":"op-1","effect":"unknown","proposed_effect":"unknown","basis":"inference","note":"n"}}`, `"data.proposed_effect"`},
		{"data not object", `{` + base + `,"type":"run.completed","data":[1]}`, `"data"`},
		{"run.failed without error", `{` + base + `,"type":"run.failed","data":{}}`, `"data.error"`},
		// Fields readers decode are typed at the boundary, or one agent's
		// event could break a listing.
		{"tool.started child_run_id not a string", `{` + base + `,"type":"tool.started","data":{"operation_id":"op-1","tool":"delegate","child_run_id":5}}`, `"data.child_run_id"`},
		{"tool.started reissue_of not a string", `{` + base + `,"type":"tool.started","data":{"operation_id":"op-1","tool":"x","reissue_of":["op-0"]}}`, `"data.reissue_of"`},
		{"tool.started negative attempt", `{` + base + `,"type":"tool.started","data":{"operation_id":"op-1","tool":"x","attempt":-1}}`, `"data.attempt"`},
		{"tool.started fractional attempt", `{` + base + `,"type":"tool.started","data":{"operation_id":"op-1","tool":"x","attempt":1.5}}`, `"data.attempt"`},
		{"tool.started empty tool", `{` + base + `,"type":"tool.started","data":{"operation_id":"op-1","tool":null}}`, `"data.tool" must not be empty`},
		{"tool.started manifest not an object", `{` + base + `,"type":"tool.started","data":{"operation_id":"op-1","tool":"x","workspace_manifest":"abc"}}`, `"data.workspace_manifest"`},
		{"tool.started manifest without digest", `{` + base + `,"type":"tool.started","data":{"operation_id":"op-1","tool":"x","workspace_manifest":{"files":1}}}`, `"data.workspace_manifest.digest"`},
		{"tool.completed manifest negative bytes", `{` + base + `,"type":"tool.completed","data":{"operation_id":"op-1","workspace_manifest":{"digest":"d","bytes":-1}}}`, `"data.workspace_manifest.bytes"`},
		{"run.started workspace not a string", `{` + base + `,"type":"run.started","data":{"workspace":{"path":"/"}}}`, `"data.workspace"`},
		{"verdict without operations", `{` + base + `,"type":"supervisor.verdict","data":{"kind":"reconciliation","supervisor":"s","operation_ids":[]}}`, `"data.operation_ids" must list at least one entry`},
		{"verdict needs_attention not a bool", `{` + base + `,"type":"supervisor.verdict","data":{"kind":"reconciliation","supervisor":"s","operation_ids":["a"],"needs_attention":"yes"}}`, `"data.needs_attention"`},
		{"run.awaiting without operation_id", `{` + base + `,"type":"run.awaiting","data":{}}`, `"data.operation_id"`},
		{"run.awaiting until not a time", `{` + base + `,"type":"run.awaiting","data":{"operation_id":"op-1","until":"soon"}}`, `"data.until"`},
		{"run.resumed without reconciliation", `{` + base + `,"type":"run.resumed","data":{"operation_id":"op-1","effect":"occurred"}}`, `"data.reconciliation"`},
		{"run.resumed uncertain", `{` + base + `,"type":"run.resumed","data":{"operation_id":"op-1","effect":"uncertain","reconciliation":{"source_id":"kernel","event_id":"x"}}}`, `"data.effect"`},
		{"run.resumed bad basis", `{` + base + `,"type":"run.resumed","data":{"operation_id":"op-1","effect":"none","basis":"hunch","reconciliation":{"source_id":"kernel","event_id":"x"}}}`, `"data.basis"`},
		{"reconciled bad supersedes", `{` + base + `,"type":"operation.reconciled","parent_event_id":{"source_id":"s","event_id":"x"},"data":{"operation_id":"op-1","effect":"none","basis":"operator","note":"n","supersedes":{"event_id":"x"}}}`, `"data.supersedes"`},
	}
	for _, c := range cases {
		_, err := DecodeEvent([]byte(c.json))
		if err == nil {
			t.Errorf("%s: accepted", c.name)
			continue
		}
		if ErrorCode(err) != EInvalid || !strings.Contains(err.Error(), c.field) {
			t.Errorf("%s: error %q (code %s) does not name %s", c.name, err, ErrorCode(err), c.field)
		}
	}
}

func TestDecodeEventAcceptsAProposalOnUnknown(t *testing.T) {
	t.Parallel()
	ev, err := DecodeEvent([]byte(`{"source_id":"kernel","event_id":"e","project":"p","run_id":"r","actor":"supervisor","ts":"2026-11-30T10:00:00Z",
		"type":"operation.reconciled","parent_event_id":{"source_id":"kernel","event_id":"s"},
		"data":{"operation_id":"op-1","effect":"unknown","proposed_effect":"occurred","basis":"inference","note":"held"}}`))
	if err != nil {
		t.Fatal(err)
	}
	var d Reconciliation
	if err := ev.DecodeData(&d); err != nil || d.ProposedEffect != EffectOccurred {
		t.Fatalf("proposed_effect not read: %+v %v", d, err)
	}
}

// A run's wait and its end are events of the run that name the operation
// (the journal's operation_id column) and never settle it.
func TestDecodeEventAcceptsAWaitAndItsEnd(t *testing.T) {
	t.Parallel()
	base := `"source_id":"kernel","event_id":"e","project":"p","run_id":"r","actor":"kernel","ts":"2026-11-30T10:00:00Z"`
	for _, raw := range []string{
		`{` + base + `,"type":"run.awaiting","data":{"operation_id":"op-1","until":"2026-12-03T10:00:00Z"}}`,
		`{` + base + `,"type":"run.resumed","data":{"operation_id":"op-1","effect":"occurred","basis":"probe","reconciliation":{"source_id":"kernel","event_id":"x"}}}`,
	} {
		ev, err := DecodeEvent([]byte(raw))
		if err != nil {
			t.Fatalf("%s: %v", raw, err)
		}
		p, err := ev.Prepare()
		if err != nil || p.OperationID != "op-1" || p.Settles || ev.Settles() {
			t.Fatalf("%s: operation %q settles %v (%v)", ev.Type, p.OperationID, p.Settles, err)
		}
	}
}

func TestDecodeEventKeepsUnknownDataFields(t *testing.T) {
	t.Parallel()
	ev, err := DecodeEvent([]byte(`{"source_id":"s","event_id":"e","project":"p","run_id":"r","actor":"agent","ts":"2026-11-30T10:00:00+01:00",
		"type":"tool.started","data":{"operation_id":"op-1","tool":"x","custom":{"k":1}}}`))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(ev.Data), `"custom"`) {
		t.Fatalf("unknown field dropped: %s", ev.Data)
	}
	if ev.TS.Location() != time.UTC || ev.TS.Hour() != 9 {
		t.Fatalf("ts not normalised to UTC: %v", ev.TS)
	}
}

func TestSettles(t *testing.T) {
	t.Parallel()
	mk := func(typ, data string) Event { return Event{Type: typ, Data: []byte(data)} }
	cases := []struct {
		ev   Event
		want bool
	}{
		{mk(TypeToolCompleted, `{"operation_id":"o"}`), true},
		{mk(TypeToolBlocked, `{"operation_id":"o","reason":"r"}`), true},
		{mk(TypeOperationReconciled, `{"operation_id":"o","effect":"unknown"}`), true},
		{mk(TypeToolFailed, `{"operation_id":"o","error_type":"x","effect":"none"}`), true},
		{mk(TypeToolFailed, `{"operation_id":"o","error_type":"x","effect":"occurred"}`), true},
		{mk(TypeToolFailed, `{"operation_id":"o","error_type":"x","effect":"uncertain"}`), false},
		{mk(TypeToolFailed, `{"operation_id":"o","error_type":"activity_failed"}`), false},
		{mk(TypeToolStarted, `{"operation_id":"o","tool":"t"}`), false},
		{mk(TypeRunCompleted, `{}`), false},
	}
	for i, c := range cases {
		if got := c.ev.Settles(); got != c.want {
			t.Errorf("case %d %s %s: Settles=%v, want %v", i, c.ev.Type, c.ev.Data, got, c.want)
		}
	}
}

func TestCanonicalStringEscapes(t *testing.T) {
	t.Parallel()
	a, err := Canonical([]byte(`{"s":"caf\u00e9 <b>&\"\\\n\u0001"}`))
	if err != nil {
		t.Fatal(err)
	}
	b, err := Canonical([]byte("{\"s\":\"café <b>&\\\"\\\\\\n\\u0001\"}"))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(a, b) || string(a) != `{"s":"café <b>&\"\\\n\u0001"}` {
		t.Fatalf("escapes: %s vs %s", a, b)
	}
}

func TestPrepareMatchesItsParts(t *testing.T) {
	t.Parallel()
	e := Event{SourceID: "s", EventID: "e", Project: "p", RunID: "r", Type: TypeToolFailed, TS: time.Now(), Actor: "kernel",
		ParentEventID: &EventKey{SourceID: "s", EventID: "x"},
		Data:          []byte(`{"operation_id":"op-9","error_type":"activity_failed","effect":"occurred","child_ops_total":2}`)}
	p, err := e.Prepare()
	if err != nil {
		t.Fatal(err)
	}
	if p.OperationID != "op-9" || !p.Settles || p.Settles != e.Settles() || p.OperationID != e.OperationID() {
		t.Fatalf("prepared %+v disagrees with the event's own accessors", p)
	}
	if len(p.Digest) != 32 {
		t.Fatalf("digest length %d", len(p.Digest))
	}
	e.Data = []byte(`{"operation_id":"op-9","error_type":"activity_failed","effect":"occurred","child_ops_total":-1}`)
	if _, err := e.Prepare(); err == nil || !strings.Contains(err.Error(), "child_ops_total") {
		t.Fatalf("negative child_ops_total: %v", err)
	}
}

// TestCanonicalNumbersAreExact: two numbers that differ in value never
// share a canonical form, even where float64 cannot tell them apart
// (integers past int64, decimals past 17 significant digits): the
// journal answers "repeated" for an equal canonical form, so a changed
// amount or id under the same key would otherwise be taken for a
// redelivery, and the journal would store the rounded value instead of
// the one sent. Equal values spelt differently still share one form, and
// the forms of numbers float64 holds exactly are what they always were.
func TestCanonicalNumbersAreExact(t *testing.T) {
	t.Parallel()
	for _, pair := range [][2]string{
		{`{"a":12345678901234567890}`, `{"a":12345678901234567891}`},
		{`{"a":18446744073709551616}`, `{"a":18446744073709551617}`},
		{`{"a":0.1}`, `{"a":0.10000000000000001}`},
		{`{"a":1.0000000000000002}`, `{"a":1.00000000000000021}`},
		{`{"a":-9223372036854775809}`, `{"a":-9223372036854775810}`},
		{`{"a":1e400}`, `{"a":2e400}`},
	} {
		a, err1 := Canonical([]byte(pair[0]))
		b, err2 := Canonical([]byte(pair[1]))
		if err1 != nil || err2 != nil {
			t.Fatalf("%v %v", err1, err2)
		}
		if bytes.Equal(a, b) {
			t.Errorf("%s and %s have the same canonical form %s", pair[0], pair[1], a)
		}
	}
	for _, same := range [][2]string{
		{`{"a":12345678901234567891}`, `{"a":1.2345678901234567891e19}`},
		{`{"a":0.10000000000000001}`, `{"a":10000000000000001e-17}`},
		{`{"a":1.50}`, `{"a":15e-1}`},
		{`{"a":100}`, `{"a":1e2}`},
	} {
		a, _ := Canonical([]byte(same[0]))
		b, _ := Canonical([]byte(same[1]))
		if !bytes.Equal(a, b) {
			t.Errorf("%s and %s are the same number but canonical forms %s and %s", same[0], same[1], a, b)
		}
	}
	// Numbers float64 holds exactly keep their earlier canonical form, so
	// the digests of events already journaled stay what they were.
	for in, want := range map[string]string{
		`1.0`: `1`, `0.1`: `0.1`, `1.5e300`: `1.5e+300`, `2.5e-7`: `2.5e-07`, `1e15`: `1e+15`,
		`9007199254740993`: `9007199254740993`, `-0.0`: `0`, `123.456`: `123.456`,
	} {
		got, err := Canonical([]byte(in))
		if err != nil || string(got) != want {
			t.Errorf("Canonical(%s) = %s %v, want %s", in, got, err, want)
		}
	}
}

// TestToolFailedNullEffectIsAbsent: effect is optional in docs/design.md
// (tool.failed {..., effect?, ...}) and null is absent for every other
// optional data field, so "effect": null reads as a failure without an
// effect (unsettled, as the legacy rule says); an empty string or a
// value outside the vocabulary is still refused.
func TestToolFailedNullEffectIsAbsent(t *testing.T) {
	t.Parallel()
	base := `{"source_id":"s","event_id":"e","project":"p","run_id":"r","actor":"agent","ts":"2026-11-30T10:00:00Z","type":"tool.failed","data":`
	e, err := DecodeEvent([]byte(base + `{"operation_id":"op-1","error_type":"activity_failed","error":"lost","effect":null}}`))
	if err != nil {
		t.Fatalf("effect null refused: %v", err)
	}
	if e.Settles() {
		t.Fatal("a failure with effect null settles its operation; want it read as uncertain")
	}
	p, err := e.Prepare()
	if err != nil || p.Settles {
		t.Fatalf("prepared: settles=%v err=%v, want unsettled", p.Settles, err)
	}
	for _, eff := range []string{`""`, `"unknown"`, `1`} {
		if _, err := DecodeEvent([]byte(base + `{"operation_id":"op-1","error_type":"x","error":"e","effect":` + eff + `}}`)); err == nil || !strings.Contains(err.Error(), `"data.effect"`) {
			t.Errorf("effect %s: %v, want refused naming data.effect", eff, err)
		}
	}
}

// TestAccessorsReadDataAsTheJournalsColumns: OperationID and Settles read
// operation_id and effect by their exact names, as Prepare does for the
// journal's columns, so members whose names differ only in case (kept in
// data, as members no type declares are) make neither disagree with the
// journal: encoding/json's matching without regard to case had an agent's
// "EFFECT": "occurred" settle in Go an operation its column left open.
func TestAccessorsReadDataAsTheJournalsColumns(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		typ, data string
		op        string
		settles   bool
	}{
		{TypeToolFailed, `{"operation_id":"op-1","OPERATION_ID":"op-2","effect":"uncertain","EFFECT":"occurred","error_type":"activity_failed"}`, "op-1", false},
		{TypeToolFailed, `{"Operation_Id":"op-2","operation_id":"op-1","Effect":"none","effect":"occurred","error_type":"activity_failed"}`, "op-1", true},
		{TypeToolStarted, `{"operation_id":"op-1","tool":"run_command","OPERATION_ID":"op-2"}`, "op-1", false},
		{TypeToolCompleted, ` {"operation_id" : "op-\u0031"} `, "op-1", true},
	} {
		e := Event{SourceID: "s", EventID: "e", Project: "p", RunID: "r", Type: c.typ, TS: time.Now(), Actor: "agent", Data: []byte(c.data)}
		p, err := e.Prepare()
		if err != nil {
			t.Fatalf("%s: %v", c.data, err)
		}
		if e.OperationID() != c.op || p.OperationID != c.op || e.Settles() != c.settles || p.Settles != c.settles {
			t.Fatalf("%s: OperationID %q Settles %v, prepared %q %v; want %q %v",
				c.data, e.OperationID(), e.Settles(), p.OperationID, p.Settles, c.op, c.settles)
		}
	}
	for _, data := range []string{``, `null`, `[]`, `{"operation_id":1}`, `{"operation_id":`, `"op-1"`} {
		if id := (Event{Type: TypeToolFailed, Data: []byte(data)}).OperationID(); id != "" {
			t.Fatalf("%q: OperationID %q, want none", data, id)
		}
		if (Event{Type: TypeToolFailed, Data: []byte(data)}).Settles() {
			t.Fatalf("%q: settles", data)
		}
	}
}
