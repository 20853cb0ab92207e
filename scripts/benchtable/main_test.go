package main

import (
	"strings"
	"testing"
)

// TestRiverRows: the queue-peer references of bench/riverref become rows of
// their own next to the pgbench ones, which keep their reference.
func TestRiverRows(t *testing.T) {
	t.Parallel()
	fig := figures{}
	refs := "pgbench reference batch500, 1 client(s): 80 tx/s = 40000 events/s\n" +
		"ref pgbench_batch500_c1 40000\nref pgbench_batch100_c2 50000\n" +
		"River burn-down: 100000 pre-inserted no-op jobs completed in 10s = 10000 jobs/s\n" +
		"ref river_burndown 10000\nref river_steady 5000\n"
	if err := parseRefs(strings.NewReader(refs), fig); err != nil {
		t.Fatal(err)
	}
	bench := "BenchmarkPublisherDrain/tx-2         \t       1\t12000 events/s\n" +
		"BenchmarkOutboxToJournal-2   \t       1\t  6000 events/s\n"
	if err := parseBench(strings.NewReader(bench), fig); err != nil {
		t.Fatal(err)
	}
	rows := map[string]Row{}
	for _, r := range build(fig) {
		rows[r.Path] = r
	}
	for _, want := range []struct {
		path      string
		reference float64
		ratio     float64
		met       *bool
	}{
		{"publisher drain, 100k pre-enqueued, 2 publishers", 40000, 0.3, nil},
		{"enqueue → delivered, sustained (2 writers, 2 publishers)", 50000, 0.12, nil},
		{"drain vs River burn-down, 100k pre-enqueued", 10000, 1.2, nil},
		{"sustained vs River steady (2 producers, 100 / tx)", 5000, 1.2, new(false)},
	} {
		r, ok := rows[want.path]
		if !ok {
			t.Errorf("no row %q", want.path)
			continue
		}
		if len(r.Missing) > 0 || r.Reference != want.reference || r.Ratio != want.ratio {
			t.Errorf("%s: reference %v ratio %v missing %v, want reference %v ratio %v", want.path, r.Reference, r.Ratio, r.Missing, want.reference, want.ratio)
		}
		if (r.Met == nil) != (want.met == nil) || (r.Met != nil && *r.Met != *want.met) {
			t.Errorf("%s: met %v, want %v", want.path, r.Met, want.met)
		}
	}
	if r := rows["sustained vs River steady (2 producers, 100 / tx)"]; r.Target != "≥ 1.50" {
		t.Errorf("sustained vs River: target %q, want ≥ 1.50", r.Target)
	}

	// The sustained benchmark's own River pairs win over the run's start.
	if err := parseBench(strings.NewReader("BenchmarkOutboxToJournal-2   \t       1\t  6000 events/s\t  4000 river-jobs/s\t  1.5 x-river\n"), fig); err != nil {
		t.Fatal(err)
	}
	for _, r := range build(fig) {
		if r.Path == "sustained vs River steady (2 producers, 100 / tx)" && (r.Reference != 4000 || r.Ratio != 1.5 || r.Met == nil || !*r.Met) {
			t.Errorf("with the benchmark's own River figure: reference %v ratio %v met %v, want 4000, 1.5, met", r.Reference, r.Ratio, r.Met)
		}
	}

	// Without the River reference (its module not built), its rows say so
	// rather than vanish or borrow another reference.
	delete(fig, "ref|river_steady")
	delete(fig, "BenchmarkOutboxToJournal|river-jobs/s")
	for _, r := range build(fig) {
		if r.Path == "sustained vs River steady (2 producers, 100 / tx)" && (len(r.Missing) == 0 || r.Met != nil) {
			t.Errorf("without ref|river_steady: missing %v met %v, want not measured", r.Missing, r.Met)
		}
	}
}
