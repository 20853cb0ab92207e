package kernel

import (
	"bytes"
	"encoding/json"
	"math"
	"reflect"
	"runtime"
	"strings"
	"testing"
	"time"
	"unicode/utf8"
)

// boundarySeeds are the inputs the boundary must refuse (a NUL, invalid
// UTF-8, a lone surrogate, duplicate keys, years 0000 and 9999, a misspelt
// field) and well-formed events, for every fuzz target of the boundary.
var boundarySeeds = []string{
	`{"source_id":"agent-x","event_id":"u1","project":"acme","run_id":"r","type":"tool.started","ts":"2026-11-30T10:00:00Z","actor":"agent","data":{"operation_id":"op-1","tool":"run_command","args":{"command":"echo ok"}}}`,
	`{"source_id":"agent-x","event_id":"u1-` + "\xff" + `","project":"acme","run_id":"r","type":"run.started","ts":"2026-11-30T10:00:00Z","actor":"agent"}`,
	`{"source_id":"agent-x","event_id":"u1-` + "\xfe" + `","project":"acme","run_id":"r","type":"run.started","ts":"2026-11-30T10:00:00Z","actor":"agent"}`,
	`{"source_id":"agent-x","event_id":"u1-\u0000","project":"acme","run_id":"r","type":"run.started","ts":"2026-11-30T10:00:00Z","actor":"agent"}`,
	`{"source_id":"agent-x","event_id":"u1-\udcff","project":"acme","run_id":"r","type":"run.started","ts":"2026-11-30T10:00:00Z","actor":"agent"}`,
	`{"source_id":"agent-x","event_id":"u1","event_id":"u2","project":"acme","run_id":"r","type":"run.started","ts":"2026-11-30T10:00:00Z","actor":"agent"}`,
	`{"source_id":"agent-x","event_id":"u1","project":"acme","run_id":"r","type":"run.started","ts":"0000-01-01T00:00:00Z","actor":"agent"}`,
	`{"source_id":"agent-x","event_id":"u1","project":"acme","run_id":"r","type":"run.started","ts":"9999-12-31T23:59:59Z","actor":"agent"}`,
	`{"source_id":"agent-x","event_id":"u1","project":"acme","runId":"r","type":"run.started","ts":"2026-11-30T10:00:00Z","actor":"agent"}`,
	`{"source_id":"kernel","event_id":"e","project":"p","run_id":"r","type":"operation.reconciled","ts":"2026-11-30T10:00:00Z","actor":"operator:ann","parent_event_id":{"source_id":"a","event_id":"b"},"data":{"operation_id":"op-1","effect":"occurred","note":"a\u0000b","basis":"operator","evidence":{"a":1,"a":2}}}`,
	`{"a":"\ud83d\ude00","b":1.0,"c":[1e400,-0,true,null]}`,
	"[\"\xed\xa0\x80\"]",
	`{}`, `[]`, `"x"`, `nul`,
}

// FuzzDecodeEvent: whatever the bytes, decoding never panics, and an
// event it accepts is one storage can hold: valid UTF-8 without NUL in
// every id, ts in range, and Prepare succeeds with canonical data that is
// itself canonical.
func FuzzDecodeEvent(f *testing.F) {
	for _, s := range boundarySeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		ev, err := DecodeEvent(raw)
		if err != nil {
			if ErrorCode(err) != EInvalid {
				t.Fatalf("DecodeEvent error of code %q: %v", ErrorCode(err), err)
			}
			return
		}
		for _, s := range []string{ev.SourceID, ev.EventID, ev.Project, ev.RunID, ev.Type, ev.Actor} {
			if !utf8.ValidString(s) || bytes.IndexByte([]byte(s), 0) >= 0 {
				t.Fatalf("accepted an id storage refuses: %q", s)
			}
		}
		if ev.TS.Before(MinTS) {
			t.Fatalf("accepted ts %s", ev.TS)
		}
		p, err := ev.Prepare()
		if err != nil {
			t.Fatalf("DecodeEvent accepted what Prepare refuses: %v", err)
		}
		again, err := Canonical(p.CanonicalData)
		if err != nil || !bytes.Equal(again, p.CanonicalData) {
			t.Fatalf("canonical data is not canonical: %s → %s (%v)", p.CanonicalData, again, err)
		}
	})
}

