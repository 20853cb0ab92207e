package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/seed-7bc021c3/reckon/adapter/httpapi"
	"github.com/seed-7bc021c3/reckon/kernel"
	"github.com/seed-7bc021c3/reckon/kernel/operations"
	"github.com/seed-7bc021c3/reckon/kernel/runner"
)

const runsUsage = `usage: reckon runs <list|get|start> [flags]

  list   --project P [--status running|awaiting|completed|failed] [--parent R]
         [--limit N] [--cursor C] [--all]
         (newest first; --parent lists the child runs of R)
  get    --project P --run R [--events N]
         (status, parent and child runs, every operation with its state,
         and the run's first N events: default 100, at most 1000)
  start  --project P (--plan FILE | --agent FILE) [--run R]
         (a kernel run of the plan in FILE, {"steps": [...]}, or an agent
         run of the agent in FILE, {"instructions", "input", "tools", ...}
         (docs/agents.md); exactly one of the two; the same run id and
         input again is the same run)

Every subcommand takes --json (the API's JSON instead of a table).
Environment: RECKON_URL (default ` + defaultAPIURL + `), RECKON_TOKEN (bearer token;
reader for list and get, operator for start).`

func runRuns(ctx context.Context, args []string) error {
	return runsMain(ctx, args, os.Stdout, os.Stderr, os.Getenv)
}

func runsMain(ctx context.Context, args []string, stdout, stderr io.Writer, getenv func(string) string) error {
	return clientMain(ctx, "runs", runsUsage, runsSubcommands, args, stdout, stderr, getenv)
}

// runsSubcommands maps each `reckon runs` subcommand to its function.
var runsSubcommands = map[string]func(ctx context.Context, o *opsCall, args []string) error{
	"list": runsListCmd, "get": runsGetCmd, "start": runsStartCmd,
}

// runsListCmd is `runs list`: a page of the project's runs, or every page.
func runsListCmd(ctx context.Context, o *opsCall, args []string) error {
	status := o.fs.String("status", "", "only runs of this status: running, awaiting, completed or failed")
	parent := o.fs.String("parent", "", "only the child runs of this run")
	limit := o.fs.Int("limit", 0, fmt.Sprintf("page size (default %d, at most %d)", operations.DefaultRunsLimit, operations.MaxRunsLimit))
	cursor := o.fs.String("cursor", "", "continue from an earlier page's next cursor")
	all := o.fs.Bool("all", false, "follow next_cursor through every page")
	if err := parseFlags(o.fs, args); err != nil {
		return err
	}
	if err := need(map[string]string{"--project": *o.project}); err != nil {
		return err
	}
	if *limit < 0 || *limit > operations.MaxRunsLimit {
		return usageErrorf("--limit must be between 1 and %d (leave it out for the default of %d), got %d", operations.MaxRunsLimit, operations.DefaultRunsLimit, *limit)
	}
	q := url.Values{"project": {*o.project}}
	if *status != "" {
		q.Set("status", *status)
	}
	if *parent != "" {
		q.Set("parent_run_id", *parent)
	}
	var runs []operations.RunSummary
	raws, next, err := pages(ctx, o.c, httpapi.PathRuns, q, *cursor, *limit, *all, func(raw []byte) (string, error) {
		var p operations.RunsPage // the API's null next_cursor decodes as ""
		if err := json.Unmarshal(raw, &p); err != nil {
			return "", fmt.Errorf("decode runs: %w", err)
		}
		runs = append(runs, p.Runs...)
		return p.NextCursor, nil
	})
	if err != nil {
		return err
	}
	if *o.asJSON {
		return writePages(o.stdout, raws, map[string]any{"runs": runs, "next_cursor": nil})
	}
	if err := printRuns(o.stdout, runs); err != nil {
		return err
	}
	fmt.Fprintf(o.stdout, "%d run(s)\n", len(runs))
	if next != "" {
		fmt.Fprintf(o.stdout, "more: reckon runs list --project %s --cursor %s (or --all)\n", kernel.Printable(*o.project), next)
	}
	return nil
}

// printRuns prints runs as a table, one line each.
func printRuns(w io.Writer, runs []operations.RunSummary) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "RUN\tKIND\tSTATUS\tSTARTED\tENDED\tOPERATIONS\tCHILDREN\tPARENT")
	for _, r := range runs {
		ended, parent := "-", "-"
		if r.EndedAt != nil {
			ended = r.EndedAt.UTC().Format(time.RFC3339)
		}
		if r.ParentRunID != nil {
			parent = kernel.Printable(*r.ParentRunID)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%d\t%s\n", kernel.Printable(r.RunID), kindOf(r), r.Status,
			r.StartedAt.UTC().Format(time.RFC3339), ended, opCounts(r.Operations), r.ChildRuns, parent)
	}
	return tw.Flush()
}

