package kernel

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"unicode/utf8"
)

// CheckJSON is the boundary's byte-level check of a JSON document, run
// before anything decodes it. encoding/json silently replaces invalid UTF-8
// (and lone surrogate escapes) with U+FFFD, so "u1-\xff" and "u1-\xfe"
// would decode to the same id; it lets the last of two equal object keys
// win; and PostgreSQL refuses a NUL in text. CheckJSON refuses all three,
// with an EInvalid naming where: the JSON path of the offending value
// (events[1].data.note), prefixed by what (e.g. "request body").
func CheckJSON(what string, raw []byte) error {
	_, err := checkedJSON(what, raw)
	return err
}

// checkedJSON is CheckJSON for a caller that walks the document next
// (jsonspan.go): it also reports whether the document is syntactically
// valid JSON, which CheckJSON leaves to the caller's decoder to explain.
func checkedJSON(what string, raw []byte) (valid bool, err error) {
	if !json.Valid(raw) {
		// The caller's decoder explains the syntax error better; only the
		// byte-level faults json.Valid accepts are CheckJSON's business,
		// except invalid UTF-8, which json.Valid also accepts inside strings.
		if !utf8.Valid(raw) {
			return false, Errorf(EInvalid, "%s is not valid UTF-8", what)
		}
		return false, nil
	}
	s := scratchPool.Get().(*jsonScratch)
	defer s.release()
	c := checker{raw: raw, path: s.path[:0], keys: s.keys[:0]}
	err = c.value()
	keepScratch(&s.path, c.path)
	keepScratch(&s.keys, c.keys)
	if err != nil {
		return true, Errorf(EInvalid, "%s: %s", what, err.Error())
	}
	return true, nil
}

// jsonScratch is the working memory of a walk of one document (checker's
// path and keys, canonWriter's pieces), reused from walk to walk. It
// cannot live on the stack: the walkers recurse, so the compiler moves
// the arrays to the heap, a sizeable share of what an enqueued event
// would allocate.
type jsonScratch struct {
	path   []pathSeg
	keys   [][]byte
	pieces []canonPiece
}

// maxScratch bounds what a jsonScratch keeps between walks: a document
// deep or wide enough to grow past it does not leave its arrays pinned.
const maxScratch = 256

var scratchPool = sync.Pool{New: func() any {
	return &jsonScratch{path: make([]pathSeg, 0, 8), keys: make([][]byte, 0, 16), pieces: make([]canonPiece, 0, 8)}
}}

// keepScratch takes back into *dst a walk's slice, which append may have
// grown, unless it grew past maxScratch.
func keepScratch[T any](dst *[]T, grown []T) {
	if cap(grown) <= maxScratch {
		*dst = grown
	}
}

// release returns s to the pool without the references its slices still
// hold into the document walked, which must not be kept alive by the pool.
func (s *jsonScratch) release() {
	clear(s.path[:cap(s.path)])
	clear(s.keys[:cap(s.keys)])
	clear(s.pieces[:cap(s.pieces)])
	scratchPool.Put(s)
}

// DecodeStrict is the boundary's one strict decoder of a JSON request
// body: CheckJSON first, then a decoder that refuses fields v does not
// declare and trailing data. what names the document in messages.
func DecodeStrict(what string, body []byte, v any) error {
	if len(bytes.TrimSpace(body)) == 0 {
		return Errorf(EInvalid, "%s is empty; expected a JSON object", what)
	}
	if err := CheckJSON(what, body); err != nil {
		return err
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return Errorf(EInvalid, "%s is not valid JSON for this endpoint: %v", what, err)
	}
	if dec.More() {
		return Errorf(EInvalid, "%s has trailing data after the JSON value", what)
	}
	return nil
}

// ReconcileRequest is the body of POST /v1/agent/operations/reconcile:
// an operator's ruling. Basis and actor are not fields: the server decides
// them, and DecodeStrict refuses a caller who sends them.
type ReconcileRequest struct {
	Project     string          `json:"project"`
	RunID       string          `json:"run_id"`
	OperationID string          `json:"operation_id"`
	Effect      string          `json:"effect"`
	Note        string          `json:"note"`
	Evidence    json.RawMessage `json:"evidence"`
}

