package kernel

// The reference implementation of the boundary's JSON reading, as it was
// before jsonspan.go (a decode into map[string]any and []any, and a write
// of that tree): the differential tests and fuzz targets hold the span
// readers to it, because every journaled digest was computed this way and
// a retried event must keep meaning "repeated".

import (
	"bytes"
	"encoding/json"
	"encoding/json/jsontext"
	"fmt"
	"io"
	"reflect"
	"sort"
	"sync"
	"unicode/utf8"
)

// prepareReference is Prepare's validation and canonical data as they were
// computed: the canonical data, operation_id and whether the event settles.
func prepareReference(e Event) (canon []byte, operationID string, settlesOp bool, err error) {
	m, err := validateReference(e)
	if err != nil {
		return nil, "", false, err
	}
	var buf bytes.Buffer
	writeCanonicalReference(&buf, m)
	operationID, _ = m["operation_id"].(string)
	eff, _ := m["effect"].(string)
	return buf.Bytes(), operationID, settles(e.Type, eff), nil
}

func canonicalReference(raw []byte) ([]byte, error) {
	if err := CheckJSON("canonical json", raw); err != nil {
		return nil, err
	}
	v, err := decodeTree(raw)
	if err != nil {
		return nil, err
	}
	var buf bytes.Buffer
	buf.Grow(len(raw))
	writeCanonicalReference(&buf, v)
	return buf.Bytes(), nil
}

func decodeTree(raw []byte) (any, error) {
	// A token loop over jsontext: the values encoding/json's Decode into
	// any gives (objects as map[string]any, numbers as their literal
	// json.Number). Every caller has run CheckJSON first, so duplicate names
	// and invalid UTF-8 never reach here; the options only keep this
	// decoder from being stricter than encoding/json (last name wins,
	// U+FFFD). Decoders are pooled and read raw in place (a bytes.Buffer is
	// parsed without a copy and never written to).
	dec := referenceDecoders.Get().(*jsontext.Decoder)
	defer func() {
		dec.Reset(bytes.NewReader(nil)) // drop raw before pooling
		referenceDecoders.Put(dec)
	}()
	dec.Reset(bytes.NewBuffer(raw), referenceDecodeOptions...)
	v, err := decodeValueReference(dec)
	if err != nil {
		return nil, fmt.Errorf("canonical json: %w", err)
	}
	if _, err := dec.ReadToken(); err != io.EOF {
		return nil, fmt.Errorf("canonical json: trailing data after the value")
	}
	return v, nil
}

var (
	referenceDecodeOptions = []jsontext.Options{jsontext.AllowDuplicateNames(true), jsontext.AllowInvalidUTF8(true)}
	referenceDecoders      = sync.Pool{New: func() any { return jsontext.NewDecoder(bytes.NewReader(nil)) }}
)

// decodeValue reads one JSON value from dec.
func decodeValueReference(dec *jsontext.Decoder) (any, error) {
	tok, err := dec.ReadToken()
	if err != nil {
		return nil, err
	}
	switch tok.Kind() {
	case 'n':
		return nil, nil
	case 't', 'f':
		return tok.Bool(), nil
	case '"':
		return tok.String(), nil
	case '0':
		return json.Number(tok.String()), nil
	case '{':
		m := map[string]any{}
		for dec.PeekKind() != '}' {
			tok, err := dec.ReadToken()
			if err != nil {
				return nil, err
			}
			// A token is void after the next read: take the name first.
			name := tok.String()
			v, err := decodeValueReference(dec)
			if err != nil {
				return nil, err
			}
			m[name] = v
		}
		if _, err := dec.ReadToken(); err != nil {
			return nil, err
		}
		return m, nil
	case '[':
		a := []any{}
		for dec.PeekKind() != ']' {
			v, err := decodeValueReference(dec)
			if err != nil {
				return nil, err
			}
			a = append(a, v)
		}
		if _, err := dec.ReadToken(); err != nil {
			return nil, err
		}
		return a, nil
	}
	return nil, fmt.Errorf("unexpected JSON token %v", tok)
}

