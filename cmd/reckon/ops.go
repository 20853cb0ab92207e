package main

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
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
)

// defaultAPIURL is the API the client talks to without RECKON_URL.
const defaultAPIURL = "http://127.0.0.1:8080"

const opsUsage = `usage: reckon ops <list|attention|history|reconcile|verdicts|guard> [flags]

  list       --project P [--run R] [--limit N] [--cursor C] [--all]
  attention  --project P [--run R] [--limit N] [--cursor C] [--all]
             (what the supervisor left for a person and no operator has decided since)
  history    --project P --run R --op O
  reconcile  --project P --run R --op O --effect none|occurred|unknown --note TEXT
             [--evidence JSON|@file] [--idempotency-key K]
  verdicts   --project P [--run R] [--since RFC3339|DURATION] [--limit N]
             (--since 24h: the last 24 hours)
  guard      --project P --tool T [--args JSON|@file] [--run R] [--scope project|run]
             (may this call run? proceed, hold while an identical call is
             unsettled, done when one was settled occurred)

Every subcommand takes --json (the API's JSON instead of a table).
Environment: RECKON_URL (default ` + defaultAPIURL + `), RECKON_TOKEN (bearer token;
reader for list/attention/history/verdicts, operator for reconcile, agent or
operator for guard).`

func runOps(ctx context.Context, args []string) error {
	return opsMain(ctx, args, os.Stdout, os.Stderr, os.Getenv)
}

// opsClient talks to the API.
type opsClient struct {
	base, token string
	http        *http.Client
}

// apiError is a non-2xx answer of the API.
type apiError struct {
	Status  int
	Message string
}

func (e *apiError) Error() string { return fmt.Sprintf("API answered %d: %s", e.Status, e.Message) }

// do sends a request and returns the response body of a 2xx answer.
func (c *opsClient) do(ctx context.Context, method, path string, q url.Values, body any, hdr map[string]string) ([]byte, http.Header, error) {
	raw, h, _, err := c.send(ctx, method, path, q, body, hdr)
	return raw, h, err
}

// send is do that also returns the answer's status.
func (c *opsClient) send(ctx context.Context, method, path string, q url.Values, body any, hdr map[string]string) ([]byte, http.Header, int, error) {
	u := c.base + path
	if len(q) > 0 {
		u += "?" + q.Encode()
	}
	var rd io.Reader
	if body != nil {
		raw, err := json.Marshal(body)
		if err != nil {
			return nil, nil, 0, err
		}
		rd = bytes.NewReader(raw)
	}
	req, err := http.NewRequestWithContext(ctx, method, u, rd)
	if err != nil {
		return nil, nil, 0, err
	}
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return nil, nil, 0, fmt.Errorf("%s %s: %w (is the API running? set RECKON_URL)", method, u, err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if err != nil {
		return nil, nil, 0, fmt.Errorf("read response of %s %s: %w", method, path, err)
	}
	if resp.StatusCode/100 != 2 {
		var e struct {
			Error string `json:"error"`
		}
		if json.Unmarshal(raw, &e) != nil || e.Error == "" {
			e.Error = strings.TrimSpace(string(raw))
		}
		if resp.StatusCode == http.StatusUnauthorized && c.token == "" {
			e.Error += " (set RECKON_TOKEN)"
		}
		return nil, nil, resp.StatusCode, &apiError{Status: resp.StatusCode, Message: e.Error}
	}
	return raw, resp.Header, resp.StatusCode, nil
}

func opsMain(ctx context.Context, args []string, stdout, stderr io.Writer, getenv func(string) string) error {
	return clientMain(ctx, "ops", opsUsage, opsSubcommands, args, stdout, stderr, getenv)
}

// clientMain runs one subcommand of an API client command (`reckon ops`,
// `reckon runs`): usage and help, the API client of RECKON_URL and
// RECKON_TOKEN, the flags every subcommand has (--json, --project), and
// errors as JSON under --json.
func clientMain(ctx context.Context, cmd, usage string, subs map[string]func(context.Context, *opsCall, []string) error,
	args []string, stdout, stderr io.Writer, getenv func(string) string) error {
	if len(args) == 0 {
		fmt.Fprintln(stderr, usage)
		return usageErrorf("missing subcommand")
	}
	if args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		fmt.Fprintln(stdout, usage)
		return flag.ErrHelp
	}
	sub, ok := subs[args[0]]
	if !ok {
		fmt.Fprintln(stderr, usage)
		return usageErrorf("unknown subcommand %q", args[0])
	}
	o := &opsCall{
		name:   args[0],
		c:      apiClient(getenv, 60*time.Second),
		fs:     flag.NewFlagSet(cmd+" "+args[0], flag.ContinueOnError),
		stdout: stdout, stderr: stderr,
	}
	o.fs.SetOutput(stdout) // where -h prints the flags
	o.asJSON = o.fs.Bool("json", false, "print the API's JSON instead of a table (and errors as JSON)")
	o.project = o.fs.String("project", "", "project")
	err := sub(ctx, o, args[1:])
	return asJSON(err, *o.asJSON)
}

