package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"go.temporal.io/sdk/client"

	"github.com/seed-7bc021c3/reckon/adapter/httpapi"
	"github.com/seed-7bc021c3/reckon/kernel"
	"github.com/seed-7bc021c3/reckon/kernel/outbox"
	"github.com/seed-7bc021c3/reckon/pipeline/triage"
	"github.com/seed-7bc021c3/reckon/platform/temporalx"
)

func runTriage(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("triage", flag.ContinueOnError)
	project := fs.String("project", "", "only this project (default: every project with unsettled operations)")
	run := fs.String("run", "", "only this run (needs --project)")
	dry := fs.Bool("dry-run", false, "build and decide walls, print them, write nothing (the supervisor is still called)")
	publish := fs.Bool("publish", true, "deliver the sweep's events from the outbox to the journal before exiting")
	jsonOut := fs.Bool("json", false, "print the sweep report as JSON instead of verdict cards")
	maxWalls := fs.Int("max-walls", 1000, "per-sweep budget: walls decided at most; the rest wait for the next sweep")
	maxTokens := fs.Int("max-tokens", 0, "per-sweep budget: model tokens (prompt+completion) at most; 0 = unbounded")
	concurrency := fs.Int("concurrency", 8, "runs triaged (and model calls in flight) at once")
	viaAPI := fs.Bool("api", false, "ask the API (RECKON_URL, operator RECKON_TOKEN) to run the sweep (POST /v1/triage) instead of running it here")
	s, err := prologue(fs, args)
	if err != nil {
		return err
	}
	if *run != "" && *project == "" {
		return usageErrorf("--run needs --project")
	}
	if *viaAPI {
		if err := onlyFlags(fs, "api", "project", "run", "json"); err != nil {
			return err
		}
		return asJSON(triageViaAPI(ctx, apiClient(os.Getenv, httpapi.WriteTimeout), os.Stdout, *project, *run, *jsonOut), *jsonOut)
	}
	if *maxWalls < 1 || *concurrency < 1 || *maxTokens < 0 {
		return usageErrorf("--max-walls and --concurrency must be at least 1, --max-tokens at least 0")
	}
	if err := s.openCore(ctx); err != nil {
		return err
	}
	defer s.close()
	cfg, core := s.cfg, s.core
	// A sweep that cannot see the workers' workspaces or the MCP servers
	// would find no evidence where there is some: refuse before deciding.
	if err := core.CheckProbes(ctx); err != nil {
		return err
	}

	// Run liveness: Temporal for the kernel's own runs when a cluster is
	// configured; otherwise the journal says which runs are over.
	var tc client.Client
	if cfg.TemporalAddress != "" {
		if tc, err = temporalx.Dial(ctx, cfg.TemporalAddress, cfg.TemporalNamespace, core.Log); err != nil {
			return err
		}
		defer tc.Close()
	}
	sw, err := core.NewSweeper(core.OperationsService(tc), func(c *triage.Config) {
		c.MaxWalls, c.MaxTokens, c.Concurrency = *maxWalls, *maxTokens, *concurrency
	})
	if err != nil {
		return err
	}
	rep, err := sw.Sweep(ctx, triage.SweepParams{Project: *project, RunID: *run, DryRun: *dry})
	if err != nil {
		return err
	}
	if *publish && !*dry && rep.Journaled > 0 {
		pctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
		err := publishVerdicts(pctx, core.NewPublisher(outbox.Config{}), core.Pool, rep)
		cancel()
		if err != nil {
			return fmt.Errorf("publish verdicts: %w (they stay in the outbox for the next publisher)", err)
		}
	}
	if *jsonOut {
		if err := writeJSON(os.Stdout, rep, "", "  "); err != nil {
			return err
		}
	} else {
		printReport(os.Stdout, rep)
	}
	if rep.Failed > 0 {
		return fmt.Errorf("%d wall(s) failed and stay unsettled; see the log lines above", rep.Failed)
	}
	return nil
}

// onlyFlags refuses any flag set on fs but those named: the others tune a
// sweep this process runs, not one it asks the API for.
func onlyFlags(fs *flag.FlagSet, allowed ...string) error {
	var bad []string
	fs.Visit(func(f *flag.Flag) {
		if !slices.Contains(allowed, f.Name) {
			bad = append(bad, "--"+f.Name)
		}
	})
	if len(bad) > 0 {
		return usageErrorf("%s: not with --api (the API's sweep runs on the server's configuration)", strings.Join(bad, ", "))
	}
	return nil
}

