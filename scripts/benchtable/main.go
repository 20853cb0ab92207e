// Command benchtable turns `make bench`'s output into one table of ratios:
// each reckon figure against a reference measured in the same run, with its
// target. It reads the references (lines "ref NAME VALUE" from
// scripts/bench-reference.sh and bench/riverref) and the `go test -bench`
// output, prints the table as Markdown and writes it as JSON for tracking.
//
//	go run ./scripts/benchtable -ref bin/bench-ref.txt -json bin/bench.json < bin/bench-raw.txt
package main

import (
	"bufio"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"time"
)

// figures maps "Benchmark/sub|unit" (the -N GOMAXPROCS suffix dropped) or
// "ref|name" to a value.
type figures map[string]float64

var procSuffix = regexp.MustCompile(`-\d+$`)

// parseBench reads `go test -bench` result lines: name, iterations, then
// value-unit pairs.
func parseBench(r io.Reader, into figures) error {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) < 4 || !strings.HasPrefix(f[0], "Benchmark") {
			continue
		}
		if _, err := strconv.Atoi(f[1]); err != nil {
			continue
		}
		name := procSuffix.ReplaceAllString(f[0], "")
		for i := 2; i+1 < len(f); i += 2 {
			v, err := strconv.ParseFloat(f[i], 64)
			if err != nil {
				continue
			}
			into[name+"|"+f[i+1]] = v
		}
	}
	return sc.Err()
}

// parseRefs reads "ref NAME VALUE" lines.
func parseRefs(r io.Reader, into figures) error {
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) == 3 && f[0] == "ref" {
			v, err := strconv.ParseFloat(f[2], 64)
			if err != nil {
				return fmt.Errorf("reference line %q: %w", sc.Text(), err)
			}
			into["ref|"+f[1]] = v
		}
	}
	return sc.Err()
}

// Row is one line of the table.
type Row struct {
	Path      string   `json:"path"`
	Reckon    float64  `json:"reckon"`
	Reference float64  `json:"reference"`
	Unit      string   `json:"unit"`
	RefName   string   `json:"reference_name"`
	Ratio     float64  `json:"ratio"`
	Target    string   `json:"target"`
	Met       *bool    `json:"met,omitempty"`
	Missing   []string `json:"missing,omitempty"`
}

// spec says how a row is computed: reckon and reference figures, and the
// target on their ratio (min: ratio ≥ target; max: ratio ≤ target).
type spec struct {
	path, unit, refName string
	reckon, ref         string
	refFallback         string // used when ref is missing
	refConst            float64
	min, max            float64
}

var specs = []spec{
	{path: "batched ingest, 500 events / round trip", unit: "events/s", refName: "pgbench, same table and indexes, 500 rows / tx, 1 client",
		reckon: "BenchmarkIngestBatch500|events/s", ref: "BenchmarkIngestBatch500|ref-events/s", refFallback: "ref|pgbench_batch500_c1", min: 0.85},
	{path: "single-event ingest, 8 concurrent callers (group commit)", unit: "events/s", refName: "pgbench single-row, 8 clients",
		reckon: "BenchmarkIngestSingleConcurrent|events/s", ref: "BenchmarkIngestSingleConcurrent|ref-events/s", refFallback: "ref|pgbench_batch1_c8", min: 0.70},
	{path: "single-event ingest, 1 caller", unit: "events/s", refName: "pgbench single-row, 1 client",
		reckon: "BenchmarkIngestBatch1|events/s", ref: "BenchmarkIngestBatch1|ref-events/s", refFallback: "ref|pgbench_batch1_c1"},
	{path: "publisher drain, 100k pre-enqueued, 2 publishers", unit: "events/s", refName: "pgbench raw insert ceiling (500 rows / tx)",
		reckon: "BenchmarkPublisherDrain/tx|events/s", ref: "ref|pgbench_batch500_c1"},
	{path: "enqueue → delivered, sustained (2 writers, 2 publishers)", unit: "events/s", refName: "pgbench raw insert, 100 rows / tx, 2 clients",
		reckon: "BenchmarkOutboxToJournal|events/s", ref: "ref|pgbench_batch100_c2"},
	// The queue peer (bench/riverref): River working the same number of
	// no-op jobs, inserted the same way, on the same PostgreSQL; the pgbench
	// rows above stay as the raw insert ceiling.
	{path: "drain vs River burn-down, 100k pre-enqueued", unit: "events/s", refName: "River burn-down, 100k pre-inserted no-op jobs (jobs/s)",
		reckon: "BenchmarkPublisherDrain/tx|events/s", ref: "ref|river_burndown"},
	// The sustained benchmark runs River's steady benchmark right after
	// each of its runs and reports the median pair; a river_steady line of
	// the reference file (bench/riverref -mode both, run by hand) is the
	// fallback for a raw file without it.
	{path: "sustained vs River steady (2 producers, 100 / tx)", unit: "events/s", refName: "River steady, 100k no-op jobs inserted while worked (jobs/s)",
		reckon: "BenchmarkOutboxToJournal|events/s", ref: "BenchmarkOutboxToJournal|river-jobs/s", refFallback: "ref|river_steady", min: 1.5},
	{path: "tool-call overhead, no-op tool (median per call)", unit: "ms", refName: "bare no-op Temporal activity, same server",
		reckon: "BenchmarkToolCallOverhead|call-median-ms", ref: "BenchmarkToolCallOverhead|bare-median-ms", max: 2},
	{path: "triage sweep, built-in, 1,000 runs × 5 ops", unit: "s", refName: "same events through the outbox alone",
		reckon: "BenchmarkSweep/builtin|s/sweep", ref: "BenchmarkSweep/builtin|floor-s", max: 2},
	{path: "triage sweep, 200 ms model, concurrency 8", unit: "walls/s", refName: "concurrency limit 8 / 0.2 s",
		reckon: "BenchmarkSweep/openai_fake_200ms_c8|walls/s", refConst: 40, min: 0.85},
}