// apiClient is the API client of RECKON_URL (default defaultAPIURL) with
// the bearer token RECKON_TOKEN, giving up on a call after timeout.
func apiClient(getenv func(string) string, timeout time.Duration) *opsClient {
	base := strings.TrimRight(getenv("RECKON_URL"), "/")
	if base == "" {
		base = defaultAPIURL
	}
	return &opsClient{base: base, token: getenv("RECKON_TOKEN"), http: &http.Client{Timeout: timeout}}
}

// opsCall is one `reckon ops` or `reckon runs` subcommand call: the API
// client, its flag set with the flags every subcommand has, and where it
// prints.
type opsCall struct {
	name           string
	c              *opsClient
	fs             *flag.FlagSet
	asJSON         *bool
	project        *string
	stdout, stderr io.Writer
}

// printOrDecode is a subcommand's answer raw: printed as the API wrote it
// with --json (printed is true: the command is done), else decoded into
// v, a decode error naming what.
func (o *opsCall) printOrDecode(raw []byte, v any, what string) (printed bool, err error) {
	if *o.asJSON {
		return true, writeRaw(o.stdout, raw)
	}
	if err := json.Unmarshal(raw, v); err != nil {
		return false, fmt.Errorf("decode %s: %w", what, err)
	}
	return false, nil
}

// opsSubcommands maps each `reckon ops` subcommand to its function.
var opsSubcommands = map[string]func(ctx context.Context, o *opsCall, args []string) error{
	"list": opsListCmd, "attention": opsListCmd,
	"history": opsHistoryCmd, "reconcile": opsReconcileCmd, "verdicts": opsVerdictsCmd,
	"guard": opsGuardCmd,
}

// opsListCmd is `ops list` and `ops attention`: a page of the listing or
// the operator's queue, or every page.
func opsListCmd(ctx context.Context, o *opsCall, args []string) error {
	run := o.fs.String("run", "", "only this run")
	limit := o.fs.Int("limit", 0, "page size (default 100, at most 1000)")
	cursor := o.fs.String("cursor", "", "continue from an earlier page's next cursor")
	all := o.fs.Bool("all", false, "follow next_cursor through every page")
	if err := parseFlags(o.fs, args); err != nil {
		return err
	}
	if err := need(map[string]string{"--project": *o.project}); err != nil {
		return err
	}
	if err := checkLimit(*limit, operations.MaxLimit); err != nil {
		return err
	}
	if o.name == "attention" {
		return opsAttention(ctx, o.c, o.stdout, *o.project, *run, *cursor, *limit, *all, *o.asJSON)
	}
	return opsList(ctx, o.c, o.stdout, o.stderr, *o.project, *run, *cursor, *limit, *all, *o.asJSON)
}

// opsHistoryCmd is `ops history`: an operation's events in order.
func opsHistoryCmd(ctx context.Context, o *opsCall, args []string) error {
	run := o.fs.String("run", "", "run id")
	op := o.fs.String("op", "", "operation id")
	if err := parseFlags(o.fs, args); err != nil {
		return err
	}
	if err := need(map[string]string{"--project": *o.project, "--run": *run, "--op": *op}); err != nil {
		return err
	}
	raw, _, err := o.c.do(ctx, http.MethodGet, httpapi.PathHistory,
		url.Values{"project": {*o.project}, "run_id": {*run}, "operation_id": {*op}}, nil, nil)
	if err != nil {
		return err
	}
	var h struct {
		Events []kernel.Event `json:"events"`
	}
	if printed, err := o.printOrDecode(raw, &h, "history"); printed || err != nil {
		return err
	}
	return printEvents(o.stdout, h.Events)
}

