package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/seed-7bc021c3/reckon/internal/reckontest"
	"github.com/seed-7bc021c3/reckon/kernel"
	"github.com/seed-7bc021c3/reckon/kernel/outbox"
)

// outboxCLI runs `reckon outbox args…` against the database at dbURL and
// returns its output, failing the test when it fails.
func outboxCLI(t *testing.T, dbURL string, args ...string) string {
	t.Helper()
	cmd := exec.Command(os.Args[0], append([]string{"outbox"}, args...)...)
	cmd.Env = append(os.Environ(), execMainEnv+"=1", "DATABASE_URL="+dbURL)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("outbox %v: %v\n%s", args, err, out)
	}
	return string(out)
}

// parkOnConflict has the journal hold ev with a different payload, then
// enqueues and publishes ev: its row is parked on the conflict.
func parkOnConflict(ctx context.Context, t *testing.T, b *reckontest.Bundle, ev kernel.Event) {
	t.Helper()
	other := ev
	other.Data = []byte(`{"operation_id":"op-1","tool":"b"}`)
	if _, err := b.Journal.Ingest(ctx, []kernel.Event{other}); err != nil {
		t.Fatal(err)
	}
	if err := outbox.Enqueue(ctx, b.Schema.Pool, ev); err != nil {
		t.Fatal(err)
	}
	if err := outbox.NewPublisher(b.Schema.Pool, b.Journal, outbox.Config{}, nil, zerolog.Nop()).Drain(ctx); err != nil {
		t.Fatal(err)
	}
}

// startedEvent is agent-x's tool.started of op-1 (tool "a") in run.
func startedEvent(run string) kernel.Event {
	return kernel.Event{SourceID: "agent-x", EventID: run + "/op-1/started", Project: "acme", RunID: run,
		Type: kernel.TypeToolStarted, TS: time.Now().UTC(), Actor: "agent", Data: []byte(`{"operation_id":"op-1","tool":"a"}`)}
}

// TestOutboxParked: a row parked on a journal conflict is listed with its
// reason by `reckon outbox parked`.
func TestOutboxParked(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := reckontest.Setup(t, reckontest.Config{RealClock: true})
	parkOnConflict(ctx, t, b, startedEvent("r1"))
	out := outboxCLI(t, b.Schema.URL, "parked")
	if !strings.Contains(out, "r1/op-1/started") || !strings.Contains(out, "different payload") || !strings.Contains(out, "1 parked row(s)") {
		t.Fatalf("output lacks the parked row and its reason:\n%s", out)
	}
}

// downJournal fails every delivery, as a journal behind an unreachable API.
type downJournal struct{}

func (downJournal) Ingest(context.Context, []kernel.Event) ([]kernel.IngestResult, error) {
	return nil, errors.New("journal down: connection refused")
}

// TestOutboxRetrying: rows whose delivery failed are listed, oldest first,
// with their attempts and last error, by `reckon outbox retrying`; rows
// delivered, parked or never tried are not.
func TestOutboxRetrying(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := reckontest.Setup(t, reckontest.Config{RealClock: true})
	s := b.Schema
	// Delivered, and parked on a conflict.
	if err := outbox.Enqueue(ctx, s.Pool, startedEvent("delivered")); err != nil {
		t.Fatal(err)
	}
	parkOnConflict(ctx, t, b, startedEvent("parked"))
	// Two failed once against a journal that is down; one never tried.
	if err := outbox.Enqueue(ctx, s.Pool, startedEvent("late-1"), startedEvent("late-2")); err != nil {
		t.Fatal(err)
	}
	if _, err := outbox.NewPublisher(s.Pool, downJournal{}, outbox.Config{}, nil, zerolog.Nop()).PublishOnce(ctx); err == nil {
		t.Fatal("a delivery to a journal that is down succeeded")
	}
	if err := outbox.Enqueue(ctx, s.Pool, startedEvent("untried")); err != nil {
		t.Fatal(err)
	}

	table := outboxCLI(t, s.URL, "retrying")
	for _, want := range []string{"late-1/op-1/started", "late-2/op-1/started", "journal down: connection refused", "2 row(s) retried"} {
		if !strings.Contains(table, want) {
			t.Fatalf("table lacks %q:\n%s", want, table)
		}
	}
	for _, not := range []string{"delivered/", "parked/", "untried/"} {
		if strings.Contains(table, not) {
			t.Fatalf("table lists a row it must not (%s):\n%s", not, table)
		}
	}
	if strings.Index(table, "late-1/") > strings.Index(table, "late-2/") {
		t.Fatalf("rows not oldest first:\n%s", table)
	}
	var got struct {
		Retrying []struct {
			EventID   string `json:"event_id"`
			Attempts  int    `json:"attempts"`
			LastError string `json:"last_error"`
		} `json:"retrying"`
	}
	if err := json.Unmarshal([]byte(outboxCLI(t, s.URL, "retrying", "--json", "--limit", "1")), &got); err != nil {
		t.Fatal(err)
	}
	if len(got.Retrying) != 1 || got.Retrying[0].EventID != "late-1/op-1/started" || got.Retrying[0].Attempts != 1 ||
		!strings.Contains(got.Retrying[0].LastError, "journal down") {
		t.Fatalf("--json --limit 1: %+v", got)
	}
}

// TestOutboxParkedQuotesControlCharacters: source and event ids of a parked
// row are an agent's choice and its reason may quote them; in the `reckon
// outbox parked` table an escape sequence must not reach the terminal, nor
// a newline forge a row.
func TestOutboxParkedQuotesControlCharacters(t *testing.T) {
	t.Parallel()
	row := outbox.Parked{
		Key:      kernel.EventKey{SourceID: "agent\x1b[31m", EventID: "r1/op-1\nFORGED  row"},
		Reason:   "conflict on \x1b]0;pwned\x07",
		ParkedAt: time.Date(2026, 12, 2, 10, 0, 0, 0, time.UTC),
	}
	var out bytes.Buffer
	if err := printParked(&out, []outbox.Parked{row}); err != nil {
		t.Fatal(err)
	}
	s := out.String()
	if strings.ContainsAny(s, "\x1b\x07") || strings.Count(s, "\n") != 3 {
		t.Fatalf("control characters reach the terminal:\n%q", s)
	}
	for _, want := range []string{`"agent\x1b[31m"`, `"r1/op-1\nFORGED  row"`, `"conflict on \x1b]0;pwned\a"`, "1 parked row(s)"} {
		if !strings.Contains(s, want) {
			t.Errorf("output lacks %s:\n%s", want, s)
		}
	}
}
