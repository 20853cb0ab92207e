package main

import (
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

// TestOutboxParked: a row parked on a journal conflict is listed with its
// reason by `reckon outbox parked`.
func TestOutboxParked(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := reckontest.Setup(t, reckontest.Config{RealClock: true})
	s, j := b.Schema, b.Journal
	ev := kernel.Event{SourceID: "agent-x", EventID: "r1/op-1/started", Project: "acme", RunID: "r1",
		Type: kernel.TypeToolStarted, TS: time.Now().UTC(), Actor: "agent", Data: []byte(`{"operation_id":"op-1","tool":"a"}`)}
	other := ev
	other.Data = []byte(`{"operation_id":"op-1","tool":"b"}`)
	if _, err := j.Ingest(ctx, []kernel.Event{other}); err != nil {
		t.Fatal(err)
	}
	if err := outbox.Enqueue(ctx, s.Pool, ev); err != nil {
		t.Fatal(err)
	}
	if err := outbox.NewPublisher(s.Pool, j, outbox.Config{}, nil, zerolog.Nop()).Drain(ctx); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(os.Args[0], "outbox", "parked")
	cmd.Env = append(os.Environ(), execMainEnv+"=1", "DATABASE_URL="+s.URL)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("outbox parked: %v\n%s", err, out)
	}
	if !strings.Contains(string(out), "r1/op-1/started") || !strings.Contains(string(out), "different payload") || !strings.Contains(string(out), "1 parked row(s)") {
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
	s, j := b.Schema, b.Journal
	ev := func(run string) kernel.Event {
		return kernel.Event{SourceID: "agent-x", EventID: run + "/op-1/started", Project: "acme", RunID: run,
			Type: kernel.TypeToolStarted, TS: time.Now().UTC(), Actor: "agent", Data: []byte(`{"operation_id":"op-1","tool":"a"}`)}
	}
	// Delivered, and parked on a conflict.
	if err := outbox.Enqueue(ctx, s.Pool, ev("delivered")); err != nil {
		t.Fatal(err)
	}
	other := ev("parked")
	other.Data = []byte(`{"operation_id":"op-1","tool":"b"}`)
	if _, err := j.Ingest(ctx, []kernel.Event{other}); err != nil {
		t.Fatal(err)
	}
	if err := outbox.Enqueue(ctx, s.Pool, ev("parked")); err != nil {
		t.Fatal(err)
	}
	if err := outbox.NewPublisher(s.Pool, j, outbox.Config{}, nil, zerolog.Nop()).Drain(ctx); err != nil {
		t.Fatal(err)
	}
	// Two failed once against a journal that is down; one never tried.
	if err := outbox.Enqueue(ctx, s.Pool, ev("late-1"), ev("late-2")); err != nil {
		t.Fatal(err)
	}
	if _, err := outbox.NewPublisher(s.Pool, downJournal{}, outbox.Config{}, nil, zerolog.Nop()).PublishOnce(ctx); err == nil {
		t.Fatal("a delivery to a journal that is down succeeded")
	}
	if err := outbox.Enqueue(ctx, s.Pool, ev("untried")); err != nil {
		t.Fatal(err)
	}

	run := func(args ...string) string {
		t.Helper()
		cmd := exec.Command(os.Args[0], append([]string{"outbox", "retrying"}, args...)...)
		cmd.Env = append(os.Environ(), execMainEnv+"=1", "DATABASE_URL="+s.URL)
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("outbox retrying %v: %v\n%s", args, err, out)
		}
		return string(out)
	}
	table := run()
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
	if err := json.Unmarshal([]byte(run("--json", "--limit", "1")), &got); err != nil {
		t.Fatal(err)
	}
	if len(got.Retrying) != 1 || got.Retrying[0].EventID != "late-1/op-1/started" || got.Retrying[0].Attempts != 1 ||
		!strings.Contains(got.Retrying[0].LastError, "journal down") {
		t.Fatalf("--json --limit 1: %+v", got)
	}
}
