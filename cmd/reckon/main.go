// Command reckon is the one binary: dev, demo, serve, migrate, triage, drill,
// eval, ops and the test MCP server. Each subcommand lives in its own file;
// the table commands lists them all, and main only dispatches.
package main

import (
	"context"
	"fmt"
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
	"outbox":          {"operator view of the outbox: `outbox parked` lists rows parked on a journal conflict, with the reason", runOutbox},
	"serve":           {"production roles (--api --worker --publisher --pipeline; default all) on external Temporal and PostgreSQL", runServe},
	"soak":            {"fault soak: kill -9 dev, worker and triage, restart a private PostgreSQL, prove nothing is lost (SOAK_ROUNDS, SOAK_TIMEOUT)", runSoak},
	"triage":          {"run one supervisor sweep now: walls of unsettled operations → verdicts (--project P --run R --dry-run)", runTriage},
	"worker":          {"run worker only: executes runs from TEMPORAL_ADDRESS's task queue (no API, no publisher)", runWorker},
}

func usage() {
	fmt.Fprintln(os.Stderr, "usage: reckon <command> [flags]\n\ncommands:")
	names := make([]string, 0, len(commands))
	for n := range commands {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		fmt.Fprintf(os.Stderr, "  %-16s %s\n", n, commands[n].summary)
	}
	fmt.Fprintln(os.Stderr, "\nconfiguration comes from the environment; see README.md")
}

func main() {
	if len(os.Args) < 2 || os.Args[1] == "-h" || os.Args[1] == "--help" || os.Args[1] == "help" {
		usage()
		os.Exit(2)
	}
	cmd, ok := commands[os.Args[1]]
	if !ok {
		fmt.Fprintf(os.Stderr, "reckon: unknown command %q\n\n", os.Args[1])
		usage()
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := cmd.run(ctx, os.Args[2:]); err != nil {
		fmt.Fprintf(os.Stderr, "reckon %s: %v\n", os.Args[1], err)
		os.Exit(1)
	}
}
