package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/seed-7bc021c3/reckon/internal/soak"
)

// runSoak runs the fault soak. Its last line of output is the verdict in
// a fixed format; it exits 1 when anything was lost, duplicated,
// spuriously conflicting or re-executed, or a check could not be made.
func runSoak(ctx context.Context, args []string) error {
	passed, err := soakMain(ctx, args, os.Stdout, os.Getenv)
	if err != nil {
		return err
	}
	if !passed {
		os.Exit(1) // after the last line: nothing may be printed below it
	}
	return nil
}

func soakMain(ctx context.Context, args []string, stdout io.Writer, getenv func(string) string) (bool, error) {
	defRounds, err := envInt(getenv, "SOAK_ROUNDS", soak.DefaultRounds)
	if err != nil {
		return false, err
	}
	defTimeout, err := envDuration(getenv, "SOAK_TIMEOUT", soak.DefaultTimeout)
	if err != nil {
		return false, err
	}
	defOutage, err := envDuration(getenv, "SOAK_OUTAGE", soak.DefaultOutage)
	if err != nil {
		return false, err
	}
	fs := flag.NewFlagSet("soak", flag.ContinueOnError)
	rounds := fs.Int("rounds", defRounds, "faults per kill scenario (env SOAK_ROUNDS)")
	timeout := fs.Duration("timeout", defTimeout, "time limit of the whole soak; scenarios inject fewer faults when it is short (env SOAK_TIMEOUT)")
	outage := fs.Duration("outage", defOutage, "how long the database stays down under the publisher (env SOAK_OUTAGE)")
	rate := fs.Int("ingest-rate", soak.DefaultIngestRate, "events/s the load generator offers (0: as fast as the API answers)")
	out := fs.String("out", "", "directory of the JSON report and the processes' logs (default $RECKON_DATA_DIR/soak/<time>)")
	only := fs.String("only", "", "comma-separated scenarios to run (default all: "+strings.Join(soak.Scenarios, ",")+")")
	keep := fs.Bool("keep-data", false, "keep the private data directory (Temporal's SQLite file, run workspaces) of a passing soak too")
	pgBin := fs.String("pg-bin", getenv("SOAK_PG_BIN"), "directory of initdb, pg_ctl and postgres (default: PATH, then /usr/lib/postgresql/*/bin; env SOAK_PG_BIN)")
	if err := parseFlags(fs, args); err != nil {
		return false, err
	}
	if *rounds < 1 || *timeout <= 0 || *outage <= 0 || *rate < 0 {
		return false, usageErrorf("--rounds must be at least 1, --timeout and --outage positive, --ingest-rate at least 0")
	}
	bin, err := os.Executable()
	if err != nil {
		return false, fmt.Errorf("find the reckon binary to run: %w", err)
	}
	if *out == "" {
		dataDir := getenv("RECKON_DATA_DIR")
		if dataDir == "" {
			dataDir = ".reckon"
		}
		*out = filepath.Join(dataDir, "soak", time.Now().UTC().Format("20060102-150405"))
	}
	if *out, err = filepath.Abs(*out); err != nil {
		return false, err
	}
	var sel []string
	if *only != "" {
		sel = strings.Split(*only, ",")
	}
	o := soak.Options{
		Binary: bin, Rounds: *rounds, Timeout: *timeout, Outage: *outage, IngestRate: *rate,
		OutDir: *out, PGBin: *pgBin, KeepData: *keep, Only: sel, Progress: stdout,
		Command: "reckon soak " + strings.Join(args, " "),
	}
	fmt.Fprintf(stdout, "soak: %d rounds, time limit %s, database outage %s, output in %s\n", *rounds, *timeout, *outage, *out)
	rep, err := soak.Run(ctx, o)
	if err != nil {
		return false, err
	}
	path, err := soak.WriteReport(rep, *out)
	if err != nil {
		return false, fmt.Errorf("write the report: %w", err)
	}
	for _, p := range rep.Problems {
		fmt.Fprintf(stdout, "soak: PROBLEM %s\n", p)
	}
	d := rep.WorkerDeathToListed
	if d.Count > 0 {
		fmt.Fprintf(stdout, "soak: worker death → operation listed: p50 %.1f s, max %.1f s (%d commands; heartbeat timeout %.0f s)\n", d.P50, d.Max, d.Count, rep.HeartbeatS)
	}
	fmt.Fprintf(stdout, "soak: %s in %.0f s; report %s\n", map[bool]string{true: "PASSED", false: "FAILED"}[rep.Passed], rep.Seconds, path)
	fmt.Fprintln(stdout, rep.LastLine())
	return rep.Passed, nil
}

func envInt(getenv func(string) string, k string, def int) (int, error) {
	s := strings.TrimSpace(getenv(k))
	if s == "" {
		return def, nil
	}
	v, err := strconv.Atoi(s)
	if err != nil || v < 1 {
		return 0, fmt.Errorf("%s must be a positive integer, got %q", k, s)
	}
	return v, nil
}

func envDuration(getenv func(string) string, k string, def time.Duration) (time.Duration, error) {
	s := strings.TrimSpace(getenv(k))
	if s == "" {
		return def, nil
	}
	v, err := time.ParseDuration(s)
	if err != nil || v <= 0 {
		return 0, fmt.Errorf("%s must be a positive Go duration (e.g. 15m), got %q", k, s)
	}
	return v, nil
}