// opsReconcileCmd is `ops reconcile`: an operator's ruling.
func opsReconcileCmd(ctx context.Context, o *opsCall, args []string) error {
	run := o.fs.String("run", "", "run id")
	op := o.fs.String("op", "", "operation id")
	effect := o.fs.String("effect", "", "none, occurred or unknown")
	note := o.fs.String("note", "", "why (at most 2000 bytes)")
	evidence := o.fs.String("evidence", "", "JSON evidence, or @file to read it from a file")
	key := o.fs.String("idempotency-key", "", "makes a retry of this command return the first verdict")
	if err := parseFlags(o.fs, args); err != nil {
		return err
	}
	if err := need(map[string]string{"--project": *o.project, "--run": *run, "--op": *op, "--effect": *effect, "--note": *note}); err != nil {
		return err
	}
	body := map[string]any{"project": *o.project, "run_id": *run, "operation_id": *op, "effect": *effect, "note": *note}
	if *evidence != "" {
		ev, err := jsonFlag("--evidence", *evidence, `{"workspace_file": "proof.txt"}`)
		if err != nil {
			return err
		}
		body["evidence"] = ev
	}
	hdr := map[string]string{}
	if *key != "" {
		hdr[httpapi.IdempotencyKeyHeader] = *key
	}
	raw, h, err := o.c.do(ctx, http.MethodPost, httpapi.PathReconcile, nil, body, hdr)
	if err != nil {
		return err
	}
	var ev kernel.Event
	if printed, err := o.printOrDecode(raw, &ev, "reconcile answer"); printed || err != nil {
		return err
	}
	var d kernel.Reconciliation
	_ = ev.DecodeData(&d)
	verb := "recorded"
	if h.Get(httpapi.ReplayedHeader) == "true" {
		verb = "already recorded"
	}
	fmt.Fprintf(o.stdout, "%s %s: %s/%s effect=%s basis=%s actor=%s\n", verb, ev.Key(), ev.RunID, d.OperationID, d.Effect, d.Basis, ev.Actor)
	if d.Supersedes != nil {
		fmt.Fprintf(o.stdout, "supersedes %s\n", d.Supersedes)
	}
	return nil
}

// jsonFlag reads a flag's JSON: the value itself, or @file to read it
// from a file; example shows the JSON expected.
func jsonFlag(name, v, example string) (json.RawMessage, error) {
	raw := []byte(v)
	if path, ok := strings.CutPrefix(v, "@"); ok {
		b, err := os.ReadFile(path)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", name, err)
		}
		raw = b
	}
	if !json.Valid(raw) {
		return nil, usageErrorf("%s must be JSON (e.g. '%s') or @file", name, example)
	}
	return raw, nil
}

// opsGuardCmd is `ops guard`: the retry guard's answer for a call.
func opsGuardCmd(ctx context.Context, o *opsCall, args []string) error {
	run := o.fs.String("run", "", "the run asking (required with --scope run)")
	tool := o.fs.String("tool", "", "the tool's name as its tool.started records it")
	callArgs := o.fs.String("args", "{}", "the call's arguments as JSON, or @file")
	scope := o.fs.String("scope", "", "project (default) or run: where identical calls are looked for")
	if err := parseFlags(o.fs, args); err != nil {
		return err
	}
	if err := need(map[string]string{"--project": *o.project, "--tool": *tool}); err != nil {
		return err
	}
	a, err := jsonFlag("--args", *callArgs, `{"order": "5521"}`)
	if err != nil {
		return err
	}
	body := operations.GuardParams{Project: *o.project, RunID: *run, Tool: *tool, Args: a, Scope: *scope}
	raw, _, err := o.c.do(ctx, http.MethodPost, httpapi.PathGuard, nil, body, nil)
	if err != nil {
		return err
	}
	var ans operations.GuardAnswer
	if printed, err := o.printOrDecode(raw, &ans, "guard answer"); printed || err != nil {
		return err
	}
	fmt.Fprintln(o.stdout, guardLine(ans))
	return nil
}

