package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/seed-7bc021c3/reckon/internal/reckontest"
	"github.com/seed-7bc021c3/reckon/kernel"
	"github.com/seed-7bc021c3/reckon/kernel/outbox"
	"github.com/seed-7bc021c3/reckon/pipeline"
	"github.com/seed-7bc021c3/reckon/pipeline/triage"
)

// TestTriagePublishWaitsForRowsAnotherPublisherHolds: `reckon triage`
// returns only when its runs' events are in the journal. While another
// publisher holds the rows (claimed, not yet delivered) a Drain claims
// nothing and returns; publishVerdicts keeps waiting, and when that
// publisher goes away without delivering, delivers the rows itself.
func TestTriagePublishWaitsForRowsAnotherPublisherHolds(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := reckontest.Setup(t, reckontest.Config{RealClock: true})
	s, j := b.Schema, b.Journal
	ev := kernel.Event{SourceID: kernel.SourceKernel, EventID: "r1/verdict/1", Project: "acme", RunID: "r1",
		Type: kernel.TypeRunCompleted, TS: time.Now().UTC(), Actor: "kernel", Data: []byte(`{}`)}
	if err := outbox.Enqueue(ctx, s.Pool, ev); err != nil {
		t.Fatal(err)
	}
	// The other publisher: its claim (of the rows' undelivered rows), held open.
	other, err := s.Pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = other.Rollback(ctx) }()
	if _, err := other.Exec(ctx, `SELECT id FROM kernel_event_outbox_undelivered FOR UPDATE`); err != nil {
		t.Fatal(err)
	}
	rep := triage.Report{Walls: []triage.WallResult{{Project: "acme", RunID: "r1", Outcome: triage.OutcomeJournaled}}}
	done := make(chan error, 1)
	go func() {
		done <- publishVerdicts(ctx, outbox.NewPublisher(s.Pool, j, outbox.Config{}, nil, zerolog.Nop()), s.Pool, rep)
	}()
	select {
	case err := <-done:
		t.Fatalf("publishVerdicts returned (%v) while the run's event was still in the outbox", err)
	case <-time.After(500 * time.Millisecond):
	}
	if err := other.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("publishVerdicts did not deliver the rows the other publisher let go")
	}
	var n int
	if err := s.Pool.QueryRow(ctx, `SELECT count(*) FROM journal_events WHERE event_id = 'r1/verdict/1'`).Scan(&n); err != nil || n != 1 {
		t.Fatalf("journal holds %d of the event (%v)", n, err)
	}
}

// TestTriageReportQuotesControlCharacters: a dry run's notes and a failed
// wall's error carry a supervisor's text (a model's note, its refusal),
// which may repeat what an agent wrote; `reckon triage` must not pass an
// escape sequence in them to the operator's terminal, nor let a newline
// forge a line of its own.
func TestTriageReportQuotesControlCharacters(t *testing.T) {
	t.Parallel()
	const forge = "\x1b[1A\x1b[2K\n  op-1   none   probe"
	rep := triage.Report{Walls: []triage.WallResult{
		{Project: "acme", RunID: "run-1", Part: 1, Parts: 1, Outcome: triage.OutcomeDryRun, Decision: &pipeline.Decision{
			NeedsAttention: true, Operations: []pipeline.EffectAnswer{{OperationID: "op-1", Effect: kernel.EffectUnknown, Basis: kernel.BasisInference, Note: "n" + forge}}}},
		{Project: "acme", RunID: "run-2", Outcome: triage.OutcomeFailed, Error: "supervisor m refused: " + forge},
		{Project: "acme", RunID: "run-3", Outcome: triage.OutcomeUnavailable, Operations: []string{"op-1"}, Error: "op-1: server " + forge},
	}, Unavailable: 1}
	var b bytes.Buffer
	printReport(&b, rep)
	out := b.String()
	if strings.ContainsRune(out, '\x1b') {
		t.Fatalf("an escape sequence reaches the terminal:\n%q", out)
	}
	// An operation left because a probe could not reach its evidence is
	// named, with why, and counted.
	if !strings.Contains(out, "UNAVAILABLE acme/run-3: op-1") || !strings.Contains(out, "1 operation(s) whose evidence a probe could not reach") {
		t.Fatalf("the unavailable operation is not reported:\n%s", out)
	}
	for _, line := range strings.Split(out, "\n") {
		if strings.HasPrefix(strings.TrimSpace(line), "op-1   none") {
			t.Fatalf("a forged line:\n%s", out)
		}
	}
}