func writeCanonicalReference(buf *bytes.Buffer, v any) {
	switch x := v.(type) {
	case nil:
		buf.WriteString("null")
	case bool:
		if x {
			buf.WriteString("true")
		} else {
			buf.WriteString("false")
		}
	case string:
		writeStringReference(buf, x)
	case json.Number:
		buf.WriteString(canonicalNumber(x))
	case []any:
		buf.WriteByte('[')
		for i, el := range x {
			if i > 0 {
				buf.WriteByte(',')
			}
			writeCanonicalReference(buf, el)
		}
		buf.WriteByte(']')
	case map[string]any:
		keys := make([]string, 0, len(x))
		for k := range x {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		buf.WriteByte('{')
		for i, k := range keys {
			if i > 0 {
				buf.WriteByte(',')
			}
			writeStringReference(buf, k)
			buf.WriteByte(':')
			writeCanonicalReference(buf, x[k])
		}
		buf.WriteByte('}')
	}
}

// writeString writes s as a JSON string: quotes, backslashes and control
// characters escaped, invalid UTF-8 replaced by U+FFFD, everything else as
// is (no HTML escaping: the canonical form is for comparison, not embedding).
func writeStringReference(buf *bytes.Buffer, s string) {
	buf.WriteByte('"')
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if c >= 0x20 && c != '"' && c != '\\' {
				i++
				continue
			}
			buf.WriteString(s[start:i])
			switch c {
			case '"', '\\':
				buf.WriteByte('\\')
				buf.WriteByte(c)
			case '\n':
				buf.WriteString(`\n`)
			case '\r':
				buf.WriteString(`\r`)
			case '\t':
				buf.WriteString(`\t`)
			default:
				buf.WriteString(`\u00`)
				buf.WriteByte(hexDigits[c>>4])
				buf.WriteByte(hexDigits[c&0xF])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			buf.WriteString(s[start:i])
			buf.WriteString(`\ufffd`)
			i += size
			start = i
			continue
		}
		i += size
	}
	buf.WriteString(s[start:])
	buf.WriteByte('"')
}

// validate checks the event and returns its data decoded once (numbers as
// json.Number), for Prepare to reuse.
func validateReference(e Event) (map[string]any, error) {
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
	v, err := decodeTree(data)
	if err != nil {
		return nil, fieldErr(e, "data", "is not valid JSON: %v", err)
	}
	m, ok := v.(map[string]any)
	if !ok {
		return nil, fieldErr(e, "data", "must be a JSON object")
	}
	return m, validateDataReference(e, m)
}

// validateData checks data against the event type's declared data type
// (data.go): it decodes the already-decoded object m into that type field
// by field, with exact key matches, naming the first bad field, then
// applies the type's own rules.
func validateDataReference(e Event, m map[string]any) error {
	d := newData(e.Type)
	if d == nil {
		return fieldErr(e, "type", "is not a known event type (%v), got %q", KnownTypes, e.Type)
	}
	if err := decodeFieldsReference(e, m, d); err != nil {
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

// decodeFields fills dst (a pointer to a data struct) from m. Strings must
// be strings, numbers non-negative integers, bools true or false, lists
// lists of strings, event keys {"source_id", "event_id"}; null is absent.
// Unknown fields of m are ignored here and kept in the journal.
func decodeFieldsReference(e Event, m map[string]any, dst any) error {
	return decodeFieldsAtReference(e, "data.", m, dst)
}

// decodeFieldsAt is decodeFields for an object nested at prefix (a
// pointer-to-struct field such as tool.started's workspace_manifest).
func decodeFieldsAtReference(e Event, prefix string, m map[string]any, dst any) error {
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
			if err := decodeFieldsAtReference(e, field+".", obj, nv.Interface()); err != nil {
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