// guardLine is a guard answer in one line.
func guardLine(a operations.GuardAnswer) string {
	if a.Operation == nil {
		return a.Decision + ": no identical call stands in the way"
	}
	line := fmt.Sprintf("%s: operation %s of run %s (%s, started %s)", a.Decision, a.Operation.OperationID,
		a.Operation.RunID, a.Operation.State, a.Operation.StartedAt.Format(time.RFC3339))
	if a.Reconciliation != nil {
		var d kernel.Reconciliation
		_ = a.Reconciliation.DecodeData(&d)
		line += fmt.Sprintf(" settled occurred by %s, basis %s: %s", a.Reconciliation.Actor, orDash(d.Basis), orDash(d.Note))
	}
	return line
}

// opsVerdictsCmd is `ops verdicts`: the supervisor's verdicts and what
// operators have ruled since.
func opsVerdictsCmd(ctx context.Context, o *opsCall, args []string) error {
	run := o.fs.String("run", "", "only this run")
	since := o.fs.String("since", "", "only verdicts at or after this time: RFC 3339, or a Go duration back from now (24h)")
	limit := o.fs.Int("limit", 0, "at most this many, newest first (default 100, at most 1000)")
	if err := parseFlags(o.fs, args); err != nil {
		return err
	}
	if err := need(map[string]string{"--project": *o.project}); err != nil {
		return err
	}
	if err := checkLimit(*limit, operations.MaxVerdictLimit); err != nil {
		return err
	}
	q := url.Values{"project": {*o.project}}
	if *run != "" {
		q.Set("run_id", *run)
	}
	if *since != "" {
		t, err := parseSince(*since, time.Now())
		if err != nil {
			return &usageError{err: err}
		}
		q.Set("since", t.UTC().Format(time.RFC3339))
	}
	if *limit != 0 {
		q.Set("limit", fmt.Sprint(*limit))
	}
	raw, _, err := o.c.do(ctx, http.MethodGet, httpapi.PathVerdicts, q, nil, nil)
	if err != nil {
		return err
	}
	var v struct {
		Verdicts    []kernel.Event          `json:"verdicts"`
		Resolutions []operations.Resolution `json:"resolutions"`
	}
	if printed, err := o.printOrDecode(raw, &v, "verdicts"); printed || err != nil {
		return err
	}
	return printVerdicts(o.stdout, v.Verdicts, v.Resolutions)
}

func need(flags map[string]string) error {
	var missing []string
	for _, name := range []string{"--project", "--run", "--op", "--effect", "--note"} {
		if v, ok := flags[name]; ok && strings.TrimSpace(v) == "" {
			missing = append(missing, name)
		}
	}
	if len(missing) > 0 {
		return usageErrorf("missing %s", strings.Join(missing, ", "))
	}
	return nil
}

// checkLimit refuses a --limit outside [0, max] (0: the API's default) as
// a usage error, never dropped without a word.
func checkLimit(limit, max int) error {
	if limit < 0 || limit > max {
		return usageErrorf("--limit must be between 1 and %d (leave it out for the default of %d), got %d", max, operations.DefaultLimit, limit)
	}
	return nil
}

// pages GETs path page by page (following next_cursor when all is set)
// and hands each raw page to add, which decodes it and returns its
// next_cursor. It returns the raw pages and the cursor left over.
func pages(ctx context.Context, c *opsClient, path string, q url.Values, cursor string, limit int, all bool,
	add func(raw []byte) (next string, err error)) ([]json.RawMessage, string, error) {
	var raws []json.RawMessage
	for {
		if cursor != "" {
			q.Set("cursor", cursor)
		}
		if limit > 0 {
			q.Set("limit", fmt.Sprint(limit))
		}
		raw, _, err := c.do(ctx, http.MethodGet, path, q, nil, nil)
		if err != nil {
			return nil, "", err
		}
		if cursor, err = add(raw); err != nil {
			return nil, "", err
		}
		raws = append(raws, raw)
		if !all || cursor == "" {
			return raws, cursor, nil
		}
	}
}

// writePages writes the API's JSON: the one page as it came, or every
// page's operations merged into one answer without a cursor.
func writePages(w io.Writer, raws []json.RawMessage, merged map[string]any) error {
	if len(raws) == 1 {
		return writeRaw(w, raws[0])
	}
	b, err := json.Marshal(merged)
	if err != nil {
		return err
	}
	return writeRaw(w, b)
}

// projectQuery is the query of a project's (or one run's) list.
func projectQuery(project, run string) url.Values {
	q := url.Values{"project": {project}}
	if run != "" {
		q.Set("run_id", run)
	}
	return q
}

