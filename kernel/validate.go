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
	_, err := e.validate()
	return err
}

// ValidateNew checks the rules of DESIGN.md's event model that events
// recorded by earlier versions may break, for an event that is being
// written now through POST /v1/events (call it after DecodeEvent). Today
// that is tool.failed's data.error, which DESIGN.md lists as required
// ({operation_id, error_type, error, effect?, ...}) but Validate has never
// required: the journal, the outbox's checked delivery and replay read
// stored events with Validate alone, so a failure journaled without an
// error message still loads, while a new one must say what went wrong.
// Required means what reckon:"required" means for run.failed's error and
// tool.blocked's reason: a non-empty string.
func (e Event) ValidateNew() error {
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

// validate checks the event and returns its data decoded once (numbers as
// json.Number), for Prepare to reuse.
func (e Event) validate() (map[string]any, error) {
	for _, f := range []struct{ name, val string }{
		{"source_id", e.SourceID}, {"event_id", e.EventID}, {"project", e.Project},
		{"run_id", e.RunID}, {"type", e.Type}, {"actor", e.Actor},
	} {
		if fault := keyFault(f.val); fault != "" {
			return nil, fieldErr(e, f.name, "%s", fault)
		}
	}
	if e.TS.IsZero() {
		return nil, fieldErr(e, "ts", "is required (RFC 3339)")
	}
	if !validActor(e.Actor) {
		return nil, fieldErr(e, "actor", "must be kernel, agent, supervisor or operator:<name>, got %q", e.Actor)
	}
	if e.ParentEventID != nil && (e.ParentEventID.SourceID == "" || e.ParentEventID.EventID == "") {
		return nil, fieldErr(e, "parent_event_id", "must carry both source_id and event_id")
	}
	data := bytes.TrimSpace(e.Data)
	if len(data) == 0 || bytes.Equal(data, []byte("null")) {
		data = []byte("{}")
	}
	if data[0] != '{' {
		return nil, fieldErr(e, "data", "must be a JSON object")
	}
	if err := CheckJSON("data", data); err != nil {
		return nil, fieldErr(e, "data", "%s", ErrorMessage(err))
	}
	v, err := decodeJSON(data)
	if err != nil {
		return nil, fieldErr(e, "data", "is not valid JSON: %v", err)
	}
	m, ok := v.(map[string]any)
	if !ok {
		return nil, fieldErr(e, "data", "must be a JSON object")
	}
	return m, validateData(e, m)
}

// validateData checks data against the event type's declared data type
// (data.go): it decodes the already-decoded object m into that type field
// by field, with exact key matches, naming the first bad field, then
// applies the type's own rules.
func validateData(e Event, m map[string]any) error {
	d := newData(e.Type)
	if d == nil {
		return fieldErr(e, "type", "is not a known event type (%v), got %q", KnownTypes, e.Type)
	}
	if err := decodeFields(e, m, d); err != nil {
		return err
	}
	if r, ok := d.(dataRules); ok {
		// null is absent here too, as decodeFields reads it: an optional
		// field sent as null ("effect": null from a client that encodes
		// a missing value so) is not refused as an empty value.
		return r.check(e, func(f string) bool { return m[f] != nil })
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

// decodeFields fills dst (a pointer to a data struct) from m. Strings must
// be strings, numbers non-negative integers, bools true or false, lists
// lists of strings, event keys {"source_id", "event_id"}; null is absent.
// Unknown fields of m are ignored here and kept in the journal.
func decodeFields(e Event, m map[string]any, dst any) error {
	return decodeFieldsAt(e, "data.", m, dst)
}

// decodeFieldsAt is decodeFields for an object nested at prefix (a
// pointer-to-struct field such as tool.started's workspace_manifest).
func decodeFieldsAt(e Event, prefix string, m map[string]any, dst any) error {
	v := reflect.ValueOf(dst).Elem()
	for _, s := range specsOf(v.Type()) {
		if s.raw {
			continue
		}
		field := prefix + s.name
		raw, present := m[s.name]
		if raw == nil {
			switch {
			case s.required && present && s.kind == reflect.String:
				return fieldErr(e, field, "must not be empty")
			case s.required:
				return fieldErr(e, field, "is required for %s", e.Type)
			}
			continue
		}
		fv := v.Field(s.index)
		switch {
		case s.eventKey:
			k, ok := raw.(map[string]any)
			src, _ := k["source_id"].(string)
			id, _ := k["event_id"].(string)
			if !ok || src == "" || id == "" {
				return fieldErr(e, field, "must be {\"source_id\": ..., \"event_id\": ...}")
			}
			fv.Set(reflect.ValueOf(&EventKey{SourceID: src, EventID: id}))
		case s.kind == reflect.String:
			str, ok := raw.(string)
			if !ok {
				return fieldErr(e, field, "must be a string")
			}
			if s.required && str == "" {
				return fieldErr(e, field, "must not be empty")
			}
			if s.key && len(str) > MaxKeyLen {
				return fieldErr(e, field, "is longer than %d bytes", MaxKeyLen)
			}
			fv.SetString(str)
		case s.kind == reflect.Struct && s.ptr:
			obj, ok := raw.(map[string]any)
			if !ok {
				return fieldErr(e, field, "must be an object")
			}
			nv := reflect.New(fv.Type().Elem())
			if err := decodeFieldsAt(e, field+".", obj, nv.Interface()); err != nil {
				return err
			}
			fv.Set(nv)
		case s.kind == reflect.Int64 && !s.ptr:
			n, ok := raw.(json.Number)
			i, err := n.Int64()
			if !ok || err != nil || i < 0 {
				return fieldErr(e, field, "must be a non-negative integer")
			}
			fv.SetInt(i)
		case s.kind == reflect.Int:
			n, ok := raw.(json.Number)
			i, err := n.Int64()
			if !ok || err != nil || i < 0 {
				return fieldErr(e, field, "must be a non-negative integer")
			}
			if s.ptr {
				x := int(i)
				fv.Set(reflect.ValueOf(&x))
			} else {
				fv.SetInt(i)
			}
		case s.kind == reflect.Bool:
			b, ok := raw.(bool)
			if !ok {
				return fieldErr(e, field, "must be true or false")
			}
			fv.SetBool(b)
		case s.kind == reflect.Slice:
			list, ok := raw.([]any)
			if !ok {
				return fieldErr(e, field, "must be a list of strings")
			}
			strs := make([]string, len(list))
			for i, el := range list {
				if strs[i], ok = el.(string); !ok {
					return fieldErr(e, field, "must be a list of strings")
				}
			}
			if s.required && len(strs) == 0 {
				return fieldErr(e, field, "must list at least one entry")
			}
			fv.Set(reflect.ValueOf(strs))
		default:
			panic(fmt.Sprintf("kernel: data field %s of kind %s has no decoding rule", s.name, s.kind))
		}
	}
	return nil
}
