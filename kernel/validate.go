package kernel

import (
	"bytes"
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"sync"
	"time"
	"unicode/utf8"
)

// MaxKeyLen bounds identifiers (source_id, event_id, project, run_id,
// operation_id) so a runaway client cannot bloat indexes.
const MaxKeyLen = 512

// Bounds of an event's ts at the boundary: nothing reckon records happened
// before the Unix epoch, and a clock more than a day ahead is wrong, not
// early (year 9999 would sort after every real event forever).
var MinTS = time.Unix(0, 0).UTC()

// MaxTSAhead is how far past the server's clock an event's ts may lie.
const MaxTSAhead = 24 * time.Hour

// wireEvent is the event as it arrives over HTTP: ts is a string so a bad
// timestamp is reported by field, and data is raw so unknown fields survive.
type wireEvent struct {
	SourceID      *string         `json:"source_id"`
	EventID       *string         `json:"event_id"`
	Project       *string         `json:"project"`
	RunID         *string         `json:"run_id"`
	Type          *string         `json:"type"`
	TS            *string         `json:"ts"`
	Actor         *string         `json:"actor"`
	ParentEventID json.RawMessage `json:"parent_event_id"`
	Data          json.RawMessage `json:"data"`
}

// DecodeEvent parses one event from JSON and validates it. The error is an
// *Error with code EInvalid whose message names the offending field.
//
// Before decoding, the bytes are checked (CheckJSON): a NUL, invalid UTF-8
// or a duplicate key anywhere is refused, never replaced or resolved. An
// envelope field the event model does not know is refused too (a misspelt
// "runId" would otherwise vanish); unknown fields inside data are kept.
// ts must lie in [MinTS, now + MaxTSAhead].
func DecodeEvent(raw []byte) (Event, error) {
	if err := CheckJSON("event", raw); err != nil {
		return Event{}, err
	}
	var w wireEvent
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&w); err != nil {
		return Event{}, Errorf(EInvalid, "event is not a JSON object with the expected fields and field types: %v", err)
	}
	if dec.More() {
		return Event{}, Errorf(EInvalid, "event: trailing data after the JSON object")
	}
	str := func(p *string) string {
		if p == nil {
			return ""
		}
		return *p
	}
	e := Event{
		SourceID: str(w.SourceID), EventID: str(w.EventID), Project: str(w.Project),
		RunID: str(w.RunID), Type: str(w.Type), Actor: str(w.Actor), Data: w.Data,
	}
	if w.TS == nil || *w.TS == "" {
		return Event{}, fieldErr(e, "ts", "is required (RFC 3339, e.g. 2026-11-30T10:00:00Z)")
	}
	ts, err := time.Parse(time.RFC3339Nano, *w.TS)
	if err != nil {
		return Event{}, fieldErr(e, "ts", "must be RFC 3339 (e.g. 2026-11-30T10:00:00Z), got %q", *w.TS)
	}
	e.TS = ts.UTC()
	if e.TS.Before(MinTS) || e.TS.After(time.Now().Add(MaxTSAhead)) {
		return Event{}, fieldErr(e, "ts", "must lie between %s and now + %s (clock skew allowance), got %q", MinTS.Format(time.RFC3339), MaxTSAhead, *w.TS)
	}
	if p := bytes.TrimSpace(w.ParentEventID); len(p) > 0 && !bytes.Equal(p, []byte("null")) {
		var k EventKey
		if err := json.Unmarshal(p, &k); err != nil || k.SourceID == "" || k.EventID == "" {
			return Event{}, fieldErr(e, "parent_event_id", "must be null or {\"source_id\": ..., \"event_id\": ...} with both set")
		}
		e.ParentEventID = &k
	}
	if err := e.Validate(); err != nil {
		return Event{}, err
	}
	return e, nil
}

func fieldErr(e Event, field, format string, args ...any) error {
	where := "event"
	if e.SourceID != "" || e.EventID != "" {
		where = fmt.Sprintf("event %s/%s", e.SourceID, e.EventID)
	}
	return Errorf(EInvalid, "%s: field %q %s", where, field, fmt.Sprintf(format, args...))
}

// Validate checks required fields, the type vocabulary and the shape of data
// for the event's type. Unknown extra fields in data are allowed.
func (e Event) Validate() error {
	_, _, err := e.validate()
	return err
}

