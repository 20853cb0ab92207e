package kernel

import (
	"bytes"
	"encoding/json"
	"encoding/json/jsontext"
	"errors"
	"slices"
	"unicode/utf8"
)

// This file reads JSON documents CheckJSON accepted straight from their
// bytes, for ingest: the canonical form is written in one walk, and a data
// type's fields are found as spans of the document and decoded one by one,
// never as a tree of values (map[string]any, []any), which would cost
// about 100 bytes an element (TestPrepareLargeArrayAllocatesItsOutput).
// Nothing here reports syntax: every caller has run CheckJSON and
// json.Valid (checkedJSON), so values are only delimited, never diagnosed.

// syntaxError explains why raw, which json.Valid refused, is not valid
// JSON, as encoding/json words it.
func syntaxError(raw []byte) error {
	var v any
	if err := json.Unmarshal(raw, &v); err != nil {
		return err
	}
	return errors.New("not valid JSON")
}

// skipWS returns the offset of the first non-whitespace byte at or after i.
func skipWS(raw []byte, i int) int {
	for i < len(raw) {
		switch raw[i] {
		case ' ', '\t', '\n', '\r':
			i++
		default:
			return i
		}
	}
	return i
}

// valueEnd returns the offset just past the JSON value starting at i.
func valueEnd(raw []byte, i int) int {
	switch raw[i] {
	case '"':
		return stringEnd(raw, i)
	case '{', '[':
		depth := 0
		for {
			switch raw[i] {
			case '"':
				i = stringEnd(raw, i)
				continue
			case '{', '[':
				depth++
			case '}', ']':
				depth--
				if depth == 0 {
					return i + 1
				}
			}
			i++
		}
	default: // a number, true, false or null
		for i < len(raw) {
			switch raw[i] {
			case ' ', '\t', '\n', '\r', ',', ']', '}':
				return i
			}
			i++
		}
		return i
	}
}

// stringEnd returns the offset just past the JSON string starting at i.
func stringEnd(raw []byte, i int) int {
	for i++; ; i++ {
		switch raw[i] {
		case '"':
			return i + 1
		case '\\':
			i++ // the escaped byte; \uXXXX's hex digits hold no quote
		}
	}
}

// unquote returns the JSON string s decodes to.
func unquote(s []byte) string { return string(unquoteBytes(s)) }

// unquoteBytes is unquote without a copy when s holds no escape.
func unquoteBytes(s []byte) []byte {
	body := s[1 : len(s)-1]
	if bytes.IndexByte(body, '\\') < 0 {
		return body
	}
	out, _ := jsontext.AppendUnquote(nil, s) // checked: exact
	return out
}

// members calls fn with each member of the JSON object at raw (its key
// still quoted, and its value's span, whitespace trimmed), in document
// order.
func members(raw []byte, fn func(key, value []byte)) {
	i := skipWS(raw, 0) + 1 // '{'
	for {
		i = skipWS(raw, i)
		switch raw[i] {
		case '}':
			return
		case ',':
			i = skipWS(raw, i+1)
		}
		ks := i
		i = stringEnd(raw, i)
		key := raw[ks:i]
		i = skipWS(raw, i) + 1 // ':'
		vs := skipWS(raw, i)
		i = valueEnd(raw, vs)
		fn(key, raw[vs:i])
	}
}

// elements calls fn with the span of each element of the JSON array at
// raw, in order.
func elements(raw []byte, fn func(value []byte)) {
	i := skipWS(raw, 0) + 1 // '['
	for {
		i = skipWS(raw, i)
		switch raw[i] {
		case ']':
			return
		case ',':
			i = skipWS(raw, i+1)
		}
		vs := i
		i = valueEnd(raw, vs)
		fn(raw[vs:i])
	}
}

// spanFields is the members of one JSON object that a data type reads:
// each name (decoded) and its value's span (the literal null for a member
// sent as null). Members nothing reads are not kept. A list, not a map: a
// data type reads a dozen fields at most, and a list of spans into the
// document costs no allocation per member.
type spanFields []spanField

// spanField is one member of spanFields.
type spanField struct {
	name, value []byte
}

// fieldsOf returns the members of the object at raw named in want.
func fieldsOf(raw []byte, want func(name []byte) bool) spanFields {
	f := make(spanFields, 0, 4)
	members(raw, func(key, value []byte) {
		if name := unquoteBytes(key); want(name) {
			f = append(f, spanField{name, value})
		}
	})
	return f
}

// get is the span of member name, and whether the object has it.
func (f spanFields) get(name string) ([]byte, bool) {
	for _, m := range f {
		if string(m.name) == name {
			return m.value, true
		}
	}
	return nil, false
}

// has reports whether the object carried name with a value other than
// null (null is absent).
func (f spanFields) has(name string) bool {
	v, ok := f.get(name)
	return ok && !isNull(v)
}

// str is the member name as a string when it is one.
func (f spanFields) str(name string) (string, bool) {
	v, ok := f.get(name)
	if !ok || len(v) == 0 || v[0] != '"' {
		return "", false
	}
	return unquote(v), true
}

func isNull(v []byte) bool { return string(v) == "null" }

// canonWriter writes the canonical form of a JSON document from its bytes:
// keys sorted, no insignificant whitespace, strings re-escaped and numbers
// spelt as canonicalNumber spells them. An object's members are written as
// they come, each as `,"key":value`, and reordered only when their keys
// were not already in order: most objects cost no copy.
type canonWriter struct {
	raw    []byte
	pos    int
	out    []byte
	pieces []canonPiece // the members of the objects being written, innermost last
}

