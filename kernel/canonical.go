package kernel

import (
	"bytes"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"math"
	"sort"
	"strconv"
	"time"
)

// Canonical returns the canonical JSON of v: object keys sorted, no
// insignificant whitespace, numbers in their shortest exact form. Two JSON
// documents that differ only in key order, whitespace or number spelling
// (1.0 and 1) have the same canonical form; any changed value differs.
func Canonical(raw []byte) ([]byte, error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, fmt.Errorf("canonical json: %w", err)
	}
	if dec.More() {
		return nil, fmt.Errorf("canonical json: trailing data after the value")
	}
	var buf bytes.Buffer
	if err := writeCanonical(&buf, v); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

func writeCanonical(buf *bytes.Buffer, v any) error {
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
		b, _ := json.Marshal(x)
		buf.Write(b)
	case json.Number:
		buf.WriteString(canonicalNumber(x))
	case []any:
		buf.WriteByte('[')
		for i, el := range x {
			if i > 0 {
				buf.WriteByte(',')
			}
			if err := writeCanonical(buf, el); err != nil {
				return err
			}
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
			kb, _ := json.Marshal(k)
			buf.Write(kb)
			buf.WriteByte(':')
			if err := writeCanonical(buf, x[k]); err != nil {
				return err
			}
		}
		buf.WriteByte('}')
	default:
		return fmt.Errorf("canonical json: unexpected %T", v)
	}
	return nil
}

// canonicalNumber spells integers exactly (no float rounding for large ids)
// and other numbers in the shortest form that round-trips through float64.
func canonicalNumber(n json.Number) string {
	if i, err := strconv.ParseInt(string(n), 10, 64); err == nil {
		return strconv.FormatInt(i, 10)
	}
	f, err := strconv.ParseFloat(string(n), 64)
	if err != nil || math.IsInf(f, 0) {
		return string(n)
	}
	if f == math.Trunc(f) && math.Abs(f) < 1e15 {
		return strconv.FormatInt(int64(f), 10)
	}
	return strconv.FormatFloat(f, 'g', -1, 64)
}

// payloadView is everything of an event but its key, in a fixed shape.
type payloadView struct {
	Project       string          `json:"project"`
	RunID         string          `json:"run_id"`
	Type          string          `json:"type"`
	TS            string          `json:"ts"`
	Actor         string          `json:"actor"`
	ParentEventID *EventKey       `json:"parent_event_id"`
	Data          json.RawMessage `json:"data"`
}

// CanonicalPayload returns the canonical JSON of everything in the event but
// its key (source_id, event_id). ts is normalised to UTC with nanoseconds, so
// the same instant spelled with another offset is the same payload.
func (e Event) CanonicalPayload() ([]byte, error) {
	data := bytes.TrimSpace(e.Data)
	if len(data) == 0 {
		data = []byte("{}")
	}
	raw, err := json.Marshal(payloadView{
		Project: e.Project, RunID: e.RunID, Type: e.Type,
		TS: e.TS.UTC().Format(time.RFC3339Nano), Actor: e.Actor,
		ParentEventID: e.ParentEventID, Data: data,
	})
	if err != nil {
		return nil, fmt.Errorf("payload of %s: %w", e.Key(), err)
	}
	return Canonical(raw)
}

// PayloadDigest is the SHA-256 of CanonicalPayload: equal digests mean a
// redelivery (repeated), different ones under the same key a conflict.
func (e Event) PayloadDigest() ([]byte, error) {
	c, err := e.CanonicalPayload()
	if err != nil {
		return nil, err
	}
	sum := sha256.Sum256(c)
	return sum[:], nil
}

// CanonicalData returns the canonical JSON of the event's data.
func (e Event) CanonicalData() (json.RawMessage, error) {
	data := bytes.TrimSpace(e.Data)
	if len(data) == 0 || bytes.Equal(data, []byte("null")) {
		return json.RawMessage("{}"), nil
	}
	c, err := Canonical(data)
	if err != nil {
		return nil, fmt.Errorf("data of %s: %w", e.Key(), err)
	}
	return c, nil
}