// CheckText refuses a NUL or invalid UTF-8 in a text value outside JSON
// (a query parameter, a path segment, a header), naming it.
func CheckText(what, s string) error {
	if !utf8.ValidString(s) {
		return Errorf(EInvalid, "%s is not valid UTF-8", what)
	}
	if strings.IndexByte(s, 0) >= 0 {
		return Errorf(EInvalid, "%s contains a NUL character (U+0000), which reckon does not store", what)
	}
	return nil
}

// checker walks a syntactically valid JSON document (json.Valid checked
// it), so it only needs to find value boundaries, not report syntax errors.
type checker struct {
	raw []byte
	pos int
	// path is the JSON path of the value being walked, spelled out only
	// in an error: building a path string per value would cost quadratic
	// time and memory in the nesting depth (150 MB for 20 kB of "[").
	path []pathSeg
	// keys holds the keys of the objects being walked (seen).
	keys [][]byte
}

// pathSeg is one step of a JSON path: an object key, or an array index
// when idx >= 0.
type pathSeg struct {
	key []byte
	idx int
}

func (c *checker) ws() { c.pos = skipWS(c.raw, c.pos) }

// where names the value being walked: its path (events[1].data.note).
func (c *checker) where() string {
	if len(c.path) == 0 {
		return "the document"
	}
	var b strings.Builder
	for i, s := range c.path {
		switch {
		case s.idx >= 0:
			b.WriteString("[" + strconv.Itoa(s.idx) + "]")
		case i > 0:
			b.WriteByte('.')
			b.Write(s.key)
		default:
			b.Write(s.key)
		}
	}
	return fmt.Sprintf("field %q", b.String())
}

func (c *checker) value() error {
	c.ws()
	switch c.raw[c.pos] {
	case '{':
		c.pos++
		// The object's keys so far, decoded, for the duplicate check: on
		// a stack shared by the objects being walked, searched in order
		// (a map per object and a string per key were most of the
		// checker's allocations); an object past manyKeys gets a map.
		base := len(c.keys)
		var seen map[string]bool
		for {
			c.ws()
			if c.raw[c.pos] == '}' {
				c.pos++
				c.keys = c.keys[:base] // an error ends the walk: nothing to pop then
				return nil
			}
			if c.raw[c.pos] == ',' {
				c.pos++
				c.ws()
			}
			key, err := c.str()
			if err != nil {
				return err
			}
			c.path = append(c.path, pathSeg{key: key, idx: -1})
			if c.seen(base, &seen, key) {
				return fmt.Errorf("%s appears twice in one object; send each key once", c.where())
			}
			c.ws()
			c.pos++ // ':'
			if err := c.value(); err != nil {
				return err
			}
			c.path = c.path[:len(c.path)-1]
		}
	case '[':
		c.pos++
		for i := 0; ; i++ {
			c.ws()
			if c.raw[c.pos] == ']' {
				c.pos++
				return nil
			}
			if c.raw[c.pos] == ',' {
				c.pos++
			}
			c.path = append(c.path, pathSeg{idx: i})
			if err := c.value(); err != nil {
				return err
			}
			c.path = c.path[:len(c.path)-1]
		}
	case '"':
		return c.skipStr()
	default:
		start := c.pos
		c.pos = valueEnd(c.raw, start)
		if tok := c.raw[start:c.pos]; len(tok) > 0 && (tok[0] == '-' || tok[0] >= '0' && tok[0] <= '9') {
			if err := storableNumber(tok); err != nil {
				return fmt.Errorf("%s %s", c.where(), err)
			}
		}
		return nil
	}
}

// Bounds of a number the journal can store: data is jsonb, whose numbers
// are PostgreSQL numerics (a weight of at most 32767 base-10000 digits,
// a display scale of at most 16383).
const (
	maxNumericIntDigits  = 131072
	maxNumericFracDigits = 16383
)

