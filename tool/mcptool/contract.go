package mcptool

import (
	"encoding/json"
	"fmt"
	"sort"
	"strconv"
	"strings"
)

// A Contract declares, for one write tool of one server, how a read tool
// of the same server shows whether a call of it landed: which read checks
// it (Read, its arguments taken from the write's), which part of the read's
// answer is the write's effect (Effect, a path), and what that part looks
// like once the call landed (Occurred). The format, with examples:
// docs/probe-contracts.md. TestContractsCompile.
type Contract struct {
	// Server names the RECKON_MCP_SERVERS entry; set only in a
	// RECKON_PROBE_CONTRACTS file (a server entry's own probes need none).
	Server string `json:"server,omitempty"`
	// Write is the server's write tool the contract checks.
	Write string `json:"write"`
	// When, if set, limits the contract to calls whose arguments hold
	// these values (git_tag's {"mode": "create"}); a call no contract
	// applies to is not checked.
	When map[string]any `json:"when,omitempty"`
	// Each iterates arrays of the write's arguments: one check per
	// element (per combination, nested), the element bound to As.
	Each []Each `json:"each,omitempty"`
	// Read is the read tool and its arguments.
	Read ReadSpec `json:"read"`
	// Effect is the path of the write's effect in the read's answer.
	Effect string `json:"effect"`
	// Occurred says what the effect looks like once the call landed.
	Occurred Occurred `json:"occurred"`
}

// Each binds As to every element of the array In (a reference).
type Each struct {
	As string `json:"as"`
	In string `json:"in"`
}

// ReadSpec is a read call: strings of Args starting with "$" are
// references to the write's arguments ("$.order_id") or to an Each
// binding ("$e.name"); "$$" starts a literal "$".
type ReadSpec struct {
	Tool string         `json:"tool"`
	Args map[string]any `json:"args,omitempty"`
}

// Occurred is what a landed call's effect looks like: exactly one of
// Exists (the path matches), Equals (the value there equals a literal or a
// reference), Changed (the value differs from the one read just before
// the call).
type Occurred struct {
	Exists  bool `json:"exists,omitempty"`
	Equals  any  `json:"equals,omitempty"`
	Changed bool `json:"changed,omitempty"`
}

// Fact operators.
const (
	opExists = "exists"
	opEq     = "eq"
	opNe     = "ne"
)

// Fact is one statement a call would make true, self-contained: the read
// to make, the path of the effect with every reference resolved, and the
// test. Its JSON text is its key in Facts.
type Fact struct {
	Read  string          `json:"read"`
	Args  json.RawMessage `json:"args"`
	Path  []Step          `json:"path"`
	Op    string          `json:"op"`
	Value json.RawMessage `json:"value,omitempty"`
}

// Step is one resolved step of a path: a field, an index, an element equal
// to Elem, or the first element whose fields equal Where's.
type Step struct {
	Field string          `json:"f,omitempty"`
	Index *int            `json:"i,omitempty"`
	Elem  json.RawMessage `json:"e,omitempty"`
	Where map[string]any  `json:"w,omitempty"`
}

// Key is the fact's key in Facts.
func (f Fact) Key() string {
	b, _ := json.Marshal(f)
	return string(b)
}

// Subject is the read the fact tests ("tool args"): two facts of one
// subject look at the same answer.
func (f Fact) Subject() string { return f.Read + " " + string(f.Args) }

// ParseFact decodes a fact key.
func ParseFact(key string) (Fact, error) {
	var f Fact
	if err := json.Unmarshal([]byte(key), &f); err != nil || f.Read == "" {
		return Fact{}, fmt.Errorf("%q is not a fact", key)
	}
	return f, nil
}

// String renders the fact for people.
func (f Fact) String() string {
	var b strings.Builder
	b.WriteString(f.Read + string(f.Args) + " ")
	b.WriteString(pathString(f.Path))
	switch f.Op {
	case opExists:
		b.WriteString(" exists")
	case opEq:
		b.WriteString(" = " + string(f.Value))
	case opNe:
		b.WriteString(" ≠ " + string(f.Value))
	}
	return b.String()
}

func pathString(steps []Step) string {
	var b strings.Builder
	b.WriteString("$")
	for _, s := range steps {
		switch {
		case s.Field != "":
			b.WriteString("." + s.Field)
		case s.Index != nil:
			b.WriteString("[" + strconv.Itoa(*s.Index) + "]")
		case s.Elem != nil:
			b.WriteString("[=" + string(s.Elem) + "]")
		default:
			keys := make([]string, 0, len(s.Where))
			for k := range s.Where {
				keys = append(keys, k)
			}
			sort.Strings(keys)
			parts := make([]string, len(keys))
			for i, k := range keys {
				v, _ := json.Marshal(s.Where[k])
				parts[i] = k + "=" + string(v)
			}
			b.WriteString("[" + strings.Join(parts, ",") + "]")
		}
	}
	return b.String()
}

// Eval says whether the fact holds in the read's answer (decoded JSON).
func (f Fact) Eval(answer any) bool {
	v, ok := walk(answer, f.Path)
	switch f.Op {
	case opExists:
		return ok
	case opEq:
		return ok && jsonEqual(v, f.Value)
	case opNe:
		// A missing effect differs from any prior value but "missing".
		if !ok {
			return string(f.Value) != "null"
		}
		return !jsonEqual(v, f.Value)
	}
	return false
}

// walk follows steps through v.
func walk(v any, steps []Step) (any, bool) {
	for _, s := range steps {
		switch {
		case s.Field != "":
			m, ok := v.(map[string]any)
			if !ok {
				return nil, false
			}
			if v, ok = m[s.Field]; !ok {
				return nil, false
			}
		case s.Index != nil:
			a, ok := v.([]any)
			if !ok || *s.Index < 0 || *s.Index >= len(a) {
				return nil, false
			}
			v = a[*s.Index]
		default:
			next, ok := pick(v, s)
			if !ok {
				return nil, false
			}
			v = next
		}
	}
	return v, true
}

// pick is the first element of array or object v matching s (Elem or
// Where).
func pick(v any, s Step) (any, bool) {
	var elems []any
	switch x := v.(type) {
	case []any:
		elems = x
	case map[string]any:
		keys := make([]string, 0, len(x))
		for k := range x {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			elems = append(elems, x[k])
		}
	default:
		return nil, false
	}
	for _, e := range elems {
		if s.Elem != nil {
			if jsonEqual(e, s.Elem) {
				return e, true
			}
			continue
		}
		m, ok := e.(map[string]any)
		if !ok {
			continue
		}
		all := true
		for k, want := range s.Where {
			w, _ := json.Marshal(want)
			all = all && jsonEqual(m[k], w)
		}
		if all {
			return e, true
		}
	}
	return nil, false
}

// jsonEqual compares decoded v with JSON text want, numbers by value and
// a number with its decimal string (servers differ in how they render
// ids).
func jsonEqual(v any, want json.RawMessage) bool {
	var w any
	if json.Unmarshal(want, &w) != nil {
		return false
	}
	a, _ := json.Marshal(v)
	b, _ := json.Marshal(w)
	if string(a) == string(b) {
		return true
	}
	as, aok := scalarString(v)
	bs, bok := scalarString(w)
	return aok && bok && as == bs
}

func scalarString(v any) (string, bool) {
	switch x := v.(type) {
	case string:
		return x, true
	case float64:
		return strconv.FormatFloat(x, 'f', -1, 64), true
	}
	return "", false
}
