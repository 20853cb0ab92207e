package benchscale

import (
	"fmt"
	"io"
	"text/tabwriter"
	"time"
)

// Pair is one figure on the partitioned journal and on the flat one.
type Pair struct {
	Part, Flat float64
}

// Ratio is partitioned / flat.
func (p Pair) Ratio() float64 { return p.Part / p.Flat }

// IngestFigure is the ingest rate, events/s, of one batch size.
type IngestFigure struct {
	Batch      int
	Part, Flat float64
}

// Result is what Run measured.
type Result struct {
	Config Config
	// Events is the journal's size; Generate how long the flat journal
	// took to build.
	Events   int64
	Generate time.Duration
	// BytesPart and BytesFlat are the journals' bytes on disk (events
	// with their indexes, the key table, the runs index); Partitions the
	// partitioned journal's count; BytesKeys the key table's share of
	// BytesPart.
	BytesPart, BytesFlat, BytesKeys int64
	Partitions                      int
	// Convert is migration 00080's time on the copy at 00075;
	// ConvertChecked what its check found.
	Convert        time.Duration
	ConvertChecked string
	Ingest         []IngestFigure
	// ListP95 is the listing's p95, ms, over ListProjects projects, which
	// listed Listed operations on their first pages.
	ListP95      Pair
	ListProjects int
	Listed       int
	// Sweep1 and Sweep2 are the sweep's seconds with one and two
	// processes; SweptRuns the runs it read.
	Sweep1, Sweep2 Pair
	SweptRuns      int
	// Drop is the retention of the oldest week (Dropped events), Vacuum
	// the VACUUM after it, seconds.
	Drop, Vacuum Pair
	Dropped      int64
}

// Print writes the table: each figure on both journals and their ratio.
func (r *Result) Print(w io.Writer) error {
	c := r.Config
	fmt.Fprintf(w, "journal: %d events, %d runs, %d projects over %d weeks and this one (%d partitions); built in %s\n",
		r.Events, c.Runs, c.Projects, c.Weeks, r.Partitions, r.Generate.Round(time.Second))
	fmt.Fprintf(w, "conversion by migration 00080: %s, %.0f events/s; checked: %s\n",
		r.Convert.Round(time.Millisecond), float64(r.Events)/r.Convert.Seconds(), r.ConvertChecked)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "measure\tpartitioned\tflat\tratio p/f\t")
	row := func(name, unit string, p Pair) {
		fmt.Fprintf(tw, "%s\t%.2f %s\t%.2f %s\t%.2f\t\n", name, p.Part, unit, p.Flat, unit, p.Ratio())
	}
	perEvent := func(n int64) float64 { return float64(n) / float64(r.Events) }
	row("bytes on disk per event", "B", Pair{perEvent(r.BytesPart), perEvent(r.BytesFlat)})
	fmt.Fprintf(tw, "of which the key table\t%.2f B\t\t\t\n", perEvent(r.BytesKeys))
	for _, f := range r.Ingest {
		row(fmt.Sprintf("ingest, batches of %d, %d writers", f.Batch, c.Concurrency), "ev/s", Pair{f.Part, f.Flat})
	}
	row(fmt.Sprintf("listing p95 (%d projects, %d calls)", r.ListProjects, c.ListCalls), "ms", r.ListP95)
	row(fmt.Sprintf("sweep, 1 process (%d runs)", r.SweptRuns), "s", r.Sweep1)
	row("sweep, 2 processes", "s", r.Sweep2)
	row("sweep, 2 processes / 1", "x", Pair{r.Sweep2.Part / r.Sweep1.Part, r.Sweep2.Flat / r.Sweep1.Flat})
	row(fmt.Sprintf("retention of the oldest week, pass / DELETE (%d events)", r.Dropped), "s", r.Drop)
	row("VACUUM journal_events after it", "s", r.Vacuum)
	return tw.Flush()
}