// kindOf is a run's kind, with its source when that is an agent's.
func kindOf(r operations.RunSummary) string {
	if r.Kind == operations.RunKindAgent {
		return r.Kind + " (" + kernel.Printable(r.SourceID) + ")"
	}
	return r.Kind
}

func opCounts(c operations.RunCounts) string {
	return fmt.Sprintf("%d (%d unresolved)", c.Total, c.Unresolved)
}

// runsGetCmd is `runs get`: one run with its operations, its child runs
// and its first events.
func runsGetCmd(ctx context.Context, o *opsCall, args []string) error {
	run := o.fs.String("run", "", "run id")
	events := o.fs.Int("events", runner.DefaultEventLimit, fmt.Sprintf("how many of the run's events to show, at most %d", runner.MaxEventLimit))
	if err := parseFlags(o.fs, args); err != nil {
		return err
	}
	if err := need(map[string]string{"--project": *o.project, "--run": *run}); err != nil {
		return err
	}
	if *events < 1 || *events > runner.MaxEventLimit {
		return usageErrorf("--events must be between 1 and %d, got %d", runner.MaxEventLimit, *events)
	}
	g, err := getRun(ctx, o.c, *o.project, *run, *events)
	if err != nil {
		return err
	}
	if *o.asJSON {
		b, err := json.Marshal(map[string]json.RawMessage{"run": g.rawRun, "operations": g.rawOps, "child_runs": g.rawChildren})
		if err != nil {
			return err
		}
		return writeRaw(o.stdout, b)
	}
	return printRun(o.stdout, g)
}

// gotRun is what `runs get` read of a run: the API's answers, raw (for
// --json) and decoded.
type gotRun struct {
	rawRun, rawOps, rawChildren json.RawMessage
	view                        struct {
		runner.RunView
		Summary *operations.RunSummary `json:"summary"`
	}
	ops      operations.RunOperationsPage
	children operations.RunsPage
}

// getRun reads a run (a page of its events), its operations (the first
// page, MaxLimit of them) and its child runs (the first MaxRunsLimit).
func getRun(ctx context.Context, c *opsClient, project, run string, events int) (gotRun, error) {
	var g gotRun
	path := "/v1/runs/" + url.PathEscape(run)
	for _, r := range []struct {
		path  string
		query url.Values
		raw   *json.RawMessage
		into  any
	}{
		{path, url.Values{"project": {project}, "limit": {fmt.Sprint(events)}}, &g.rawRun, &g.view},
		{path + "/operations", url.Values{"project": {project}, "limit": {fmt.Sprint(operations.MaxLimit)}}, &g.rawOps, &g.ops},
		{httpapi.PathRuns, url.Values{"project": {project}, "parent_run_id": {run}, "limit": {fmt.Sprint(operations.MaxRunsLimit)}}, &g.rawChildren, &g.children},
	} {
		raw, _, err := c.do(ctx, http.MethodGet, r.path, r.query, nil, nil)
		if err != nil {
			return g, err
		}
		if err := json.Unmarshal(raw, r.into); err != nil {
			return g, fmt.Errorf("decode %s?%s: %w", r.path, r.query.Encode(), err)
		}
		*r.raw = raw
	}
	return g, nil
}

// printRun prints a run: its summary, its operations, its events.
func printRun(w io.Writer, g gotRun) error {
	v := g.view
	fmt.Fprintf(w, "run         %s (project %s)\n", kernel.Printable(v.RunID), kernel.Printable(v.Project))
	fmt.Fprintf(w, "status      %s\n", v.Status)
	if s := v.Summary; s != nil {
		fmt.Fprintf(w, "kind        %s, source %s\n", s.Kind, kernel.Printable(s.SourceID))
		fmt.Fprintf(w, "started     %s\n", s.StartedAt.UTC().Format(time.RFC3339))
		if s.EndedAt != nil {
			fmt.Fprintf(w, "ended       %s\n", s.EndedAt.UTC().Format(time.RFC3339))
		}
		if s.ParentRunID != nil {
			fmt.Fprintf(w, "parent      %s\n", kernel.Printable(*s.ParentRunID))
		}
		c := s.Operations
		fmt.Fprintf(w, "operations  %d: %d unresolved, %d settled\n", c.Total, c.Unresolved, c.Settled)
	}
	for _, c := range g.children.Runs {
		fmt.Fprintf(w, "child run   %s (%s; %d operation(s), %d unresolved)\n", kernel.Printable(c.RunID), c.Status, c.Operations.Total, c.Operations.Unresolved)
	}
	if g.children.NextCursor != "" {
		fmt.Fprintf(w, "child runs  more: reckon runs list --project %s --parent %s --all\n", kernel.Printable(v.Project), kernel.Printable(v.RunID))
	}
	fmt.Fprintln(w)
	if err := printRunOperations(w, g.ops); err != nil {
		return err
	}
	fmt.Fprintln(w)
	if err := printEvents(w, v.Events); err != nil {
		return err
	}
	if v.NextCursor != nil {
		fmt.Fprintf(w, "the first %d event(s) are shown; --events shows up to %d\n", len(v.Events), runner.MaxEventLimit)
	}
	return nil
}