func opsList(ctx context.Context, c *opsClient, stdout, stderr io.Writer, project, run, cursor string, limit int, all, asJSON bool) error {
	var items []operations.Item
	degraded := false
	raws, cursor, err := pages(ctx, c, httpapi.PathOperations, projectQuery(project, run), cursor, limit, all, func(raw []byte) (string, error) {
		var p operations.Page // the API's null next_cursor decodes as ""
		if err := json.Unmarshal(raw, &p); err != nil {
			return "", fmt.Errorf("decode listing: %w", err)
		}
		items = append(items, p.Operations...)
		degraded = degraded || p.Degraded
		return p.NextCursor, nil
	})
	if err != nil {
		return err
	}
	if asJSON {
		return writePages(stdout, raws, map[string]any{"operations": items, "next_cursor": nil, "degraded": degraded})
	}
	if degraded {
		fmt.Fprintln(stderr, "warning: degraded listing: the liveness of some runs could not be established (is Temporal reachable?); their operations are marked (liveness?) and treated as still running")
	}
	tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "RUN\tOPERATION\tTOOL\tSTATE\tSTARTED\tDETAIL")
	for _, it := range items {
		var detail []string
		if it.Failure != nil {
			detail = append(detail, fmt.Sprintf("%s effect=%s", kernel.Printable(it.Failure.ErrorType), it.Failure.EffectiveEffect()))
		}
		if it.ChildRunID != "" {
			s := "child " + kernel.Printable(it.ChildRunID)
			if c := it.ChildSummary; c != nil {
				s += fmt.Sprintf(" (%d ops, %d unresolved)", c.Total, c.Unresolved)
			}
			detail = append(detail, s)
		}
		if it.ReissueOf != "" {
			detail = append(detail, "reissue of "+kernel.Printable(it.ReissueOf))
		}
		state := it.State
		if it.LivenessUnknown {
			state += " (liveness?)"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", kernel.Printable(it.RunID), kernel.Printable(it.OperationID), kernel.Printable(it.Tool), state,
			it.StartedAt.UTC().Format(time.RFC3339), strings.Join(detail, "; "))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "%d unresolved operation(s)\n", len(items))
	if cursor != "" {
		fmt.Fprintf(stdout, "more: reckon ops list --project %s --cursor %s (or --all)\n", project, cursor)
	}
	return nil
}

func printEvents(w io.Writer, evs []kernel.Event) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "TS\tTYPE\tSOURCE\tACTOR\tDETAIL")
	for _, ev := range evs {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", ev.TS.UTC().Format(time.RFC3339), kernel.Printable(ev.Type), kernel.Printable(ev.SourceID), kernel.Printable(ev.Actor), eventDetail(ev))
	}
	return tw.Flush()
}

func eventDetail(ev kernel.Event) string {
	switch ev.Type {
	case kernel.TypeToolStarted:
		var d kernel.ToolStarted
		_ = ev.DecodeData(&d)
		return "tool=" + kernel.Printable(d.Tool) + " args=" + oneLine(string(d.Args), 80)
	case kernel.TypeToolFailed:
		var d kernel.ToolFailed
		_ = ev.DecodeData(&d)
		return fmt.Sprintf("%s effect=%s: %s", kernel.Printable(d.ErrorType), kernel.Printable(d.EffectiveEffect()), oneLine(d.Error, 80))
	case kernel.TypeToolBlocked:
		var d kernel.ToolBlocked
		_ = ev.DecodeData(&d)
		return "reason: " + oneLine(d.Reason, 80)
	case kernel.TypeOperationReconciled:
		var d kernel.Reconciliation
		_ = ev.DecodeData(&d)
		s := fmt.Sprintf("effect=%s basis=%s note=%q", d.Effect, d.Basis, oneLine(d.Note, 80))
		if d.Supersedes != nil {
			s += " supersedes " + d.Supersedes.String()
		}
		if len(d.Evidence) > 0 {
			s += " evidence=" + oneLine(string(d.Evidence), 80)
		}
		return s
	case kernel.TypeSupervisorVerdict:
		var d kernel.Verdict
		_ = ev.DecodeData(&d)
		return fmt.Sprintf("supervisor=%s needs_attention=%v lesson=%q", d.Supervisor, d.NeedsAttention, oneLine(d.Lesson, 80))
	}
	return oneLine(string(ev.Data), 100)
}