// triageViaAPI asks the API for a sweep of the scope (POST /v1/triage;
// the client waits as long as the API's own bound, httpapi.WriteTimeout)
// and prints what it did: a line per wall, per settled operation and per
// operation left for a person, or the API's JSON.
func triageViaAPI(ctx context.Context, c *opsClient, out io.Writer, project, run string, raw bool) error {
	body, _, err := c.do(ctx, http.MethodPost, httpapi.PathTriage, nil, httpapi.TriageRequest{Project: project, RunID: run}, nil)
	if err != nil {
		return err
	}
	if raw {
		return writeRaw(out, body)
	}
	var ans httpapi.TriageAnswer
	if err := json.Unmarshal(body, &ans); err != nil {
		return fmt.Errorf("decode triage answer: %w", err)
	}
	failed := 0
	for _, w := range ans.Walls {
		fmt.Fprintf(out, "wall %s/%s: %s", kernel.Printable(w.Project), kernel.Printable(w.RunID), w.Outcome)
		if len(w.Operations) > 0 {
			fmt.Fprintf(out, " (%s)", kernel.Printable(strings.Join(w.Operations, ", ")))
		}
		if w.Outcome == triage.OutcomeFailed {
			failed++
		}
		// An unavailable wall's error says which evidence a probe could
		// not reach; it is left for a later sweep, not failed.
		if w.Error != "" {
			fmt.Fprintf(out, ": %s", oneLine(w.Error, 4000))
		}
		fmt.Fprintln(out)
	}
	for _, o := range ans.Settled {
		fmt.Fprintf(out, "settled   %s/%s/%s %s (%s) %s\n", kernel.Printable(o.Project), kernel.Printable(o.RunID), kernel.Printable(o.OperationID), o.Effect, o.Basis, kernel.Printable(o.Reconciliation.String()))
	}
	for _, o := range ans.Attention {
		fmt.Fprintf(out, "attention %s/%s/%s %s (%s) %s\n", kernel.Printable(o.Project), kernel.Printable(o.RunID), kernel.Printable(o.OperationID), o.Effect, o.Basis, kernel.Printable(o.Reconciliation.String()))
	}
	fmt.Fprintf(out, "triage (API): %d wall(s), %d settled, %d for a person\n", len(ans.Walls), len(ans.Settled), len(ans.Attention))
	if failed > 0 {
		return fmt.Errorf("%d wall(s) failed and stay unsettled", failed)
	}
	return nil
}

// printReport writes the sweep's cards and lines for a person. Notes and
// errors carry a supervisor's text (a model's note or refusal, which may
// repeat what an agent wrote) and ids an agent chose: each is kept on one
// line and quoted when it holds a control character, so no escape
// sequence reaches the operator's terminal (as RenderCard and oneLine do).
func printReport(out io.Writer, rep triage.Report) {
	for _, w := range rep.Walls {
		switch {
		case w.Verdict != nil:
			_ = triage.RenderCard(out, *w.Verdict, w.Reconciled)
		case w.Outcome == triage.OutcomeDryRun && w.Decision != nil:
			fmt.Fprintf(out, "dry run %s/%s part %d/%d: %d operations, needs_attention=%v\n", kernel.Printable(w.Project), kernel.Printable(w.RunID), w.Part, w.Parts, len(w.Operations), w.Decision.NeedsAttention)
			for _, v := range w.Decision.Operations {
				fmt.Fprintf(out, "  %-16s %-9s %-10s %s\n", kernel.Printable(v.OperationID), v.Effect, v.Basis, oneLine(v.Note, kernel.MaxNoteBytes+1))
			}
		case w.Outcome == triage.OutcomeFailed:
			fmt.Fprintf(out, "FAILED %s/%s: %s\n", kernel.Printable(w.Project), kernel.Printable(w.RunID), oneLine(w.Error, 4000))
		case w.Outcome == triage.OutcomeDeferred:
			fmt.Fprintf(out, "deferred %s/%s: %s — a probe can tell only later; a later sweep takes them\n", kernel.Printable(w.Project), kernel.Printable(w.RunID), kernel.Printable(strings.Join(w.Operations, ", ")))
		case w.Outcome == triage.OutcomeUnavailable:
			fmt.Fprintf(out, "UNAVAILABLE %s/%s: %s — %s\n", kernel.Printable(w.Project), kernel.Printable(w.RunID), kernel.Printable(strings.Join(w.Operations, ", ")), oneLine(w.Error, 4000))
		}
	}
	fmt.Fprintf(out, "triage: %d project(s), %d run(s), %d journaled, %d failed, %d locked by another sweep, %d left for the next sweep (budget), %d run(s) with operations deferred, %d operation(s) whose evidence a probe could not reach, %s\n",
		rep.Projects, rep.Runs, rep.Journaled, rep.Failed, rep.Count(triage.OutcomeLocked), rep.Count(triage.OutcomeBudget), rep.Count(triage.OutcomeDeferred), rep.Unavailable, rep.Duration.Round(time.Millisecond))
}

// publishVerdicts delivers the sweep's events to the journal and returns
// once the runs it journaled walls of have nothing left in the outbox.
// One Drain is not enough: it stops at its first empty claim, and rows
// another publisher (a gateway's, a server's) holds are skipped, not
// waited for, so that publisher may still be delivering them when Drain
// returns. It drains again until nothing is pending, so rows of a
// publisher that died mid-delivery are delivered here too
// (TestMCPGatewaySIGKILLMidCall).
func publishVerdicts(ctx context.Context, p *outbox.Publisher, pool *pgxpool.Pool, rep triage.Report) error {
	var runs []kernel.RunKey
	seen := map[kernel.RunKey]bool{}
	for _, w := range rep.Walls {
		k := kernel.RunKey{Project: w.Project, RunID: w.RunID}
		if w.Outcome == triage.OutcomeJournaled && !seen[k] {
			seen[k] = true
			runs = append(runs, k)
		}
	}
	for {
		if err := p.Drain(ctx); err != nil {
			return err
		}
		left, err := outbox.PendingCount(ctx, pool, runs...)
		if err != nil {
			return err
		}
		if left == 0 {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%d events of the triaged runs not yet delivered: %w", left, ctx.Err())
		case <-time.After(50 * time.Millisecond):
		}
	}
}
