package kernel

import (
	"fmt"
	"strings"
	"sync"
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

// TestJSONWalksShareNoStateAcrossCalls: the checker and the canonical
// writer take their working memory from a pool (jsonScratch); walks run
// concurrently and one after another, a deep or wide document among them
// (whose grown arrays the pool does not keep), still answer exactly as a
// walk alone does.
func TestJSONWalksShareNoStateAcrossCalls(t *testing.T) {
	t.Parallel()
	wide := func(n int, dup bool) string {
		var b strings.Builder
		b.WriteString(`{`)
		for i := range n {
			fmt.Fprintf(&b, `"k%d":{"z":%d,"a":[%d]},`, n-i, i, i)
		}
		if dup {
			b.WriteString(`"k1":0,`)
		}
		b.WriteString(`"end":true}`)
		return b.String()
	}
	docs := []string{
		`{"b":1,"a":{"d":2,"c":3}}`,
		`{"a":1,"a":2}`,
		`{"x":{"a":1,"b":2,"a":3}}`,
		strings.Repeat(`{"a":`, 400) + `1` + strings.Repeat(`}`, 400),
		strings.Repeat(`[`, 300) + `{"k":"v","k":"w"}` + strings.Repeat(`]`, 300),
		wide(maxScratch+50, false),
		wide(maxScratch+50, true),
		`{"z":[{"y":1,"x":2},{"w":3}],"a":"\u00e9"}`,
	}
	type answer struct {
		err   string
		canon string
	}
	walk := func(doc string) answer {
		var a answer
		if err := CheckJSON("doc", []byte(doc)); err != nil {
			a.err = err.Error()
			return a
		}
		a.canon = string(canonicalJSON([]byte(doc)))
		return a
	}
	want := make([]answer, len(docs))
	for i, d := range docs {
		want[i] = walk(d)
	}
	if want[1].err == "" || want[4].err == "" || want[6].err == "" || want[0].canon != `{"a":{"c":3,"d":2},"b":1}` {
		t.Fatalf("the documents do not exercise what this test is for: %+v", want[:2])
	}
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for r := range 50 {
				i := (g + r*3) % len(docs)
				if got := walk(docs[i]); got != want[i] {
					t.Errorf("walk %d of document %d: %+v, want %+v", r, i, got, want[i])
					return
				}
			}
		}()
	}
	wg.Wait()
}
