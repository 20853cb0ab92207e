package kernel

import (
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
