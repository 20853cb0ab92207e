package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"text/tabwriter"
	"time"

	"github.com/seed-7bc021c3/reckon/kernel"
	"github.com/seed-7bc021c3/reckon/kernel/outbox"
)

// runOutbox lists outbox rows straight from DATABASE_URL: parked rows
// never reach the journal and retried ones have not yet, so the API
// cannot show either.
func runOutbox(ctx context.Context, args []string) error {
	const usage = "usage: reckon outbox parked|retrying [--limit N] [--json]"
	if len(args) == 0 || (args[0] != "parked" && args[0] != "retrying") {
		return usageErrorf(usage)
	}
	what := args[0]
	fs := flag.NewFlagSet("outbox "+what, flag.ContinueOnError)
	order := "newest first"
	if what == "retrying" {
		order = "oldest first"
	}
	limit := fs.Int("limit", 50, "at most this many rows, "+order)
	asJSON := fs.Bool("json", false, "print JSON instead of a table")
	s, err := prologue(fs, args[1:])
	if err != nil {
		return err
	}
	if *limit <= 0 {
		return usageErrorf("--limit must be positive, got %d", *limit)
	}
	if err := s.openPool(ctx, false); err != nil {
		return err
	}
	defer s.close()
	if what == "retrying" {
		rows, err := outbox.ListRetrying(ctx, s.pool, *limit)
		if err != nil {
			return err
		}
		return printRows(os.Stdout, *asJSON, what, rows, printRetrying, retryingObject)
	}
	rows, err := outbox.ListParked(ctx, s.pool, *limit)
	if err != nil {
		return err
	}
	return printRows(os.Stdout, *asJSON, what, rows, printParked, parkedObject)
}

// retryingObject is a retried row in --json output.
func retryingObject(r outbox.Retrying) map[string]any {
	return map[string]any{"source_id": r.Key.SourceID, "event_id": r.Key.EventID, "attempts": r.Attempts,
		"enqueued_at": r.EnqueuedAt, "next_attempt_at": r.NextAttemptAt, "last_error": r.LastError}
}

// parkedObject is a parked row in --json output.
func parkedObject(r outbox.Parked) map[string]any {
	return map[string]any{"source_id": r.Key.SourceID, "event_id": r.Key.EventID, "reason": r.Reason, "parked_at": r.ParkedAt}
}

// printRows prints rows to w as table does, or as JSON ({"<key>": [...]},
// each row as object makes it) through writeJSON.
func printRows[T any](w io.Writer, asJSON bool, key string, rows []T, table func(io.Writer, []T) error, object func(T) map[string]any) error {
	if !asJSON {
		return table(w, rows)
	}
	out := make([]map[string]any, len(rows))
	for i, r := range rows {
		out[i] = object(r)
	}
	return writeJSON(w, map[string]any{key: out}, "", "")
}

// printRetrying writes the table of rows whose delivery is retried, each
// id and error through kernel.Printable as printParked does.
func printRetrying(w io.Writer, rows []outbox.Retrying) error {
	tw := tabwriter.NewWriter(w, 0, 2, 2, ' ', 0)
	fmt.Fprintln(tw, "ENQUEUED AT	SOURCE	EVENT	ATTEMPTS	NEXT ATTEMPT	LAST ERROR")
	for _, r := range rows {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%s\t%s\n", r.EnqueuedAt.UTC().Format(time.RFC3339),
			kernel.Printable(r.Key.SourceID), kernel.Printable(r.Key.EventID), r.Attempts,
			r.NextAttemptAt.UTC().Format(time.RFC3339), kernel.Printable(kernel.Abbreviate(r.LastError, 200)))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	_, err := fmt.Fprintf(w, "%d row(s) retried (neither delivered nor parked)\n", len(rows))
	return err
}

// printParked writes the table of parked rows. Their ids are an agent's
// choice and the reason may quote them: each goes through kernel.Printable,
// so no escape sequence reaches the terminal.
func printParked(w io.Writer, rows []outbox.Parked) error {
	tw := tabwriter.NewWriter(w, 0, 2, 2, ' ', 0)
	fmt.Fprintln(tw, "PARKED AT\tSOURCE\tEVENT\tREASON")
	for _, r := range rows {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", r.ParkedAt.UTC().Format(time.RFC3339),
			kernel.Printable(r.Key.SourceID), kernel.Printable(r.Key.EventID), kernel.Printable(r.Reason))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	_, err := fmt.Fprintf(w, "%d parked row(s)\n", len(rows))
	return err
}
