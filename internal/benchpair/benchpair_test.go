package benchpair

import "testing"

func TestMedian(t *testing.T) {
	t.Parallel()
	pairs := []Pair{{9, 10}, {5, 10}, {30, 10}}
	m, text := Median(pairs)
	if m != (Pair{9, 10}) || text != "0.90, 0.50, 3.00" {
		t.Fatalf("median %v, ratios %q", m, text)
	}
	if m, _ := Median([]Pair{{4, 1}, {1, 1}, {2, 1}, {3, 1}}); m != (Pair{2, 1}) {
		t.Fatalf("even count: median %v, want the lower middle", m)
	}
	if m, _ := Median([]Pair{{7, 2}}); m != (Pair{7, 2}) {
		t.Fatalf("one pair: %v", m)
	}
}

func TestRepeats(t *testing.T) {
	for v, want := range map[string]int{"": DefaultRepeats, "1": 1, "5": 5} {
		t.Setenv("RECKON_BENCH_REPEAT", v)
		if n, err := Repeats(); err != nil || n != want {
			t.Errorf("%q: %d %v, want %d", v, n, err, want)
		}
	}
	for _, v := range []string{"0", "-1", "x", "101"} {
		t.Setenv("RECKON_BENCH_REPEAT", v)
		if _, err := Repeats(); err == nil {
			t.Errorf("%q accepted", v)
		}
	}
}
