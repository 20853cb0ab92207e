package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"text/tabwriter"

	"github.com/seed-7bc021c3/reckon/kernel"
	"github.com/seed-7bc021c3/reckon/kernel/outbox"
)

// runOutbox lists parked outbox rows straight from DATABASE_URL: a parked
// row never reaches the journal, so the API cannot show it.
func runOutbox(ctx context.Context, args []string) error {
	if len(args) == 0 || args[0] != "parked" {
		return usageErrorf("usage: reckon outbox parked [--limit N] [--json]")
	}
	fs := flag.NewFlagSet("outbox parked", flag.ContinueOnError)
	limit := fs.Int("limit", 50, "at most this many rows, newest first")
	asJSON := fs.Bool("json", false, "print JSON instead of a table")
	s, err := prologue(fs, args[1:])
	if err != nil {
		return err
	}
	if *limit <= 0 {
		return fmt.Errorf("--limit must be positive, got %d", *limit)
	}
	if err := s.openPool(ctx, false); err != nil {
		return err
	}
	defer s.close()
	rows, err := outbox.ListParked(ctx, s.pool, *limit)
	if err != nil {
		return err
	}
	if *asJSON {
		out := make([]map[string]any, len(rows))
		for i, r := range rows {
			out[i] = map[string]any{"source_id": r.Key.SourceID, "event_id": r.Key.EventID, "reason": r.Reason, "parked_at": r.ParkedAt}
		}
		return json.NewEncoder(os.Stdout).Encode(map[string]any{"parked": out})
	}
	return printParked(os.Stdout, rows)
}

// printParked writes the table of parked rows. Their ids are an agent's
// choice and the reason may quote them: each goes through kernel.Printable,
// so no escape sequence reaches the terminal.
func printParked(w io.Writer, rows []outbox.Parked) error {
	tw := tabwriter.NewWriter(w, 0, 2, 2, ' ', 0)
	fmt.Fprintln(tw, "PARKED AT\tSOURCE\tEVENT\tREASON")
	for _, r := range rows {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", r.ParkedAt.UTC().Format("2006-01-02T15:04:05Z"),
			kernel.Printable(r.Key.SourceID), kernel.Printable(r.Key.EventID), kernel.Printable(r.Reason))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	_, err := fmt.Fprintf(w, "%d parked row(s)\n", len(rows))
	return err
}