// printRunOperations prints a run's operations with their state.
func printRunOperations(w io.Writer, p operations.RunOperationsPage) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "OPERATION\tTOOL\tSTATE\tEFFECT\tSETTLED BY\tSTARTED\tDETAIL")
	for _, op := range p.Operations {
		effect, by := "-", "-"
		if op.SettledBy != nil {
			effect, by = op.Effect, op.SettledBy.Type
			if op.SettledBy.Basis != "" {
				by += " (" + op.SettledBy.Basis + ")"
			}
		}
		var detail []string
		if op.Failure != nil {
			detail = append(detail, fmt.Sprintf("%s effect=%s", kernel.Printable(op.Failure.ErrorType), op.Failure.EffectiveEffect()))
		}
		if op.ChildRunID != "" {
			detail = append(detail, "child "+kernel.Printable(op.ChildRunID))
		}
		state := op.State
		if op.LivenessUnknown {
			state += " (liveness?)"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", kernel.Printable(op.OperationID), kernel.Printable(op.Tool), state, effect, by,
			op.StartedAt.UTC().Format(time.RFC3339), strings.Join(detail, "; "))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintf(w, "%d operation(s)\n", len(p.Operations))
	if p.NextCursor != "" {
		fmt.Fprintf(w, "only the first %d operations are shown\n", len(p.Operations))
	}
	return nil
}

// runsStartCmd is `runs start`: a kernel run of the plan, or the agent,
// in a file (exactly one of --plan and --agent).
func runsStartCmd(ctx context.Context, o *opsCall, args []string) error {
	planFile := o.fs.String("plan", "", `file holding the plan: {"steps": [{"tool": ..., "args": {...}}, ...]}`)
	agentFile := o.fs.String("agent", "", `file holding the agent: {"instructions": ..., "input": ..., "tools": [...]} (docs/agents.md)`)
	run := o.fs.String("run", "", "run id (default: the server picks one)")
	if err := parseFlags(o.fs, args); err != nil {
		return err
	}
	if err := need(map[string]string{"--project": *o.project}); err != nil {
		return err
	}
	field, file, err := startInput(*planFile, *agentFile)
	if err != nil {
		return err
	}
	body := map[string]any{"project": *o.project, field: file}
	if *run != "" {
		body["run_id"] = *run
	}
	raw, _, status, err := o.c.send(ctx, http.MethodPost, httpapi.PathRuns, nil, body, nil)
	if err != nil {
		return err
	}
	if *o.asJSON {
		return writeRaw(o.stdout, raw)
	}
	var started struct {
		RunID string `json:"run_id"`
	}
	if err := json.Unmarshal(raw, &started); err != nil {
		return fmt.Errorf("decode start answer: %w", err)
	}
	id, project := kernel.Printable(started.RunID), kernel.Printable(*o.project)
	if status == http.StatusOK {
		fmt.Fprintf(o.stdout, "run %s of project %s already exists with this %s: nothing new was started\n", id, project, field)
	} else {
		fmt.Fprintf(o.stdout, "started run %s in project %s\n", id, project)
	}
	fmt.Fprintf(o.stdout, "follow it: reckon runs get --project %s --run %s\n", project, id)
	return nil
}

// startInput reads the run's input for `runs start`: the field of the
// request it goes in (plan or agent) and the file's JSON. Exactly one of
// planFile and agentFile must be given.
func startInput(planFile, agentFile string) (string, json.RawMessage, error) {
	hasPlan, hasAgent := strings.TrimSpace(planFile) != "", strings.TrimSpace(agentFile) != ""
	switch {
	case hasPlan && hasAgent:
		return "", nil, usageErrorf("--plan and --agent: give exactly one (a run carries a plan or an agent, not both)")
	case !hasPlan && !hasAgent:
		return "", nil, usageErrorf("missing --plan or --agent: give exactly one (a plan file, or an agent file: docs/agents.md)")
	}
	field, flag, path, shape := "plan", "--plan", planFile, `{"steps": [{"tool": "run_command", "args": {"command": "..."}}]}`
	if hasAgent {
		field, flag, path, shape = "agent", "--agent", agentFile, `{"instructions": "...", "input": "...", "tools": ["run_command"]}`
	}
	raw, err := os.ReadFile(path)
	if err != nil {
		return "", nil, fmt.Errorf("%s: %w", flag, err)
	}
	if !json.Valid(raw) {
		return "", nil, usageErrorf("%s %s is not JSON; %s is %s", flag, path, map[string]string{"plan": "a plan", "agent": "an agent"}[field], shape)
	}
	return field, raw, nil
}