// FuzzCanonical: Canonical never panics; what it accepts has a canonical
// form that is valid JSON and UTF-8, has no NUL escape, is a fixed point,
// and means the same as the input (equal after a plain decode).
func FuzzCanonical(f *testing.F) {
	for _, s := range boundarySeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		c, err := Canonical(raw)
		// The span writer and the reference tree writer accept the same
		// documents and write the same bytes, so journaled digests stay
		// valid.
		want, wantErr := canonicalReference(raw)
		if (err == nil) != (wantErr == nil) || !bytes.Equal(c, want) {
			t.Fatalf("Canonical(%q) = %q, %v; the tree gives %q, %v", raw, c, err, want, wantErr)
		}
		if err != nil {
			return
		}
		if !json.Valid(c) || !utf8.Valid(c) || bytes.Contains(c, []byte(`\u0000`)) {
			t.Fatalf("canonical form of %q is %q", raw, c)
		}
		c2, err := Canonical(c)
		if err != nil || !bytes.Equal(c, c2) {
			t.Fatalf("not a fixed point: %q → %q (%v)", c, c2, err)
		}
		if err := CheckJSON("input", raw); err != nil {
			t.Fatalf("Canonical accepted what CheckJSON refuses: %v", err)
		}
		// The token decoder is a faster encoding/json Decode with
		// UseNumber: on every document it accepts they must agree, or
		// digests of stored events would change.
		before := bytes.Clone(raw)
		got, err := decodeTree(raw)
		if err != nil {
			t.Fatalf("decodeTree refused what Canonical accepted: %v", err)
		}
		if !bytes.Equal(raw, before) {
			t.Fatalf("decodeTree wrote to its input: %q became %q", before, raw)
		}
		if want := decodeJSONReference(t, raw); !reflect.DeepEqual(got, want) {
			t.Fatalf("decodeTree(%q) = %#v; encoding/json gives %#v", raw, got, want)
		}
	})
}

// decodeJSONReference is what the tree decoder (decodeTree) replaced:
// encoding/json's Decode into any with UseNumber.
func decodeJSONReference(t *testing.T, raw []byte) any {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		t.Fatalf("encoding/json refused %q: %v", raw, err)
	}
	return v
}

// FuzzCheckJSON: CheckJSON never panics on any bytes, and a document it
// passes decodes without encoding/json replacing anything: re-encoding the
// decoded value gives the same canonical form.
func FuzzCheckJSON(f *testing.F) {
	for _, s := range boundarySeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		if err := CheckJSON("doc", raw); err != nil || !json.Valid(raw) {
			return
		}
		if !utf8.Valid(raw) {
			t.Fatalf("passed invalid UTF-8: %q", raw)
		}
		dec := json.NewDecoder(bytes.NewReader(raw))
		dec.UseNumber()
		var v any
		if err := dec.Decode(&v); err != nil {
			t.Fatalf("valid, checked, yet does not decode: %v", err)
		}
		// Nothing was replaced or dropped: the decoded value, encoded
		// again, has the input's canonical form.
		out, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		a, err1 := Canonical(raw)
		b, err2 := Canonical(out)
		if err1 != nil || err2 != nil || !bytes.Equal(a, b) {
			t.Fatalf("decoding changed %q into %q (%v, %v)", raw, out, err1, err2)
		}
	})
}

// FuzzCursor: the listings' cursor decoder never panics, refuses with
// EInvalid, and what it accepts re-encodes to a cursor that decodes to the
// same position.
func FuzzCursor(f *testing.F) {
	for _, s := range []string{EncodeCursor("v1:", time.Unix(1700000000, 0), 7), "", "bogus", "djE6MTow", "djE6LTE6LTE", "\x00", "\xff", "%00"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, c string) {
		ts, seq, err := DecodeCursor(c, "v1:")
		if err != nil {
			if ErrorCode(err) != EInvalid || !utf8.ValidString(err.Error()) {
				t.Fatalf("code %q: %q", ErrorCode(err), err)
			}
			return
		}
		ts2, seq2, err := DecodeCursor(EncodeCursor("v1:", ts, seq), "v1:")
		if err != nil || !ts2.Equal(ts) || seq2 != seq {
			t.Fatalf("cursor %q: %v/%d → %v/%d (%v)", c, ts, seq, ts2, seq2, err)
		}
	})
}

