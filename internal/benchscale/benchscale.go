// Package benchscale is make bench-scale: a journal of many millions of
// events built twice in one database, partitioned by week (migrations to
// the newest) and flat (migrations to 00075, the last before the
// partitioned journal), with the same content, and the partitioned one
// measured against the flat one: batched ingest rate, listing p95, the
// sweep's read side with one and two pipeline processes, the retention
// drop and the VACUUM after it, and the bytes on disk per event. A third
// copy at 00075 is converted by migration 00080 and checked. The method:
// docs/performance.md#journal-at-scale.
package benchscale

import (
	"context"
	"fmt"
	"io"
	"os"
	"strconv"
	"time"
)

// Config sizes and places a measurement.
type Config struct {
	// URL is the database the schemas are made in (created if missing).
	URL string
	// Prefix names the schemas: <prefix>_part, <prefix>_flat, <prefix>_conv.
	Prefix string
	// Events, Runs and Projects size the journal; Weeks is how many full
	// weeks before the current one its ingested_at spreads over.
	Events, Runs, Projects, Weeks int
	// UnsettledEvery: every this many runs, one leaves its last operation
	// unsettled.
	UnsettledEvery int
	// IngestEvents is how many events each side ingests per batch size;
	// Concurrency how many writers at once.
	IngestEvents, Concurrency int
	// ListCalls is how many listings each side makes.
	ListCalls int
	// Keep leaves the schemas in place at the end.
	Keep bool
	// Log receives progress lines.
	Log io.Writer
}

// Defaults of the environment's sizes.
const (
	DefaultEvents   = 20_000_000
	DefaultProjects = 1000
	DefaultWeeks    = 8
	// eventsPerRun is the default ratio of events to runs (200,000 runs
	// for 20 million events).
	eventsPerRun = 100
)

// FromEnv reads the configuration: RECKON_BENCH_SCALE_EVENTS (default 20
// million), _RUNS (events/100), _PROJECTS (1000), _WEEKS (8),
// _INGEST_EVENTS (20000), _LIST_CALLS (300), _KEEP (1 keeps the schemas),
// _URL (the database; default reckon_bench_scale on the local server),
// _PREFIX (of the schemas' names, default bench_scale: two measurements
// at once need two).
func FromEnv(getenv func(string) string) (Config, error) {
	c := Config{
		URL:            getenv("RECKON_BENCH_SCALE_URL"),
		Prefix:         getenv("RECKON_BENCH_SCALE_PREFIX"),
		UnsettledEvery: 20,
		Concurrency:    4,
		Keep:           getenv("RECKON_BENCH_SCALE_KEEP") == "1",
		Log:            os.Stderr,
	}
	if c.Prefix == "" {
		c.Prefix = "bench_scale"
	}
	if c.URL == "" {
		c.URL = "postgres://127.0.0.1:5432/reckon_bench_scale?sslmode=disable"
	}
	var err error
	num := func(name string, def int) int {
		if err != nil {
			return 0
		}
		v := getenv("RECKON_BENCH_SCALE_" + name)
		if v == "" {
			return def
		}
		n, e := strconv.Atoi(v)
		if e != nil || n < 1 {
			err = fmt.Errorf("RECKON_BENCH_SCALE_%s: %q is not a positive count", name, v)
		}
		return n
	}
	c.Events = num("EVENTS", DefaultEvents)
	c.Runs = num("RUNS", max(c.Events/eventsPerRun, 1))
	c.Projects = num("PROJECTS", DefaultProjects)
	c.Weeks = num("WEEKS", DefaultWeeks)
	c.IngestEvents = num("INGEST_EVENTS", 20_000)
	c.ListCalls = num("LIST_CALLS", 300)
	if err != nil {
		return Config{}, err
	}
	return c, c.check()
}

// check refuses sizes the generator cannot honour.
func (c Config) check() error {
	switch {
	case c.Projects < 6:
		return fmt.Errorf("bench-scale: %d projects: at least 6 (five big ones and the rest)", c.Projects)
	case c.Events/c.Runs < 4:
		return fmt.Errorf("bench-scale: %d events over %d runs: a run needs at least 4 (start, one operation, end)", c.Events, c.Runs)
	case c.Weeks < 2:
		return fmt.Errorf("bench-scale: %d weeks: at least 2, so that a partition is dropped while others stay", c.Weeks)
	}
	return nil
}

// opsPerRun is how many operations each run has for the configured size.
func (c Config) opsPerRun() int { return (c.Events/c.Runs - 2) / 2 }

func (c Config) logf(format string, args ...any) {
	if c.Log != nil {
		fmt.Fprintf(c.Log, "bench-scale: "+format+"\n", args...)
	}
}

// Run builds the journals, measures them and returns the figures.
func Run(ctx context.Context, c Config) (*Result, error) {
	if err := c.check(); err != nil {
		return nil, err
	}
	db, err := open(ctx, c)
	if err != nil {
		return nil, err
	}
	defer db.close(ctx, c.Keep)
	res := &Result{Config: c}
	steps := []struct {
		name string
		do   func(context.Context, *bench, *Result) error
		// says is the step's figures, logged as soon as they are known:
		// a long run stopped part way still leaves them.
		says func(*Result) string
	}{
		{"generate the flat journal", generate, func(r *Result) string { return fmt.Sprintf("%d events", r.Events) }},
		{"convert a copy with migration 00080", convert, func(r *Result) string {
			return fmt.Sprintf("%s, %.0f events/s; %s", r.Convert.Round(time.Millisecond), float64(r.Events)/r.Convert.Seconds(), r.ConvertChecked)
		}},
		{"copy into the partitioned journal", loadPartitioned, nil},
		{"sizes", sizes, func(r *Result) string {
			return fmt.Sprintf("%d B partitioned (%d of them keys), %d B flat", r.BytesPart, r.BytesKeys, r.BytesFlat)
		}},
		{"listing", listing, func(r *Result) string { return fmt.Sprintf("p95 %+v ms", r.ListP95) }},
		{"sweep", sweep, func(r *Result) string { return fmt.Sprintf("1 process %+v s, 2 processes %+v s", r.Sweep1, r.Sweep2) }},
		{"batched ingest", ingest, func(r *Result) string { return fmt.Sprintf("%+v events/s", r.Ingest) }},
		{"retention", dropOldest, func(r *Result) string { return fmt.Sprintf("drop %+v s, vacuum %+v s", r.Drop, r.Vacuum) }},
	}
	b := &bench{db: db, cfg: c}
	for _, s := range steps {
		start := time.Now()
		c.logf("%s ...", s.name)
		if err := s.do(ctx, b, res); err != nil {
			return res, fmt.Errorf("bench-scale: %s: %w", s.name, err)
		}
		c.logf("%s: %s", s.name, time.Since(start).Round(time.Millisecond))
		if s.says != nil {
			c.logf("%s: %s", s.name, s.says(res))
		}
	}
	return res, nil
}