// ValidateNew checks the rules of docs/design.md's event model that events
// recorded by earlier versions may break, for an event that is being
// written now through POST /v1/events (call it after DecodeEvent). Today
// that is tool.failed's data.error, which docs/design.md lists as required
// ({operation_id, error_type, error, effect?, ...}) but Validate has never
// required: the journal, the outbox's checked delivery and replay read
// stored events with Validate alone, so a failure journaled without an
// error message still loads, while a new one must say what went wrong.
// Required means what reckon:"required" means for run.failed's error and
// tool.blocked's reason: a non-empty string. And a run id may not be "."
// or "..": clients resolve such a path segment away, so GET
// /v1/runs/{run_id} (the console's detail panel) could never show the run,
// and its operations would be decided blind.
func (e Event) ValidateNew() error {
	if e.RunID == "." || e.RunID == ".." {
		return fieldErr(e, "run_id", "%q is not a run id that GET /v1/runs/{run_id} can address (clients resolve it as a path segment); choose another", e.RunID)
	}
	if e.Type != TypeToolFailed {
		return nil
	}
	var d struct {
		Error *string `json:"error"`
	}
	if err := e.DecodeData(&d); err != nil {
		return fieldErr(e, "data", "%v", err)
	}
	switch {
	case d.Error == nil:
		return fieldErr(e, "data.error", "is required for %s (what went wrong, for the operator and the supervisor)", e.Type)
	case *d.Error == "":
		return fieldErr(e, "data.error", "must not be empty")
	}
	return nil
}

// keyFault says what keeps s from being one of an event's identifiers
// (source_id, event_id, project, run_id, type, actor), "" when nothing.
func keyFault(s string) string {
	switch {
	case s == "":
		return "is required"
	case len(s) > MaxKeyLen:
		return fmt.Sprintf("is longer than %d bytes", MaxKeyLen)
	case !utf8.ValidString(s):
		return "is not valid UTF-8"
	case strings.IndexByte(s, 0) >= 0:
		return "contains a NUL character, which reckon does not store"
	}
	return ""
}

// ValidateKey checks an identifier given outside an event (a path or
// query parameter naming a project or run) by the rules ingest holds an
// event's identifiers to: whatever an event may carry is accepted.
func ValidateKey(field, s string) error {
	if fault := keyFault(s); fault != "" {
		return Errorf(EInvalid, "%s: %s", field, fault)
	}
	return nil
}

// validate checks the event and returns its data's canonical form and the
// members of data its type reads (and operation_id and effect, which
// Prepare reads for every type), for Prepare to reuse.
func (e Event) validate() (canon []byte, top spanFields, err error) {
	for _, f := range []struct{ name, val string }{
		{"source_id", e.SourceID}, {"event_id", e.EventID}, {"project", e.Project},
		{"run_id", e.RunID}, {"type", e.Type}, {"actor", e.Actor},
	} {
		if fault := keyFault(f.val); fault != "" {
			return nil, nil, fieldErr(e, f.name, "%s", fault)
		}
	}
	if e.TS.IsZero() {
		return nil, nil, fieldErr(e, "ts", "is required (RFC 3339)")
	}
	if !validActor(e.Actor) {
		return nil, nil, fieldErr(e, "actor", "must be kernel, agent, supervisor or operator:<name>, got %q", e.Actor)
	}
	if e.ParentEventID != nil && (e.ParentEventID.SourceID == "" || e.ParentEventID.EventID == "") {
		return nil, nil, fieldErr(e, "parent_event_id", "must carry both source_id and event_id")
	}
	data := bytes.TrimSpace(e.Data)
	if len(data) == 0 || bytes.Equal(data, []byte("null")) {
		data = []byte("{}")
	}
	if data[0] != '{' {
		return nil, nil, fieldErr(e, "data", "must be a JSON object")
	}
	valid, err := checkedJSON("data", data)
	if err != nil {
		return nil, nil, fieldErr(e, "data", "%s", ErrorMessage(err))
	}
	if !valid {
		return nil, nil, fieldErr(e, "data", "is not valid JSON: %v", syntaxError(data))
	}
	d := newData(e.Type)
	specs := []fieldSpec(nil)
	if d != nil {
		specs = specsOf(reflect.TypeOf(d).Elem())
	}
	top = fieldsOf(data, func(name []byte) bool {
		return string(name) == "operation_id" || string(name) == "effect" || hasSpec(specs, name)
	})
	return canonicalJSON(data), top, validateData(e, d, top)
}