// FuzzReconcileBody: the reconcile body through the one strict decoder
// never panics; a body it accepts has text fields storage can hold
// (valid UTF-8, no NUL) and evidence with a canonical form.
func FuzzReconcileBody(f *testing.F) {
	for _, s := range []string{
		`{"project":"acme","run_id":"r1","operation_id":"op-1","effect":"occurred","note":"seen","evidence":{"path":"proof.txt"}}`,
		`{"project":"acme","run_id":"r1","operation_id":"op-1","effect":"occurred","note":"a\u0000b"}`,
		"{\"project\":\"acme\",\"run_id\":\"r1\",\"operation_id\":\"op-1\",\"effect\":\"occurred\",\"note\":\"\xff\"}",
		`{"project":"acme","project":"other","run_id":"r1","operation_id":"op-1","effect":"none","note":"x"}`,
		`{"project":"acme","run_id":"r1","operation_id":"op-1","effect":"none","note":"x","basis":"probe"}`,
		`{"project":"acme","run_id":"r1","operation_id":"op-1","effect":"none","note":"x","evidence":{"a":"\udcff"}}`,
		`{}`, `[]`, `null`, ``,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		var b ReconcileRequest
		if err := DecodeStrict("request body", raw, &b); err != nil {
			if ErrorCode(err) != EInvalid {
				t.Fatalf("code %q: %v", ErrorCode(err), err)
			}
			return
		}
		for _, s := range []string{b.Project, b.RunID, b.OperationID, b.Effect, b.Note} {
			if !utf8.ValidString(s) || strings.IndexByte(s, 0) >= 0 {
				t.Fatalf("accepted %q", s)
			}
		}
		if ev := bytes.TrimSpace(b.Evidence); len(ev) > 0 {
			if _, err := Canonical(ev); err != nil {
				t.Fatalf("accepted evidence %q without a canonical form: %v", ev, err)
			}
		}
	})
}

// The base64 decoder skips \r and \n even in strict mode; a cursor with
// them is not one EncodeCursor made (FuzzEventCursor found the same in
// the journal's cursor).
func TestDecodeCursorRefusesLineBreaks(t *testing.T) {
	t.Parallel()
	c := EncodeCursor("v1:", time.Unix(1700000000, 0), 7)
	if _, _, err := DecodeCursor(c, "v1:"); err != nil {
		t.Fatal(err)
	}
	for _, bad := range []string{"\r" + c, c[:4] + "\n" + c[4:], c + "\r\n"} {
		if _, _, err := DecodeCursor(bad, "v1:"); ErrorCode(err) != EInvalid {
			t.Errorf("cursor %q: %v, want EInvalid", bad, err)
		}
	}
}

// TestDecodeCursorRefusesTheLastSeq: a listing resumes at seq+1, which
// for the largest int64 wraps around and would serve the page again; no
// journal's sequence gets there, so the cursor is refused.
func TestDecodeCursorRefusesTheLastSeq(t *testing.T) {
	t.Parallel()
	c := EncodeCursor("v1:", time.Unix(1700000000, 0), math.MaxInt64)
	if _, _, err := DecodeCursor(c, "v1:"); ErrorCode(err) != EInvalid {
		t.Errorf("cursor at seq MaxInt64: %v, want EInvalid", err)
	}
	if _, _, err := DecodeCursor(EncodeCursor("v1:", time.Unix(1700000000, 0), math.MaxInt64-1), "v1:"); err != nil {
		t.Errorf("cursor at seq MaxInt64-1: %v", err)
	}
}