func build(fig figures) []Row {
	var rows []Row
	for _, s := range specs {
		r := Row{Path: s.path, Unit: s.unit, RefName: s.refName}
		var ok bool
		if r.Reckon, ok = fig[s.reckon]; !ok {
			r.Missing = append(r.Missing, s.reckon)
		}
		r.Reference = s.refConst
		if s.ref != "" {
			if r.Reference, ok = fig[s.ref]; !ok && s.refFallback != "" {
				r.Reference, ok = fig[s.refFallback]
			}
			if !ok {
				r.Missing = append(r.Missing, s.ref)
			}
		}
		if len(r.Missing) == 0 && r.Reference != 0 {
			r.Ratio = r.Reckon / r.Reference
		}
		switch {
		case s.min > 0:
			r.Target = fmt.Sprintf("≥ %.2f", s.min)
		case s.max > 0:
			r.Target = fmt.Sprintf("≤ %.2f", s.max)
		default:
			r.Target = "—"
		}
		if len(r.Missing) == 0 && (s.min > 0 || s.max > 0) {
			met := (s.min > 0 && r.Ratio >= s.min) || (s.max > 0 && r.Ratio <= s.max)
			r.Met = &met
		}
		rows = append(rows, r)
	}
	rows = append(rows, listingRow(fig))
	return rows
}

// listingRow: the listing's p95 at the largest journal against the
// smallest (flat in journal size).
func listingRow(fig figures) Row {
	r := Row{Path: "operations listing, first page p95", Unit: "ms", Target: "≤ 1.50"}
	type size struct {
		name string
		n    float64
		p95  float64
	}
	var sizes []size
	for k, v := range fig {
		if name, ok := strings.CutPrefix(k, "BenchmarkListing|p95-ms@"); ok {
			sizes = append(sizes, size{name, parseSize(name), v})
		}
	}
	if len(sizes) < 2 {
		r.Missing = []string{"BenchmarkListing|p95-ms@<size> (two sizes or more)"}
		return r
	}
	sort.Slice(sizes, func(i, j int) bool { return sizes[i].n < sizes[j].n })
	lo, hi := sizes[0], sizes[len(sizes)-1]
	r.Path += " at " + hi.name + " events"
	r.RefName = "same at " + lo.name + " events"
	r.Reckon, r.Reference, r.Ratio = hi.p95, lo.p95, hi.p95/lo.p95
	met := r.Ratio <= 1.5
	r.Met = &met
	return r
}

func parseSize(s string) float64 {
	s = strings.ToLower(s)
	mult := 1.0
	switch {
	case strings.HasSuffix(s, "k"):
		mult, s = 1e3, strings.TrimSuffix(s, "k")
	case strings.HasSuffix(s, "m"):
		mult, s = 1e6, strings.TrimSuffix(s, "m")
	}
	v, _ := strconv.ParseFloat(s, 64)
	return v * mult
}

func num(v float64) string {
	switch {
	case v == 0:
		return "—"
	case v >= 100:
		return strconv.FormatFloat(math.Round(v), 'f', 0, 64)
	default:
		return strconv.FormatFloat(v, 'f', 2, 64)
	}
}

func markdown(w io.Writer, rows []Row) {
	fmt.Fprintln(w, "| path | reckon | reference (same run) | ratio | target |")
	fmt.Fprintln(w, "|---|---|---|---|---|")
	for _, r := range rows {
		ratio, mark := "—", ""
		if len(r.Missing) > 0 {
			ratio = "not measured"
		} else if r.Ratio != 0 {
			ratio = strconv.FormatFloat(r.Ratio, 'f', 2, 64)
		}
		if r.Met != nil {
			mark = " ✗"
			if *r.Met {
				mark = " ✓"
			}
		}
		fmt.Fprintf(w, "| %s | %s %s | %s: %s | %s | %s%s |\n", r.Path, num(r.Reckon), r.Unit, r.RefName, num(r.Reference), ratio, r.Target, mark)
	}
}

func main() {
	refPath := flag.String("ref", "bin/bench-ref.txt", "references written by scripts/bench-reference.sh and bench/riverref")
	jsonPath := flag.String("json", "bin/bench.json", "where to write the table as JSON")
	machine := flag.String("machine", "", "the machine, for the record")
	flag.Parse()
	fig := figures{}
	if f, err := os.Open(*refPath); err == nil {
		err = parseRefs(f, fig)
		_ = f.Close()
		if err != nil {
			fmt.Fprintln(os.Stderr, "benchtable:", err)
			os.Exit(1)
		}
	} else {
		fmt.Fprintf(os.Stderr, "benchtable: no references (%v); their rows say not measured\n", err)
	}
	if err := parseBench(os.Stdin, fig); err != nil {
		fmt.Fprintln(os.Stderr, "benchtable: read benchmark output:", err)
		os.Exit(1)
	}
	rows := build(fig)
	fmt.Println()
	markdown(os.Stdout, rows)
	out, err := json.MarshalIndent(struct {
		Measured time.Time `json:"measured"`
		Machine  string    `json:"machine"`
		Rows     []Row     `json:"rows"`
	}{time.Now().UTC(), *machine, rows}, "", "  ")
	if err == nil {
		err = os.WriteFile(*jsonPath, append(out, '\n'), 0o644)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "benchtable: write JSON:", err)
		os.Exit(1)
	}
}
