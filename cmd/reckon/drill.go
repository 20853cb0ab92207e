package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"flag"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/rs/zerolog"

	"github.com/seed-7bc021c3/reckon/evals/drill"
	"github.com/seed-7bc021c3/reckon/internal/app"
	"github.com/seed-7bc021c3/reckon/platform/config"
)

func runDrill(ctx context.Context, args []string) error {
	fset := flag.NewFlagSet("drill", flag.ContinueOnError)
	seed := fset.Uint64("seed", 1, "generator seed: the same seed drills the same scenarios")
	count := fset.Int("count", 64, "scenarios to drill (every kind is covered once count reaches the number of kinds)")
	out := fset.String("out", "evals/fixtures", "folder for the fixtures and manifest.json (a previous suite there is replaced)")
	project := fset.String("project", "drill", "project the drill runs are recorded under")
	sweepDelay := fset.Duration("sweep-delay", 6*time.Minute, "walls are built as a sweep this long after each run would build them (past the MCP probe's grace)")
	fsServer := fset.String("filesystem-server", "", "path of @modelcontextprotocol/server-filesystem's dist/index.js (default: found under testdata/npm)")
	keep := fset.Bool("keep", false, "keep the drill's database schema and data directory for inspection")
	suite := fset.String("suite", "builtin", "scenarios to drill: builtin (reckon's own kinds), tau2-retail (tau2-bench's retail tasks replayed; needs --data), mcp-sqlite or git (the npm servers of testdata/npm)")
	data := fset.String("data", "", "the tau2-bench retail data folder (db.json, tasks.json) for --suite tau2-retail")
	s, err := prologue(fset, args)
	if err != nil {
		return err
	}
	if *count < 1 {
		return usageErrorf("--count: must be at least 1")
	}
	cfg := s.cfg
	var t2 *drill.Tau2Suite
	var npmDir string
	npmGen := map[string]func(uint64, int) []drill.Scenario{"mcp-sqlite": drill.GenerateSQLite, "git": drill.GenerateGit}
	switch *suite {
	case "builtin":
	case "mcp-sqlite", "git":
		wd, _ := os.Getwd()
		if npmDir = drill.FindNPMDir(wd); npmDir == "" {
			return fmt.Errorf("--suite %s: mcp-sqlite and @cyanheads/git-mcp-server are not installed under testdata/npm; run scripts/ensure-deps.sh (needs node and npm)", *suite)
		}
	case "tau2-retail":
		if *data == "" {
			return usageErrorf("--data: --suite tau2-retail needs the tau2-bench retail data folder (db.json, tasks.json); docs/evals.md#tau2-retail says where to get it")
		}
		if t2, err = drill.LoadTau2(*data); err != nil {
			return err
		}
	default:
		return usageErrorf("--suite: want builtin, tau2-retail, mcp-sqlite or git, got %q", *suite)
	}
	if *fsServer == "" {
		wd, _ := os.Getwd()
		*fsServer = drill.FindFilesystemServer(wd)
		if *fsServer == "" {
			return fmt.Errorf("--filesystem-server: @modelcontextprotocol/server-filesystem not found under testdata/npm; run scripts/ensure-deps.sh (needs node and npm) or pass its dist/index.js")
		}
	}
	if _, err := os.Stat(*fsServer); err != nil {
		return fmt.Errorf("--filesystem-server: %w", err)
	}

	// The drill works in a schema and a data directory of its own, so its
	// deliberately uncertain operations never land in a real project.
	stamp := time.Now().UTC().Format("20060102T150405")
	cfg.DataDir = filepath.Join(cfg.DataDir, "drill", fmt.Sprintf("seed-%d-%s", *seed, stamp))
	if err := os.MkdirAll(cfg.DataDir, 0o755); err != nil {
		return fmt.Errorf("drill data directory: %w", err)
	}
	schemaURL, dropSchema, err := drillSchema(ctx, cfg.DatabaseURL, *seed)
	if err != nil {
		return err
	}
	cfg.DatabaseURL = schemaURL
	if cfg.LogLevel == "info" {
		cfg.LogLevel = "error" // injected faults log warnings by design; progress says it better
	}
	defer func() {
		if *keep {
			fmt.Fprintf(os.Stderr, "drill: kept schema (%s) and data directory %s\n", schemaURL, cfg.DataDir)
			return
		}
		dropSchema()
		_ = os.RemoveAll(cfg.DataDir)
	}()

	fmt.Fprintf(os.Stderr, "drill: starting the embedded stack (PostgreSQL schema, Temporal, sandbox, MCP servers)…\n")
	// The embedded Temporal server logs its own shutdown at error level;
	// a drill that cannot run fails with its own error instead.
	wd, _ := os.Getwd()
	st, err := drill.OpenStack(ctx, drill.StackConfig{Config: cfg, FilesystemServer: *fsServer,
		MemoryServer: drill.FindMemoryServer(wd), Tau2: t2, NPMDir: npmDir, Log: zerolog.Nop()})
	if err != nil {
		return err
	}
	defer st.Close()

	genBy := fmt.Sprintf("reckon drill --seed %d --count %d --out %s", *seed, *count, *out)
	params := drill.Params{Project: *project, Seed: *seed, GeneratedBy: genBy, SweepDelay: *sweepDelay}
	if t2 != nil {
		genBy = fmt.Sprintf("reckon drill --suite tau2-retail --data DIR --seed %d --count %d --out %s", *seed, *count, *out)
		params.GeneratedBy, params.Generate = genBy, t2.Generate
	}
	if gen := npmGen[*suite]; gen != nil {
		genBy = fmt.Sprintf("reckon drill --suite %s --seed %d --count %d --out %s", *suite, *seed, *count, *out)
		params.GeneratedBy, params.Generate = genBy, gen
	}
	fmt.Fprintf(os.Stderr, "drill: %s\n", genBy)
	start := time.Now()
	res, runErr := st.GenerateSuite(ctx, params, *count, *out,
		func(p drill.Progress) {
			w := len(fmt.Sprint(p.Total))
			line := fmt.Sprintf("[%*d/%d] %-40s ", w, p.Done, p.Total, p.Scenario.RunID)
			if p.Err != nil {
				line += "FAILED " + firstLine(p.Err.Error())
			} else {
				var parts []string
				for _, f := range p.Fixtures {
					var ts []string
					for _, op := range f.Wall.Operations {
						ts = append(ts, op.OperationID+"="+f.Truth[op.OperationID])
					}
					parts = append(parts, strings.Join(ts, ","))
				}
				line += fmt.Sprintf("ok  %d wall(s) [%s]", len(p.Fixtures), strings.Join(parts, " | "))
			}
			fmt.Fprintf(os.Stderr, "%s  %.1fs\n", line, p.Took.Seconds())
		})
	fmt.Printf("drill: %d fixtures written to %s in %s (seed %d)\n", len(res.Written), *out, time.Since(start).Round(time.Second), *seed)
	names := make([]string, 0, len(res.Scenarios))
	for k := range res.Scenarios {
		names = append(names, k)
	}
	sort.Strings(names)
	for _, k := range names {
		fmt.Printf("  %-24s %d\n", k, res.Scenarios[k])
	}
	// A label disagreement is in runErr: the drill exits non-zero naming
	// the fixtures.
	return runErr
}