// hasSpec reports whether specs declare a field called name.
func hasSpec(specs []fieldSpec, name []byte) bool {
	for _, s := range specs {
		if s.name == string(name) {
			return true
		}
	}
	return false
}

// validateData checks data (its members top, as fieldsOf found them)
// against the event type's declared data type d (data.go, nil for an
// unknown type): it decodes the members into that type field by field,
// with exact key matches, naming the first bad field, then applies the
// type's own rules.
func validateData(e Event, d any, top spanFields) error {
	if d == nil {
		return fieldErr(e, "type", "is not a known event type (%v), got %q", KnownTypes, e.Type)
	}
	if err := decodeFields(e, top, d); err != nil {
		return err
	}
	if r, ok := d.(dataRules); ok {
		// null is absent here too, as decodeFields reads it: an optional
		// field sent as null ("effect": null from a client that encodes
		// a missing value so) is not refused as an empty value.
		return r.check(e, top.has)
	}
	return nil
}

// fieldSpec is one field of a data type, as decodeFields reads it.
type fieldSpec struct {
	name     string // JSON name
	index    int
	kind     reflect.Kind // of the field, or of the element behind a pointer
	ptr      bool
	required bool
	key      bool // bounded by MaxKeyLen
	raw      bool // json.RawMessage: any JSON, left unset
	eventKey bool // *EventKey
}

var fieldSpecs sync.Map // reflect.Type → []fieldSpec

var (
	rawType = reflect.TypeOf(json.RawMessage(nil))
	keyType = reflect.TypeOf(EventKey{})
)

func specsOf(t reflect.Type) []fieldSpec {
	if v, ok := fieldSpecs.Load(t); ok {
		return v.([]fieldSpec)
	}
	var out []fieldSpec
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if name == "" || name == "-" {
			continue
		}
		s := fieldSpec{name: name, index: i, kind: f.Type.Kind()}
		for _, opt := range strings.Split(f.Tag.Get("reckon"), ",") {
			switch opt {
			case "required":
				s.required = true
			case "key":
				s.key = true
			}
		}
		switch {
		case f.Type == rawType:
			s.raw = true
		case f.Type.Kind() == reflect.Pointer && f.Type.Elem() == keyType:
			s.eventKey = true
		case f.Type.Kind() == reflect.Pointer:
			s.ptr, s.kind = true, f.Type.Elem().Kind()
		}
		out = append(out, s)
	}
	fieldSpecs.Store(t, out)
	return out
}

// decodeFields fills dst (a pointer to a data struct) from the members of
// data that its fields name. Strings must be strings, numbers non-negative
// integers, bools true or false, lists lists of strings, event keys
// {"source_id", "event_id"}; null is absent. Unknown fields of data are not
// read here and are kept in the journal.
func decodeFields(e Event, f spanFields, dst any) error {
	return decodeFieldsAt(e, "data.", f, dst)
}

// decodeFieldsAt is decodeFields for an object nested at prefix (a
// pointer-to-struct field such as tool.started's workspace_manifest).
func decodeFieldsAt(e Event, prefix string, f spanFields, dst any) error {
	v := reflect.ValueOf(dst).Elem()
	for _, s := range specsOf(v.Type()) {
		if s.raw {
			continue
		}
		// The field's path is spelt out only in an error: a string built
		// per field was most of validation's allocations.
		field := func() string { return prefix + s.name }
		raw, present := f.get(s.name)
		if !present || isNull(raw) {
			switch {
			case s.required && present && s.kind == reflect.String:
				return fieldErr(e, field(), "must not be empty")
			case s.required:
				return fieldErr(e, field(), "is required for %s", e.Type)
			}
			continue
		}
		if err := decodeField(e, s, field, raw, v.Field(s.index)); err != nil {
			return err
		}
	}
	return nil
}

