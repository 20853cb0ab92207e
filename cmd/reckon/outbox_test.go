package main

import (
	"context"
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
