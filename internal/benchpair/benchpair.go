// Package benchpair repeats a benchmark measurement together with its
// reference and keeps the median pair.
//
// A ratio from one measurement and one reference, each a few seconds on a
// small machine shared by the client and PostgreSQL, moves a lot between
// back-to-back runs. Measuring the pair several times, each pair side by
// side, and reporting the pair of median ratio keeps one disturbed
// measurement — of either side — from being the figure.
package benchpair

import (
	"cmp"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
)

// Pair is one measurement and its reference, taken side by side.
type Pair struct {
	Value, Ref float64
}

// Ratio is Value / Ref.
func (p Pair) Ratio() float64 { return p.Value / p.Ref }

// DefaultRepeats is how many pairs Repeats asks for when
// RECKON_BENCH_REPEAT does not say. Five, not three: with three, one
// disturbed pair next to another on the same side moves the median. The
// pairs are the short part of make bench.
const DefaultRepeats = 5

// Repeats is how many pairs a benchmark measures: RECKON_BENCH_REPEAT, or
// DefaultRepeats.
func Repeats() (int, error) {
	v := os.Getenv("RECKON_BENCH_REPEAT")
	if v == "" {
		return DefaultRepeats, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 || n > 100 {
		return 0, fmt.Errorf("RECKON_BENCH_REPEAT: %q is not a count from 1 to 100", v)
	}
	return n, nil
}

// Median returns the pair of median ratio (the lower middle one of an even
// count) and the pairs' ratios as text, for the benchmark's log.
func Median(pairs []Pair) (Pair, string) {
	sorted := slices.Clone(pairs)
	slices.SortStableFunc(sorted, func(a, b Pair) int { return cmp.Compare(a.Ratio(), b.Ratio()) })
	ratios := make([]string, len(pairs))
	for i, p := range pairs {
		ratios[i] = strconv.FormatFloat(p.Ratio(), 'f', 2, 64)
	}
	return sorted[(len(sorted)-1)/2], strings.Join(ratios, ", ")
}
