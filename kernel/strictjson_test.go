package kernel

import (
	"fmt"
	"strings"
	"testing"
)

// TestCheckJSONDeepNesting: a hostile document nested to encoding/json's
// depth limit costs a bounded number of allocations (no path string built
// per level), and a fault at the bottom is still named by its full path.
// Not parallel: testing.AllocsPerRun refuses to run in a parallel test.
func TestCheckJSONDeepNesting(t *testing.T) {
	const depth = 9999
	deep := []byte(strings.Repeat("[", depth) + strings.Repeat("]", depth))
	if n := testing.AllocsPerRun(3, func() {
		if err := CheckJSON("doc", deep); err != nil {
			t.Fatal(err)
		}
	}); n > 1000 {
		t.Fatalf("CheckJSON of %d nested arrays made %.0f allocations; want a bounded number", depth, n)
	}
	bad := []byte(`{"a":[1,{"b":[{"c":"x` + "\\u0000" + `"}]}]}`)
	err := CheckJSON("doc", bad)
	if err == nil || !strings.Contains(err.Error(), `field "a[1].b[0].c" contains a NUL`) {
		t.Fatalf("error = %v, want it to name a[1].b[0].c", err)
	}
}

// TestCheckJSONRepeatedKeys: a repeated key is refused whether the object
// is small (linear scan) or past the scan's size (map), escaped or not.
func TestCheckJSONRepeatedKeys(t *testing.T) {
	t.Parallel()
	obj := func(n int, repeat string) []byte {
		var b strings.Builder
		b.WriteString("{")
		for i := range n {
			fmt.Fprintf(&b, `"k%d":%d,`, i, i)
		}
		b.WriteString(repeat + `:1}`)
		return []byte(b.String())
	}
	for _, tc := range []struct {
		doc  []byte
		want string // "" for accepted
	}{
		{obj(3, `"k1"`), `field "k1" appears twice`},
		{obj(15, `"k14"`), `field "k14" appears twice`},
		{obj(16, `"k0"`), `field "k0" appears twice`},
		{obj(40, `"k39"`), `field "k39" appears twice`},
		{obj(40, `"k\u0033"`), `field "k3" appears twice`},
		{obj(40, `"k40"`), ""},
		{obj(5, `"k5"`), ""},
	} {
		err := CheckJSON("doc", tc.doc)
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%s: %v", tc.doc, err)
		case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("%s: error %v, want %q", tc.doc, err, tc.want)
		}
	}
}

// TestCheckJSONRefusesNumbersNumericCannotHold: the bounds are
// PostgreSQL's (checked against a server: SELECT '{"a":<n>}'::jsonb).
func TestCheckJSONRefusesNumbersNumericCannotHold(t *testing.T) {
	t.Parallel()
	for n, ok := range map[string]bool{
		"1e131071": true, "1e131072": false, "100e131070": false, "0.001e131075": false,
		"1e-16383": true, "1.5e-16383": false, "1.0e-16383": false, "12e-16384": false,
		"0e200000": true, "0e-20000": false, "0e9999999999": false, "-1E+131072": false,
		"1e400": true, "1e-400": true, "123.456": true, "-0": true,
		"0." + strings.Repeat("0", 16383): true, "0." + strings.Repeat("0", 16384): false,
	} {
		err := CheckJSON("data", []byte(`{"a":[`+n+`]}`))
		if (err == nil) != ok {
			t.Errorf("%s: %v, want storable %v", Abbreviate(n, 24), err, ok)
		}
		if err != nil && !strings.Contains(err.Error(), `"a[0]"`) {
			t.Errorf("%s: %v does not name the field", Abbreviate(n, 24), err)
		}
	}
}

// TestCheckJSONDuplicateKeysOfAnyObject: the duplicate check compares
// decoded keys ("a" and "\u0061" are one key), per object (a nested or a
// sibling object may reuse its parent's keys), in small objects (searched
// in order) and large ones (past manyKeys, a map) alike.
func TestCheckJSONDuplicateKeysOfAnyObject(t *testing.T) {
	t.Parallel()
	many := func(n int, extra string) string {
		var b strings.Builder
		b.WriteString(`{`)
		for i := range n {
			fmt.Fprintf(&b, `"k%d":%d,`, i, i)
		}
		b.WriteString(extra + `}`)
		return b.String()
	}
	for doc, dup := range map[string]bool{
		`{"a":1,"\u0061":2}`:                            true,
		`{"a":{"a":{"a":1}},"b":[{"a":1},{"a":2}]}`:     false,
		`{"x":{"a":1,"b":2},"y":{"b":1,"a":2},"a":3}`:   false,
		`{"x":{"a":1,"b":2,"a":3}}`:                     true,
		many(40, `"k39":0`):                             true,
		many(40, `"k\u0033":0`):                         true,
		many(40, `"k40":0`):                             false,
		`{"o":` + many(40, `"z":{"k1":1}`) + `,"k1":2}`: false,
	} {
		err := CheckJSON("doc", []byte(doc))
		if got := err != nil; got != dup {
			t.Errorf("%.60s…: duplicate=%v (%v), want %v", doc, got, err, dup)
		}
		if dup && (err == nil || !strings.Contains(err.Error(), "appears twice")) {
			t.Errorf("%.60s…: %v, want the duplicate named", doc, err)
		}
	}
}
