package kernel

import (
	"bytes"
	"encoding/json"
	"fmt"
	"time"
	"unicode/utf8"
)

// MaxKeyLen bounds identifiers (source_id, event_id, project, run_id,
// operation_id) so a runaway client cannot bloat indexes.
const MaxKeyLen = 512

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
	_, err := e.validate()
	return err
}

// validate checks the event and returns its data decoded once (numbers as
// json.Number), for Prepare to reuse.
func (e Event) validate() (map[string]any, error) {
	for _, f := range []struct{ name, val string }{
		{"source_id", e.SourceID}, {"event_id", e.EventID}, {"project", e.Project},
		{"run_id", e.RunID}, {"type", e.Type}, {"actor", e.Actor},
	} {
		if f.val == "" {
			return nil, fieldErr(e, f.name, "is required")
		}
		if len(f.val) > MaxKeyLen {
			return nil, fieldErr(e, f.name, "is longer than %d bytes", MaxKeyLen)
		}
		if !utf8.ValidString(f.val) {
			return nil, fieldErr(e, f.name, "is not valid UTF-8")
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

func validateData(e Event, m map[string]any) error {
	optStr := func(name string) (string, error) {
		v, ok := m[name]
		if !ok || v == nil {
			return "", nil
		}
		s, ok := v.(string)
		if !ok {
			return "", fieldErr(e, "data."+name, "must be a string")
		}
		return s, nil
	}
	needStr := func(name string) (string, error) {
		if _, ok := m[name]; !ok {
			return "", fieldErr(e, "data."+name, "is required for %s", e.Type)
		}
		s, err := optStr(name)
		if err != nil {
			return "", err
		}
		if s == "" {
			return "", fieldErr(e, "data."+name, "must not be empty")
		}
		return s, nil
	}
	optInt := func(name string) error {
		v, ok := m[name]
		if !ok || v == nil {
			return nil
		}
		n, ok := v.(json.Number)
		if !ok {
			return fieldErr(e, "data."+name, "must be a non-negative integer")
		}
		if i, err := n.Int64(); err != nil || i < 0 {
			return fieldErr(e, "data."+name, "must be a non-negative integer")
		}
		return nil
	}
	strList := func(name string, required bool) error {
		v, ok := m[name]
		if !ok || v == nil {
			if required {
				return fieldErr(e, "data."+name, "is required for %s", e.Type)
			}
			return nil
		}
		list, ok := v.([]any)
		if !ok {
			return fieldErr(e, "data."+name, "must be a list of strings")
		}
		for _, el := range list {
			if _, ok := el.(string); !ok {
				return fieldErr(e, "data."+name, "must be a list of strings")
			}
		}
		if required && len(list) == 0 {
			return fieldErr(e, "data."+name, "must list at least one entry")
		}
		return nil
	}
	eventKey := func(name string) error {
		v, ok := m[name]
		if !ok || v == nil {
			return nil
		}
		k, ok := v.(map[string]any)
		src, _ := k["source_id"].(string)
		id, _ := k["event_id"].(string)
		if !ok || src == "" || id == "" {
			return fieldErr(e, "data."+name, "must be {\"source_id\": ..., \"event_id\": ...}")
		}
		return nil
	}
	opID := func() error {
		id, err := needStr("operation_id")
		if err == nil && len(id) > MaxKeyLen {
			return fieldErr(e, "data.operation_id", "is longer than %d bytes", MaxKeyLen)
		}
		return err
	}
	firstErr := func(errs ...error) error {
		for _, err := range errs {
			if err != nil {
				return err
			}
		}
		return nil
	}
	str := func(name string, required bool) error {
		if required {
			_, err := needStr(name)
			return err
		}
		_, err := optStr(name)
		return err
	}

	switch e.Type {
	case TypeRunStarted:
		return firstErr(str("plan_summary", false), str("parent_run_id", false))
	case TypeRunCompleted:
		return nil
	case TypeRunFailed:
		return str("error", true)
	case TypeToolStarted:
		return firstErr(opID(), str("tool", true), optInt("attempt"))
	case TypeToolCompleted:
		return firstErr(opID(), str("result_summary", false))
	case TypeToolFailed:
		if err := firstErr(opID(), str("error_type", true), str("error", false), str("child_run_id", false),
			optInt("child_ops_total"), optInt("child_ops_unresolved")); err != nil {
			return err
		}
		eff, err := optStr("effect")
		if err != nil {
			return err
		}
		if _, present := m["effect"]; present && !ValidToolFailedEffect(eff) {
			return fieldErr(e, "data.effect", "must be none, uncertain or occurred, got %q", eff)
		}
		return nil
	case TypeToolBlocked:
		return firstErr(opID(), str("reason", true))
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
		if err := eventKey("supersedes"); err != nil {
			return err
		}
		proposed, err := optStr("proposed_effect")
		if err != nil {
			return err
		}
		if _, present := m["proposed_effect"]; present {
			if proposed != EffectNone && proposed != EffectOccurred {
				return fieldErr(e, "data.proposed_effect", "must be none or occurred, got %q", proposed)
			}
			if eff != EffectUnknown {
				return fieldErr(e, "data.proposed_effect", "is only allowed with effect unknown (a proposal that did not settle), got effect %q", eff)
			}
		}
		if e.ParentEventID == nil {
			return fieldErr(e, "parent_event_id", "is required for operation.reconciled (the operation's tool.started key)")
		}
		return nil
	case TypeSupervisorVerdict:
		kind, err := needStr("kind")
		if err != nil {
			return err
		}
		if kind != VerdictKindReconciliation {
			return fieldErr(e, "data.kind", "must be %q, got %q", VerdictKindReconciliation, kind)
		}
		if v, ok := m["needs_attention"]; ok {
			if _, isBool := v.(bool); !isBool {
				return fieldErr(e, "data.needs_attention", "must be true or false")
			}
		}
		return firstErr(strList("operation_ids", true), strList("causes", false), strList("remedies", false),
			str("lesson", false), str("supervisor", true), str("model", false), str("prompt_version", false), str("wall_digest", false),
			str("settle_policy", false))
	default:
		return fieldErr(e, "type", "is not a known event type (%v), got %q", KnownTypes, e.Type)
	}
}