// decodeField sets fv, the field s, from raw, its JSON value (present and
// not null); field names it in an error.
func decodeField(e Event, s fieldSpec, field func() string, raw []byte, fv reflect.Value) error {
	switch {
	case s.eventKey:
		return decodeEventKey(e, field, raw, fv)
	case s.kind == reflect.String:
		return decodeString(e, s, field, raw, fv)
	case s.kind == reflect.Struct && s.ptr:
		if raw[0] != '{' {
			return fieldErr(e, field(), "must be an object")
		}
		nv := reflect.New(fv.Type().Elem())
		specs := specsOf(nv.Type().Elem())
		obj := fieldsOf(raw, func(name []byte) bool { return hasSpec(specs, name) })
		if err := decodeFieldsAt(e, field()+".", obj, nv.Interface()); err != nil {
			return err
		}
		fv.Set(nv)
	case s.kind == reflect.Int64 && !s.ptr, s.kind == reflect.Int:
		i, ok := nonNegativeInt(raw)
		if !ok {
			return fieldErr(e, field(), "must be a non-negative integer")
		}
		if s.ptr {
			x := int(i)
			fv.Set(reflect.ValueOf(&x))
		} else {
			fv.SetInt(i)
		}
	case s.kind == reflect.Bool:
		switch string(raw) {
		case "true":
			fv.SetBool(true)
		case "false":
			fv.SetBool(false)
		default:
			return fieldErr(e, field(), "must be true or false")
		}
	case s.kind == reflect.Slice:
		return decodeStrings(e, s, field, raw, fv)
	default:
		panic(fmt.Sprintf("kernel: data field %s of kind %s has no decoding rule", s.name, s.kind))
	}
	return nil
}

// decodeEventKey sets fv from {"source_id": ..., "event_id": ...}.
func decodeEventKey(e Event, field func() string, raw []byte, fv reflect.Value) error {
	if raw[0] != '{' {
		return fieldErr(e, field(), "must be {\"source_id\": ..., \"event_id\": ...}")
	}
	k := fieldsOf(raw, func(name []byte) bool { return string(name) == "source_id" || string(name) == "event_id" })
	src, _ := k.str("source_id")
	id, _ := k.str("event_id")
	if src == "" || id == "" {
		return fieldErr(e, field(), "must be {\"source_id\": ..., \"event_id\": ...}")
	}
	fv.Set(reflect.ValueOf(&EventKey{SourceID: src, EventID: id}))
	return nil
}

// decodeString sets fv from a JSON string: not empty when required, within
// MaxKeyLen for a key.
func decodeString(e Event, s fieldSpec, field func() string, raw []byte, fv reflect.Value) error {
	if raw[0] != '"' {
		return fieldErr(e, field(), "must be a string")
	}
	str := unquote(raw)
	if s.required && str == "" {
		return fieldErr(e, field(), "must not be empty")
	}
	if s.key && len(str) > MaxKeyLen {
		return fieldErr(e, field(), "is longer than %d bytes", MaxKeyLen)
	}
	fv.SetString(str)
	return nil
}

// decodeStrings sets fv from a JSON list of strings: at least one when
// required, an empty list rather than nil when empty.
func decodeStrings(e Event, s fieldSpec, field func() string, raw []byte, fv reflect.Value) error {
	if raw[0] != '[' {
		return fieldErr(e, field(), "must be a list of strings")
	}
	var strs []string
	ok := true
	elements(raw, func(el []byte) {
		if ok = ok && el[0] == '"'; ok {
			strs = append(strs, unquote(el))
		}
	})
	if !ok {
		return fieldErr(e, field(), "must be a list of strings")
	}
	if s.required && len(strs) == 0 {
		return fieldErr(e, field(), "must list at least one entry")
	}
	if strs == nil {
		strs = []string{}
	}
	fv.Set(reflect.ValueOf(strs))
	return nil
}

// nonNegativeInt reads a JSON value as an integer that fits int64 and is
// not negative, as json.Number's Int64 reads a number: 1.0 and 1e2 are
// not integers here.
func nonNegativeInt(raw []byte) (int64, bool) {
	if raw[0] != '-' && (raw[0] < '0' || raw[0] > '9') {
		return 0, false
	}
	i, err := json.Number(raw).Int64()
	return i, err == nil && i >= 0
}