// canonPiece is one member written to out[start:end], as `,"key":value`;
// key is the decoded key (in raw when it has no escape).
type canonPiece struct {
	key        []byte
	start, end int
}

// canonicalJSON returns the canonical form of raw, a JSON document
// checkedJSON found valid.
func canonicalJSON(raw []byte) []byte {
	s := scratchPool.Get().(*jsonScratch)
	defer s.release()
	w := canonWriter{raw: raw, out: make([]byte, 0, len(raw)), pieces: s.pieces[:0]}
	w.value()
	keepScratch(&s.pieces, w.pieces)
	return w.out
}

func (w *canonWriter) value() {
	w.pos = skipWS(w.raw, w.pos)
	switch w.raw[w.pos] {
	case '{':
		w.object()
	case '[':
		w.pos++
		w.out = append(w.out, '[')
		for n := 0; ; n++ {
			w.pos = skipWS(w.raw, w.pos)
			if w.raw[w.pos] == ']' {
				w.pos++
				break
			}
			if w.raw[w.pos] == ',' {
				w.pos++
			}
			if n > 0 {
				w.out = append(w.out, ',')
			}
			w.value()
		}
		w.out = append(w.out, ']')
	case '"':
		end := stringEnd(w.raw, w.pos)
		w.appendStringAt(w.pos, end)
		w.pos = end
	default:
		end := valueEnd(w.raw, w.pos)
		tok := w.raw[w.pos:end]
		w.pos = end
		if tok[0] == 't' || tok[0] == 'f' || tok[0] == 'n' || plainInt(tok) {
			w.out = append(w.out, tok...)
			return
		}
		w.out = append(w.out, canonicalNumber(json.Number(tok))...)
	}
}

func (w *canonWriter) object() {
	w.pos++ // '{'
	base, start := len(w.pieces), len(w.out)
	for {
		w.pos = skipWS(w.raw, w.pos)
		if w.raw[w.pos] == '}' {
			w.pos++
			break
		}
		if w.raw[w.pos] == ',' {
			w.pos = skipWS(w.raw, w.pos+1)
		}
		end := stringEnd(w.raw, w.pos)
		p := canonPiece{start: len(w.out)}
		w.out = append(w.out, ',')
		w.appendStringAt(w.pos, end)
		p.key = unquoteBytes(w.raw[w.pos:end])
		w.pos = skipWS(w.raw, end) + 1 // ':'
		w.out = append(w.out, ':')
		w.value()
		p.end = len(w.out)
		w.pieces = append(w.pieces, p)
	}
	own := w.pieces[base:]
	w.pieces = w.pieces[:base]
	if len(own) == 0 {
		w.out = append(w.out, '{', '}')
		return
	}
	less := func(a, b canonPiece) int { return bytes.Compare(a.key, b.key) }
	if !slices.IsSortedFunc(own, less) {
		// Keys are distinct (CheckJSON), so the order is total.
		slices.SortFunc(own, less)
		sorted := make([]byte, 0, len(w.out)-start)
		for _, p := range own {
			sorted = append(sorted, w.out[p.start:p.end]...)
		}
		copy(w.out[start:], sorted)
	}
	w.out[start] = '{' // the first member's comma
	w.out = append(w.out, '}')
}

// appendStringAt writes the JSON string raw[start:end] in canonical form.
func (w *canonWriter) appendStringAt(start, end int) {
	s := w.raw[start:end]
	if bytes.IndexByte(s[1:len(s)-1], '\\') < 0 {
		// Without an escape a valid string holds no quote, backslash or
		// control character, and CheckJSON refused invalid UTF-8:
		// appendString would write it as it is.
		w.out = append(w.out, s...)
		return
	}
	w.out = appendString(w.out, string(unquoteBytes(s)))
}

// plainInt reports whether tok, a JSON number, is an integer that
// canonicalNumber would spell as it is: no fraction or exponent, at most
// 18 digits (within int64), and not -0.
func plainInt(tok []byte) bool {
	digits := tok
	if digits[0] == '-' {
		digits = digits[1:]
		if len(digits) == 1 && digits[0] == '0' {
			return false
		}
	}
	if len(digits) > 18 {
		return false
	}
	for _, c := range digits {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}

// appendString appends s as a JSON string: quotes, backslashes and control
// characters escaped, invalid UTF-8 replaced by U+FFFD, everything else as
// is (no HTML escaping: the canonical form is for comparison, not
// embedding).
func appendString(buf []byte, s string) []byte {
	buf = append(buf, '"')
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if c >= 0x20 && c != '"' && c != '\\' {
				i++
				continue
			}
			buf = append(buf, s[start:i]...)
			switch c {
			case '"', '\\':
				buf = append(buf, '\\', c)
			case '\n':
				buf = append(buf, '\\', 'n')
			case '\r':
				buf = append(buf, '\\', 'r')
			case '\t':
				buf = append(buf, '\\', 't')
			default:
				buf = append(buf, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xF])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			buf = append(buf, s[start:i]...)
			buf = append(buf, `\ufffd`...)
			i += size
			start = i
			continue
		}
		i += size
	}
	buf = append(buf, s[start:]...)
	return append(buf, '"')
}