// drillSchema creates a fresh schema for the drill in the database of
// dbURL (creating the database when missing) and returns a URL bound to it
// and a function that drops it.
func drillSchema(ctx context.Context, dbURL string, seed uint64) (string, func(), error) {
	u, err := url.Parse(dbURL)
	if err != nil {
		return "", nil, &config.Error{Var: "DATABASE_URL", Problem: fmt.Sprintf("is not a URL: %v", err)}
	}
	pool, err := app.OpenPool(ctx, dbURL, true)
	if err != nil {
		return "", nil, err
	}
	var b [4]byte
	_, _ = rand.Read(b[:])
	name := fmt.Sprintf("drill_%d_%s", seed, hex.EncodeToString(b[:]))
	_, err = pool.Exec(ctx, "CREATE SCHEMA "+pgx.Identifier{name}.Sanitize())
	pool.Close()
	if err != nil {
		return "", nil, fmt.Errorf("create drill schema %s: %w", name, err)
	}
	q := u.Query()
	q.Set("search_path", name)
	u.RawQuery = q.Encode()
	drop := func() {
		dctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		c, err := pgx.Connect(dctx, dbURL)
		if err != nil {
			fmt.Fprintf(os.Stderr, "drill: drop schema %s: %v\n", name, err)
			return
		}
		defer c.Close(dctx)
		if _, err := c.Exec(dctx, "DROP SCHEMA "+pgx.Identifier{name}.Sanitize()+" CASCADE"); err != nil {
			fmt.Fprintf(os.Stderr, "drill: drop schema %s: %v\n", name, err)
		}
	}
	return u.String(), drop, nil
}
