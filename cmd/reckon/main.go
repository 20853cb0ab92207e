// Command reckon is the one binary: dev, demo, serve, migrate, triage, drill,
// eval, ops, runs and the test MCP server. Each subcommand lives in its own file;
// the table commands lists them all, and main only dispatches.
package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"sort"
	"syscall"
)

// command is one subcommand.
type command struct {
	summary string
	run     func(ctx context.Context, args []string) error
}

// commands is every subcommand of the binary.
var commands = map[string]command{
	"demo":            {"start the dev stack, run drills, show the listing, triage, an operator override and the eval score, exit 0", runDemo},
	"dev":             {"everything in one process on embedded defaults (creates the database, migrates)", runDev},
	"drill":           {"run seeded drill scenarios live with injected faults and record eval fixtures (walls + ground truth)", runDrill},
	"eval":            {"score a supervisor on drill fixtures (accuracy, coverage, unsafe verdicts); writes report.md, report.json, confusion.svg", runEval},
	"mcp-test-server": {"reckon's test MCP server (create_issue idempotent by _meta key; stdio, or --http ADDR)", runMCPTestServer},
	"mcp-gateway":     {"MCP server in front of RECKON_MCP_SERVERS: every tools/call of any MCP client becomes a reconcilable operation (stdio, or --http ADDR)", runMCPGateway},
	"migrate":         {"apply database migrations (safe to run twice, or from two processes)", runMigrate},
	"ops":             {"operations API client: list, attention, history, reconcile, verdicts (RECKON_URL, RECKON_TOKEN)", runOps},
	"outbox":          {"operator view of the outbox: `outbox parked` lists rows parked on a journal conflict, with the reason; `outbox retrying` rows whose delivery failed and is retried, with the last error", runOutbox},
	"runs":            {"runs API client: list, get (status, operations, child runs, events), start a run from a plan file (RECKON_URL, RECKON_TOKEN)", runRuns},
	"serve":           {"production roles (--api --worker --publisher --pipeline; default all) on external Temporal and PostgreSQL", runServe},
	"soak":            {"fault soak: kill -9 dev, worker and triage, restart a private PostgreSQL, prove nothing is lost (SOAK_ROUNDS, SOAK_TIMEOUT)", runSoak},
	"tau2-server":     {"the tau2-bench retail tools as an MCP server over a db.json (stdio; --db PATH --init DB.JSON)", runTau2Server},
	"triage":          {"run one supervisor sweep now: walls of unsettled operations → verdicts (--project P --run R --dry-run)", runTriage},
	"version":         {"print the build's version, revision and commit time (also `reckon --version`)", runVersion},
	"worker":          {"run worker only: executes runs from TEMPORAL_ADDRESS's task queue (no API, no publisher)", runWorker},
}

func usage(w io.Writer) {
	fmt.Fprintln(w, "usage: reckon <command> [flags]\n\ncommands:")
	names := make([]string, 0, len(commands))
	for n := range commands {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		fmt.Fprintf(w, "  %-16s %s\n", n, commands[n].summary)
	}
	fmt.Fprintln(w, "\n`reckon <command> --help` lists a command's flags; configuration comes from the environment; see README.md")
}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// run dispatches args and returns the exit code: 0 for success and for
// help (printed to stdout), 2 for a usage error, 1 for a failure.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		usage(stderr)
		return exitUsage
	}
	if args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		usage(stdout)
		return exitOK
	}
	if args[0] == "--version" || args[0] == "-version" {
		args = append([]string{"version"}, args[1:]...)
	}
	cmd, ok := commands[args[0]]
	if !ok {
		fmt.Fprintf(stderr, "reckon: unknown command %q\n\n", args[0])
		usage(stderr)
		return exitUsage
	}
	return report(stderr, args[0], cmd.run(ctx, args[1:]))
}
