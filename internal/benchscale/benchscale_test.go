package benchscale

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/seed-7bc021c3/reckon/internal/pgtest"
)

// TestRunSmall runs the whole measurement on a journal of a few thousand
// events in the tests' database, so that make bench-scale cannot rot
// between its runs: every step's checks (the conversion's counts, the
// same listing on both journals, the sweep's runs with one process and
// two, the dropped week's rows on both) hold, and the figures are there.
func TestRunSmall(t *testing.T) {
	t.Parallel()
	u, err := url.Parse(pgtest.BaseURL())
	if err != nil {
		t.Fatal(err)
	}
	var b [4]byte
	_, _ = rand.Read(b[:])
	c := Config{
		URL: u.String(), Prefix: "bench_scale_" + hex.EncodeToString(b[:]), Events: 6000, Runs: 60, Projects: 12, Weeks: 2,
		UnsettledEvery: 3, IngestEvents: 2000, Concurrency: 2, ListCalls: 20,
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	res, err := Run(ctx, c)
	if err != nil {
		t.Fatal(err)
	}
	var out strings.Builder
	if err := res.Print(&out); err != nil {
		t.Fatal(err)
	}
	t.Log("\n" + out.String())
	if res.Events == 0 || res.SweptRuns == 0 || res.Listed == 0 || res.Dropped == 0 || len(res.Ingest) != len(BatchSizes) {
		t.Fatalf("a figure is missing: %+v", res)
	}
	if res.BytesPart == 0 || res.BytesFlat == 0 || res.Convert <= 0 {
		t.Fatalf("sizes or conversion time missing: %+v", res)
	}
}

// TestP95 checks the nearest-rank percentile the listing reports.
func TestP95(t *testing.T) {
	t.Parallel()
	var ds []time.Duration
	for i := 100; i >= 1; i-- {
		ds = append(ds, time.Duration(i)*time.Millisecond)
	}
	if got := p95(ds); got != 95*time.Millisecond {
		t.Fatalf("p95 of 1..100 ms = %s, want 95ms", got)
	}
	if got := p95(ds[:1]); got != 100*time.Millisecond {
		t.Fatalf("p95 of one figure = %s, want it", got)
	}
}

// TestFromEnv checks the sizes' defaults and that a bad one is refused.
func TestFromEnv(t *testing.T) {
	t.Parallel()
	c, err := FromEnv(func(string) string { return "" })
	if err != nil {
		t.Fatal(err)
	}
	if c.Events != DefaultEvents || c.Runs != DefaultEvents/100 || c.Projects != DefaultProjects || c.opsPerRun() != 49 {
		t.Fatalf("defaults: %+v", c)
	}
	env := map[string]string{"RECKON_BENCH_SCALE_EVENTS": "2x"}
	if _, err := FromEnv(func(k string) string { return env[k] }); err == nil {
		t.Fatal("RECKON_BENCH_SCALE_EVENTS=2x accepted")
	}
	env = map[string]string{"RECKON_BENCH_SCALE_EVENTS": "100", "RECKON_BENCH_SCALE_RUNS": "50"}
	if _, err := FromEnv(func(k string) string { return env[k] }); err == nil {
		t.Fatal("2 events per run accepted")
	}
}