// parseSince reads --since: an RFC 3339 time, or a Go duration back from
// now.
func parseSince(v string, now time.Time) (time.Time, error) {
	if t, err := time.Parse(time.RFC3339, v); err == nil {
		return t, nil
	}
	if d, err := time.ParseDuration(v); err == nil && d >= 0 {
		return now.Add(-d), nil
	}
	return time.Time{}, fmt.Errorf("--since must be an RFC 3339 time (2026-11-30T10:00:00Z) or a duration back from now (24h), got %q", v)
}

// printVerdicts prints verdicts with what became of them: ATTENTION is
// "no", "YES" while an operation waits for a person, "resolved" once an
// operator has decided every operation of the verdict since, or "YES (k/n
// decided)" in between.
func printVerdicts(w io.Writer, evs []kernel.Event, res []operations.Resolution) error {
	byKey := map[kernel.EventKey]operations.Resolution{}
	for _, r := range res {
		byKey[r.Verdict] = r
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "TS\tRUN\tSUPERVISOR\tMODEL\tSETTLE\tATTENTION\tOPERATIONS\tLESSON")
	waiting := 0
	for _, ev := range evs {
		var d kernel.Verdict
		_ = ev.DecodeData(&d)
		r, known := byKey[ev.Key()]
		attn := "no"
		switch {
		case known && r.Resolved:
			attn = "resolved"
		case !d.NeedsAttention:
		case known && len(r.DecidedByOperator) > 0:
			attn = fmt.Sprintf("YES (%d/%d decided)", len(r.DecidedByOperator), len(d.OperationIDs))
			waiting++
		default:
			attn = "YES"
			waiting++
		}
		settle := d.SettlePolicy
		if settle == "" {
			settle = "-"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", ev.TS.UTC().Format(time.RFC3339), kernel.Printable(ev.RunID), d.Supervisor, orDash(d.Model),
			settle, attn, kernel.Printable(strings.Join(d.OperationIDs, ",")), oneLine(d.Lesson, 80))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintf(w, "%d verdict(s), %d still waiting for an operator (reckon ops attention lists their operations)\n", len(evs), waiting)
	return nil
}

func opsAttention(ctx context.Context, c *opsClient, stdout io.Writer, project, run, cursor string, limit int, all, asJSON bool) error {
	var items []operations.AttentionItem
	raws, cursor, err := pages(ctx, c, httpapi.PathAttention, projectQuery(project, run), cursor, limit, all, func(raw []byte) (string, error) {
		var p operations.AttentionPage // the API's null next_cursor decodes as ""
		if err := json.Unmarshal(raw, &p); err != nil {
			return "", fmt.Errorf("decode attention queue: %w", err)
		}
		items = append(items, p.Operations...)
		return p.NextCursor, nil
	})
	if err != nil {
		return err
	}
	if asJSON {
		return writePages(stdout, raws, map[string]any{"operations": items, "next_cursor": nil})
	}
	tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "RUN\tOPERATION\tTOOL\tEFFECT\tPROPOSED\tWHY\tDECIDED\tSUPERVISOR\tNOTE")
	for _, it := range items {
		sup := orDash(it.Supervisor)
		if it.Model != "" {
			sup += "/" + it.Model
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", kernel.Printable(it.RunID), kernel.Printable(it.OperationID), kernel.Printable(it.Tool),
			it.Effect, orDash(it.ProposedEffect), it.Reason, it.DecidedAt.UTC().Format(time.RFC3339), sup, oneLine(it.Note, 60))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "%d operation(s) waiting for an operator (decide with reckon ops reconcile)\n", len(items))
	if cursor != "" {
		fmt.Fprintf(stdout, "more: reckon ops attention --project %s --cursor %s (or --all)\n", project, cursor)
	}
	return nil
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// oneLine is s on one line, cut to about n bytes (never inside a UTF-8
// sequence), quoted when it still holds control characters (an escape
// sequence someone else wrote must not reach the operator's terminal).
func oneLine(s string, n int) string {
	s = strings.Join(strings.Fields(s), " ")
	if len(s) > n {
		s = kernel.TruncateUTF8(s, n-1) + "…"
	}
	return kernel.Printable(s)
}