// storableNumber refuses a JSON number (valid JSON: CheckJSON's caller
// checked) that PostgreSQL's numeric cannot hold -- 1e200000, 1e-20000,
// 0e9999999999 -- so that it is a 400 naming the field at the boundary,
// not an insert that fails with a database error. Its scale is counted as
// PostgreSQL counts it: every digit written after the point (trailing
// zeros too) minus the exponent.
func storableNumber(tok []byte) error {
	if len(tok) <= maxNumericFracDigits && !bytes.ContainsAny(tok, "eE") {
		return nil // without an exponent, too short to break either bound
	}
	s := string(tok)
	mant, expText, hasExp := strings.Cut(strings.ReplaceAll(s, "E", "e"), "e")
	_, frac, _ := strings.Cut(mant, ".")
	var exp int64
	if hasExp {
		e, err := strconv.ParseInt(strings.TrimPrefix(expText, "+"), 10, 64)
		if err != nil || e > 1e9 || e < -1e9 {
			return fmt.Errorf("is a number whose exponent (%s) is beyond what the journal stores (PostgreSQL numeric)", Abbreviate(expText, 32))
		}
		exp = e
	}
	if int64(len(frac))-exp > maxNumericFracDigits {
		return fmt.Errorf("is a number with more than %d digits after the decimal point, beyond what the journal stores (PostgreSQL numeric)", maxNumericFracDigits)
	}
	if d, ok := parseDecimal(s); ok && d.digits != "" {
		e, err := strconv.ParseInt(d.exp, 10, 64)
		if err != nil || int64(len(d.digits))+e > maxNumericIntDigits {
			return fmt.Errorf("is a number with more than %d digits before the decimal point, beyond what the journal stores (PostgreSQL numeric)", maxNumericIntDigits)
		}
	}
	return nil
}

// str reads the string at pos (a key, or the value at c.path) and returns it
// decoded (in raw when it holds no escape), refusing invalid UTF-8, lone
// surrogate escapes and NUL.
func (c *checker) str() ([]byte, error) {
	start := c.pos
	if err := c.skipStr(); err != nil {
		return nil, err
	}
	// Valid JSON and every escape checked: the decoding is exact.
	return unquoteBytes(c.raw[start:c.pos]), nil
}

// manyKeys is how many keys an object's duplicate check searches in order
// before it keeps them in a map.
const manyKeys = 32

// seen reports whether key is among the keys of the object whose first key
// is c.keys[base], and adds it.
func (c *checker) seen(base int, m *map[string]bool, key []byte) bool {
	if *m != nil {
		if (*m)[string(key)] {
			return true
		}
		(*m)[string(key)] = true
		return false
	}
	for _, k := range c.keys[base:] {
		if bytes.Equal(k, key) {
			return true
		}
	}
	c.keys = append(c.keys, key)
	if len(c.keys)-base > manyKeys {
		*m = make(map[string]bool, 2*manyKeys)
		for _, k := range c.keys[base:] {
			(*m)[string(k)] = true
		}
	}
	return false
}

// skipStr is str without the decoded string: values are checked, not kept,
// so they cost no allocation.
func (c *checker) skipStr() error {
	c.pos++ // opening quote
	for {
		b := c.raw[c.pos]
		switch {
		case b == '"':
			c.pos++
			return nil
		case b == '\\':
			if c.raw[c.pos+1] != 'u' {
				c.pos += 2
				continue
			}
			r := hex4(c.raw[c.pos+2 : c.pos+6])
			c.pos += 6
			switch {
			case r == 0:
				return fmt.Errorf("%s contains a NUL character (\\u0000), which reckon does not store", c.where())
			case r >= 0xDC00 && r <= 0xDFFF:
				return fmt.Errorf("%s contains a lone surrogate escape (\\u%04x), which is not a character", c.where(), r)
			case r >= 0xD800 && r <= 0xDBFF:
				if c.pos+6 > len(c.raw) || c.raw[c.pos] != '\\' || c.raw[c.pos+1] != 'u' {
					return fmt.Errorf("%s contains a lone surrogate escape (\\u%04x), which is not a character", c.where(), r)
				}
				lo := hex4(c.raw[c.pos+2 : c.pos+6])
				if lo < 0xDC00 || lo > 0xDFFF {
					return fmt.Errorf("%s contains a lone surrogate escape (\\u%04x), which is not a character", c.where(), r)
				}
				c.pos += 6
			}
		case b < utf8.RuneSelf:
			c.pos++
		default:
			r, size := utf8.DecodeRune(c.raw[c.pos:])
			if r == utf8.RuneError && size == 1 {
				return fmt.Errorf("%s is not valid UTF-8 (byte 0x%02x at offset %d)", c.where(), b, c.pos)
			}
			c.pos += size
		}
	}
}

func hex4(b []byte) rune {
	n, _ := strconv.ParseUint(string(b), 16, 32)
	return rune(n)
}
