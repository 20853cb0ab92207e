package kernel

import (
	"bytes"
	"encoding/json"
	"fmt"
	"time"
	"unicode/utf8"
)

// maxKeyLen bounds identifiers (source_id, event_id, project, run_id,
// operation_id) so a runaway client cannot bloat indexes.
const maxKeyLen = 512

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
func DecodeEvent(raw []byte) (Event, error) {
	var w wireEvent
	if err := json.Unmarshal(raw, &w); err != nil {
		return Event{}, Errorf(EInvalid, "event is not a JSON object with the expected field types: %v", err)
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
	for _, f := range []struct{ name, val string }{
		{"source_id", e.SourceID}, {"event_id", e.EventID}, {"project", e.Project},
		{"run_id", e.RunID}, {"type", e.Type}, {"actor", e.Actor},
	} {
		if f.val == "" {
			return fieldErr(e, f.name, "is required")
		}
		if len(f.val) > maxKeyLen {
			return fieldErr(e, f.name, "is longer than %d bytes", maxKeyLen)
		}
		if !utf8.ValidString(f.val) {
			return fieldErr(e, f.name, "is not valid UTF-8")
		}
	}
	if e.TS.IsZero() {
		return fieldErr(e, "ts", "is required (RFC 3339)")
	}
	if !validActor(e.Actor) {
		return fieldErr(e, "actor", "must be kernel, agent, supervisor or operator:<name>, got %q", e.Actor)
	}
	if e.ParentEventID != nil && (e.ParentEventID.SourceID == "" || e.ParentEventID.EventID == "") {
		return fieldErr(e, "parent_event_id", "must carry both source_id and event_id")
	}
	data := bytes.TrimSpace(e.Data)
	if len(data) == 0 || bytes.Equal(data, []byte("null")) {
		data = []byte("{}")
	}
	if data[0] != '{' {
		return fieldErr(e, "data", "must be a JSON object")
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(data, &m); err != nil {
		return fieldErr(e, "data", "is not valid JSON: %v", err)
	}
	return validateData(e, m)
}

func validateData(e Event, m map[string]json.RawMessage) error {
	needStr := func(name string) (string, error) {
		raw, ok := m[name]
		if !ok {
			return "", fieldErr(e, "data."+name, "is required for %s", e.Type)
		}
		var s string
		if err := json.Unmarshal(raw, &s); err != nil {
			return "", fieldErr(e, "data."+name, "must be a string")
		}
		if s == "" {
			return "", fieldErr(e, "data."+name, "must not be empty")
		}
		return s, nil
	}
	optStr := func(name string) (string, error) {
		raw, ok := m[name]
		if !ok || string(raw) == "null" {
			return "", nil
		}
		var s string
		if err := json.Unmarshal(raw, &s); err != nil {
			return "", fieldErr(e, "data."+name, "must be a string")
		}
		return s, nil
	}
	optInt := func(name string) error {
		raw, ok := m[name]
		if !ok || string(raw) == "null" {
			return nil
		}
		var n int64
		if err := json.Unmarshal(raw, &n); err != nil || n < 0 {
			return fieldErr(e, "data."+name, "must be a non-negative integer")
		}
		return nil
	}
	opID := func() error {
		id, err := needStr("operation_id")
		if err == nil && len(id) > maxKeyLen {
			return fieldErr(e, "data.operation_id", "is longer than %d bytes", maxKeyLen)
		}
		return err
	}

	switch e.Type {
	case TypeRunStarted:
		if _, err := optStr("plan_summary"); err != nil {
			return err
		}
		if _, err := optStr("parent_run_id"); err != nil {
			return err
		}
	case TypeRunCompleted:
	case TypeRunFailed:
		if _, err := needStr("error"); err != nil {
			return err
		}
	case TypeToolStarted:
		if err := opID(); err != nil {
			return err
		}
		if _, err := needStr("tool"); err != nil {
			return err
		}
		if err := optInt("attempt"); err != nil {
			return err
		}
	case TypeToolCompleted:
		if err := opID(); err != nil {
			return err
		}
		if _, err := optStr("result_summary"); err != nil {
			return err
		}
	case TypeToolFailed:
		if err := opID(); err != nil {
			return err
		}
		if _, err := needStr("error_type"); err != nil {
			return err
		}
		if _, err := optStr("error"); err != nil {
			return err
		}
		eff, err := optStr("effect")
		if err != nil {
			return err
		}
		if _, present := m["effect"]; present && !ValidToolFailedEffect(eff) {
			return fieldErr(e, "data.effect", "must be none, uncertain or occurred, got %q", eff)
		}
		if _, err := optStr("child_run_id"); err != nil {
			return err
		}
		for _, f := range []string{"child_ops_total", "child_ops_unresolved"} {
			if err := optInt(f); err != nil {
				return err
			}
		}
	case TypeToolBlocked:
		if err := opID(); err != nil {
			return err
		}
		if _, err := needStr("reason"); err != nil {
			return err
		}
	case TypeOperationReconciled:
		if err := opID(); err != nil {
			return err
		}
		eff, err := needStr("effect")
		if err != nil {
			return err
		}
		if !ValidReconciledEffect(eff) {
			return fieldErr(e, "data.effect", "must be none, occurred or unknown, got %q", eff)
		}
		note, err := optStr("note")
		if err != nil {
			return err
		}
		if len(note) > MaxNoteBytes {
			return fieldErr(e, "data.note", "is %d bytes; at most %d are allowed", len(note), MaxNoteBytes)
		}
		basis, err := needStr("basis")
		if err != nil {
			return err
		}
		if !ValidBasis(basis) {
			return fieldErr(e, "data.basis", "must be operator, inference or probe, got %q", basis)
		}
		if raw, ok := m["supersedes"]; ok && string(raw) != "null" {
			var k EventKey
			if err := json.Unmarshal(raw, &k); err != nil || k.SourceID == "" || k.EventID == "" {
				return fieldErr(e, "data.supersedes", "must be {\"source_id\": ..., \"event_id\": ...}")
			}
		}
		if e.ParentEventID == nil {
			return fieldErr(e, "parent_event_id", "is required for operation.reconciled (the operation's tool.started key)")
		}
	case TypeSupervisorVerdict:
		kind, err := needStr("kind")
		if err != nil {
			return err
		}
		if kind != VerdictKindReconciliation {
			return fieldErr(e, "data.kind", "must be %q, got %q", VerdictKindReconciliation, kind)
		}
		var v Verdict
		if err := json.Unmarshal(mustJSON(m), &v); err != nil {
			return fieldErr(e, "data", "does not match the supervisor.verdict shape: %v", err)
		}
		if len(v.OperationIDs) == 0 {
			return fieldErr(e, "data.operation_ids", "must list at least one operation")
		}
		if v.Supervisor == "" {
			return fieldErr(e, "data.supervisor", "is required")
		}
	default:
		return fieldErr(e, "type", "is not a known event type (%v), got %q", KnownTypes, e.Type)
	}
	return nil
}

func mustJSON(v any) []byte {
	b, _ := json.Marshal(v)
	return b
}
