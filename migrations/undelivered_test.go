package migrations_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/rs/zerolog"

	"github.com/seed-7bc021c3/reckon/internal/pgtest"
	"github.com/seed-7bc021c3/reckon/kernel"
	"github.com/seed-7bc021c3/reckon/kernel/journal"
	"github.com/seed-7bc021c3/reckon/kernel/outbox"
)

// TestOutboxUndeliveredMigratesBothWays: migration 00034 moves the outbox's
// pending state into kernel_event_outbox_undelivered. Down, a row delivered
// or parked under 00034 reads as delivered or parked to the earlier
// version, and a pending one as pending; up again, exactly the earlier
// version's pending rows (one written by hand the old way among them) are
// pending, selectable by run and operation, an earlier version's claim
// fails rather than take delivered rows for undelivered, and a publisher
// delivers them.
func TestOutboxUndeliveredMigratesBothWays(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, p := provider(t)
	ev := func(i int) kernel.Event {
		return kernel.Event{SourceID: kernel.SourceKernel, EventID: fmt.Sprintf("m/op-%d/started", i), Project: "p", RunID: "m",
			Type: kernel.TypeToolStarted, TS: time.Date(2026, 12, 3, 0, 0, 0, 0, time.UTC), Actor: "kernel",
			Data: fmt.Appendf(nil, `{"operation_id":"op-%d","tool":"run_command"}`, i)}
	}
	if err := outbox.Enqueue(ctx, s.Pool, ev(1), ev(2), ev(3)); err != nil {
		t.Fatal(err)
	}
	exec := func(q string, args ...any) {
		t.Helper()
		if _, err := s.Pool.Exec(ctx, q, args...); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	// op-2 delivered, op-3 parked, the way the publisher marks them.
	exec(`DELETE FROM kernel_event_outbox_undelivered WHERE id IN (SELECT id FROM kernel_event_outbox WHERE event_id IN ('m/op-2/started', 'm/op-3/started'))`)
	exec(`UPDATE kernel_event_outbox SET parked_at = now(), park_reason = 'a test''s' WHERE event_id = 'm/op-3/started'`)

	if _, err := p.DownTo(ctx, 33); err != nil {
		t.Fatal(err)
	}
	states := func(q string) []string {
		t.Helper()
		return pgtest.Strings(t, s.Pool, q)
	}
	old := `SELECT event_id || '=' || CASE WHEN parked_at IS NOT NULL THEN 'parked'
	    WHEN delivered_at IS NOT NULL THEN 'delivered' ELSE 'pending' END FROM kernel_event_outbox ORDER BY id`
	if got, want := states(old), []string{"m/op-1/started=pending", "m/op-2/started=delivered", "m/op-3/started=parked"}; !slices.Equal(got, want) {
		t.Fatalf("at 00033: %v, want %v", got, want)
	}
	// A row the earlier version's Enqueue writes: pending by its NULLs.
	r4 := ev(4)
	exec(`INSERT INTO kernel_event_outbox (source_id, event_id, event, payload_digest) VALUES ($1, $2, $3, '\x00')`,
		r4.SourceID, r4.EventID, fmt.Sprintf(`{"source_id":"kernel","event_id":%q,"project":"p","run_id":"m","type":"tool.started","actor":"kernel","ts":"2026-12-03T00:00:00Z","data":{"operation_id":"op-4","tool":"run_command"}}`, r4.EventID))

	if _, err := p.UpTo(ctx, 34); err != nil {
		t.Fatal(err)
	}
	if got, want := states(`SELECT o.event_id || '=' || u.project || '/' || u.run_id || '/' || u.operation_id
	    FROM kernel_event_outbox_undelivered u JOIN kernel_event_outbox o USING (id) ORDER BY id`),
		[]string{"m/op-1/started=p/m/op-1", "m/op-4/started=p/m/op-4"}; !slices.Equal(got, want) {
		t.Fatalf("undelivered at 00034: %v, want %v", got, want)
	}
	// A publisher of the earlier version, still running, fails its claim
	// instead of taking every row delivered since for undelivered.
	var pgErr *pgconn.PgError
	if _, err := s.Pool.Exec(ctx, earlierClaimSQL, 10); !errors.As(err, &pgErr) || pgErr.Code != "42703" {
		t.Fatalf("an earlier version's claim at 00034: %v; want undefined_column (42703)", err)
	}
	pend, err := outbox.Pending(ctx, s.Pool, outbox.PendingFilter{Project: "p", RunID: "m", OperationID: "op-4"})
	if err != nil || len(pend) != 1 || pend[0].EventID != r4.EventID {
		t.Fatalf("pending of op-4: %v, %v", pend, err)
	}
	// This version's publisher delivers them, on this version's schema.
	if _, err := p.Up(ctx); err != nil {
		t.Fatal(err)
	}
	pub := outbox.NewPublisher(s.Pool, journal.New(s.Pool, nil), outbox.Config{BatchSize: 10}, nil, zerolog.Nop())
	if err := pub.Drain(ctx); err != nil {
		t.Fatal(err)
	}
	if got, want := states(`SELECT event_id FROM journal_events ORDER BY seq`), []string{"m/op-1/started", "m/op-4/started"}; !slices.Equal(got, want) {
		t.Fatalf("journal after the drain: %v, want %v", got, want)
	}
	if n, err := outbox.PendingCount(ctx, s.Pool, kernel.RunKey{Project: "p", RunID: "m"}); err != nil || n != 0 {
		t.Fatalf("pending after the drain: %d, %v", n, err)
	}
}

// earlierClaimSQL is the publishers' claim up to migration 00033 (that
// version's kernel/outbox claimKeysSQL), as a publisher of it still sends
// it.
const earlierClaimSQL = `
SELECT id, attempts, source_id, event_id, settles IS NULL FROM kernel_event_outbox
WHERE delivered_at IS NULL AND parked_at IS NULL AND next_attempt_at <= now()
ORDER BY id
LIMIT $1
FOR UPDATE SKIP LOCKED`
