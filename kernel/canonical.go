package kernel

import (
	"bytes"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"math"
	"math/big"
	"strconv"
	"strings"
	"time"
)

// Canonical returns the canonical JSON of raw: object keys sorted, no
// insignificant whitespace, numbers in their shortest exact form. Two JSON
// documents that differ only in key order, whitespace or number spelling
// (1.0 and 1) have the same canonical form; any changed value differs.
// Invalid UTF-8, a lone surrogate escape, a NUL or a duplicate key is an
// error (CheckJSON), never replaced: two different byte strings must never
// share a canonical form.
func Canonical(raw []byte) ([]byte, error) {
	valid, err := checkedJSON("canonical json", raw)
	if err != nil {
		return nil, err
	}
	if !valid {
		return nil, fmt.Errorf("canonical json: %w", syntaxError(raw))
	}
	return canonicalJSON(raw), nil
}

const hexDigits = "0123456789abcdef"

// writeString writes s as a JSON string (appendString).
func writeString(buf *bytes.Buffer, s string) {
	buf.Write(appendString(buf.AvailableBuffer(), s))
}

// canonicalNumber spells integers exactly (no float rounding for large ids)
// and other numbers in the shortest form that round-trips through float64
// — when that form is the number itself. A number float64 cannot hold
// exactly (an integer past int64, a decimal of more than 17 significant
// digits) is spelt exactly instead (exactNumber): two different numbers
// must never share a canonical form, or a changed value under the same
// key would be answered "repeated" and the journal would keep the rounded
// one. Numbers float64 holds exactly keep the form they always had, so
// journaled digests stay valid.
func canonicalNumber(n json.Number) string {
	if i, err := strconv.ParseInt(string(n), 10, 64); err == nil {
		return strconv.FormatInt(i, 10)
	}
	short := floatNumber(n)
	if short == string(n) {
		return short
	}
	want, ok1 := parseDecimal(string(n))
	got, ok2 := parseDecimal(short)
	if !ok1 || !ok2 || want == got {
		return short
	}
	return want.String()
}

// floatNumber is the float64 form of canonicalNumber (the form of every
// number before exactNumber existed).
func floatNumber(n json.Number) string {
	f, err := strconv.ParseFloat(string(n), 64)
	if err != nil || math.IsInf(f, 0) {
		return string(n)
	}
	if f == math.Trunc(f) && math.Abs(f) < 1e15 {
		return strconv.FormatInt(int64(f), 10)
	}
	return strconv.FormatFloat(f, 'g', -1, 64)
}

// decimal is a JSON number's exact value: (-1)^neg × digits × 10^exp, with
// digits free of leading and trailing zeros ("" for zero, whose sign and
// exponent are then cleared). exp is kept as text so that no exponent
// overflows.
type decimal struct {
	neg    bool
	digits string
	exp    string
}

// String spells the value as a JSON number: digits, then e<exp> when exp
// is not 0.
func (d decimal) String() string {
	if d.digits == "" {
		return "0"
	}
	s := d.digits
	if d.neg {
		s = "-" + s
	}
	if d.exp != "0" {
		s += "e" + d.exp
	}
	return s
}

// parseDecimal reads a JSON number (or a Go float spelling of one, such
// as 1.5e+300) into its exact value; ok is false for anything else.
func parseDecimal(s string) (d decimal, ok bool) {
	if strings.HasPrefix(s, "-") {
		d.neg, s = true, s[1:]
	}
	mant, expText, hasExp := strings.Cut(strings.ReplaceAll(s, "E", "e"), "e")
	intPart, frac, _ := strings.Cut(mant, ".")
	digits := intPart + frac
	if digits == "" || strings.Trim(digits, "0123456789") != "" {
		return decimal{}, false
	}
	exp := new(big.Int)
	if hasExp {
		if _, good := exp.SetString(strings.TrimPrefix(expText, "+"), 10); !good {
			return decimal{}, false
		}
	}
	exp.Sub(exp, big.NewInt(int64(len(frac))))
	digits = strings.TrimLeft(digits, "0")
	trimmed := strings.TrimRight(digits, "0")
	exp.Add(exp, big.NewInt(int64(len(digits)-len(trimmed))))
	if trimmed == "" {
		return decimal{}, true
	}
	d.digits, d.exp = trimmed, exp.String()
	return d, true
}