// dataSeeds are event data for FuzzPrepareMatchesReference: every field
// kind the data types declare, right and wrong, nested, escaped, unsorted,
// null, and the numbers whose spelling the canonical form changes.
var dataSeeds = []string{
	`{"operation_id":"op-1","tool":"run_command","args":{"command":"echo ok","b":[1,2.50,1e2,-0,{"z":1,"a":null}]}}`,
	`{"tool":"t","operation_id":"op\u00e9\n","attempt":2,"workspace_manifest":{"digest":"d","files":1,"bytes":12,"x":[true]}}`,
	`{"operation_id":"op-1","error_type":"e","error":"x","effect":"uncertain","child_ops_total":3,"child_ops_unresolved":null}`,
	`{"operation_id":"op-1","effect":"occurred","note":"n","basis":"probe","evidence":{"b":1,"a":2},"proposed_effect":null}`,
	`{"kind":"reconciliation","operations":["a","b"],"verdicts":[{"operation_id":"x"}]}`,
	`{"operation_id":1}`, `{"operation_id":""}`, `{"operation_id":null}`, `{"attempt":1.0}`, `{"attempt":-1}`, `{"attempt":"1"}`,
	`{"workspace_manifest":[]}`, `{"workspace_manifest":{"digest":""}}`, `{"child_run_id":{"source_id":"a"}}`,
	`{"parent":{"source_id":"a","event_id":"b"}}`, `{ "b" : 1 , "a" : [ ] , "c" : { } }`, `{"a":"\ud83d\ude00\u2028\"\\/"}`,
	`{"n":[12345678901234567890,1.000000000000000000001,1E400,0.1e-2,-0.0,123456789012345678]}`,
	`{"a":{"c":{"e":1,"d":2},"b":3}}`, `{}`, ``, `null`, `[]`, `{"a":1,"a":2}`, `{"a":"\u0000"}`, `{"a":1`, `{"a":1} x`,
}

// FuzzPrepareMatchesReference: Prepare (span readers) and the tree it
// replaced (prepareReference) refuse the same events with the same
// message, and of the others compute the same canonical data, operation_id
// and settlement, for every event type.
func FuzzPrepareMatchesReference(f *testing.F) {
	for i, s := range dataSeeds {
		for typ := range len(KnownTypes) {
			f.Add(uint8(typ), i%2 == 0, []byte(s))
		}
	}
	f.Fuzz(func(t *testing.T, typ uint8, parent bool, data []byte) {
		e := Event{SourceID: "s", EventID: "e", Project: "p", RunID: "r", Type: KnownTypes[int(typ)%len(KnownTypes)],
			TS: time.Unix(1_800_000_000, 0), Actor: "agent", Data: data}
		if parent {
			e.ParentEventID = &EventKey{SourceID: "s", EventID: "p"}
		}
		got, err := e.Prepare()
		canon, op, settles, wantErr := prepareReference(e)
		if (err == nil) != (wantErr == nil) {
			t.Fatalf("%s %q: Prepare says %v; the tree says %v", e.Type, data, err, wantErr)
		}
		if err != nil {
			// Syntax errors are worded by different decoders; every other
			// refusal is the same sentence.
			if !strings.Contains(err.Error(), "is not valid JSON") && err.Error() != wantErr.Error() {
				t.Fatalf("%s %q: Prepare says %q; the tree says %q", e.Type, data, err, wantErr)
			}
			return
		}
		if !bytes.Equal(got.CanonicalData, canon) || got.OperationID != op || got.Settles != settles {
			t.Fatalf("%s %q: Prepare gives %q, %q, %v; the tree %q, %q, %v", e.Type, data,
				got.CanonicalData, got.OperationID, got.Settles, canon, op, settles)
		}
	})
}

// TestPrepareLargeArrayAllocatesItsOutput: preparing an 8 MiB event whose
// data holds 4 million elements allocates about what it writes (the
// canonical data and the envelope, each about the size of the input), not
// a value per element (a tree of values would take about 450 MB), and
// nothing bounds how many such events ingest validates at once.
func TestPrepareLargeArrayAllocatesItsOutput(t *testing.T) {
	e := largeArrayEvent()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	if _, err := e.Prepare(); err != nil {
		t.Fatal(err)
	}
	runtime.ReadMemStats(&after)
	alloc := after.TotalAlloc - before.TotalAlloc
	if limit := uint64(6 * len(e.Data)); alloc > limit {
		t.Fatalf("Prepare of a %d-byte event allocated %d bytes; want at most %d", len(e.Data), alloc, limit)
	}
	t.Logf("Prepare of a %d-byte event allocated %d bytes", len(e.Data), alloc)
}