// Prepared is an event validated and reduced to what storage needs, computed
// from a single decode of its data.
type Prepared struct {
	// CanonicalData is the canonical JSON of data ({} when absent).
	CanonicalData []byte
	// Digest is the SHA-256 of the canonical JSON of everything but the key:
	// equal digests mean a redelivery (repeated), different ones under the
	// same key a conflict.
	Digest []byte
	// Envelope is that canonical JSON itself (ts in UTC), which EventJSON
	// completes with the key.
	Envelope []byte
	// OperationID is data.operation_id, or "".
	OperationID string
	// Settles reports whether the event settles its operation.
	Settles bool
}

// Prepare validates the event and computes its canonical data and payload
// digest. ts is normalised to UTC with nanoseconds, so the same instant
// spelled with another offset is the same payload.
func (e Event) Prepare() (Prepared, error) {
	canon, top, err := e.validate()
	if err != nil {
		return Prepared{}, err
	}

	// The envelope is written with its keys already in sorted order:
	// actor, data, parent_event_id, project, run_id, ts, type.
	var env bytes.Buffer
	env.Grow(len(canon) + 160)
	env.WriteString(`{"actor":`)
	writeString(&env, e.Actor)
	env.WriteString(`,"data":`)
	env.Write(canon)
	env.WriteString(`,"parent_event_id":`)
	if e.ParentEventID == nil {
		env.WriteString("null")
	} else {
		env.WriteString(`{"event_id":`)
		writeString(&env, e.ParentEventID.EventID)
		env.WriteString(`,"source_id":`)
		writeString(&env, e.ParentEventID.SourceID)
		env.WriteByte('}')
	}
	env.WriteString(`,"project":`)
	writeString(&env, e.Project)
	env.WriteString(`,"run_id":`)
	writeString(&env, e.RunID)
	env.WriteString(`,"ts":`)
	writeString(&env, e.TS.UTC().Format(time.RFC3339Nano))
	env.WriteString(`,"type":`)
	writeString(&env, e.Type)
	env.WriteByte('}')
	sum := sha256.Sum256(env.Bytes())

	p := Prepared{CanonicalData: canon, Digest: sum[:], Envelope: env.Bytes()}
	p.OperationID, _ = top.str("operation_id")
	eff, _ := top.str("effect")
	p.Settles = settles(e.Type, eff)
	return p, nil
}

// EventJSON is the prepared event as JSON, its key included: the envelope
// (canonical data, ts in UTC) with source_id and event_id added. It
// decodes to the event Prepare was called on (the same instant, in UTC),
// and costs one copy instead of a json.Marshal: the outbox stores events
// this way.
func (p Prepared) EventJSON(key EventKey) []byte {
	return p.AppendEventJSON(make([]byte, 0, p.EventJSONSize(key)), key)
}

// EventJSONSize is the length of EventJSON(key) when its identifiers need
// no escaping (and a lower bound when they do), for a caller sizing one
// buffer for many events.
func (p Prepared) EventJSONSize(key EventKey) int {
	return len(p.Envelope) + len(key.SourceID) + len(key.EventID) + len(`{"event_id":"","source_id":"",`) - 1
}

// AppendEventJSON appends EventJSON(key) to dst and returns the extended
// buffer.
func (p Prepared) AppendEventJSON(dst []byte, key EventKey) []byte {
	buf := bytes.NewBuffer(dst)
	buf.WriteString(`{"event_id":`)
	writeString(buf, key.EventID)
	buf.WriteString(`,"source_id":`)
	writeString(buf, key.SourceID)
	buf.WriteByte(',')
	buf.Write(p.Envelope[1:])
	return buf.Bytes()
}
