package migrations_test

import (
	"context"
	"testing"
	"time"

	"github.com/seed-7bc021c3/reckon/internal/pgtest"
	"github.com/seed-7bc021c3/reckon/kernel"
	"github.com/seed-7bc021c3/reckon/kernel/journal"
	"github.com/seed-7bc021c3/reckon/migrations"
)

// convertedEvents is the size of the journal TestJournalConversion
// converts; make bench-scale converts one of millions and reports the
// time (docs/performance.md).
const convertedEvents = 30_000

// TestJournalConversion: migration 00080 turns a journal of the version
// before (one table, the key unique in it) into the partitioned journal
// without losing or duplicating an event: every row is there, in the
// same order with the same seq, every key is in the key table pointing at
// its row, every run's floor is its oldest event's ingested_at; the
// journal then answers a redelivery of an old event repeated, a changed
// one conflict, and a new event goes after every old one.
func TestJournalConversion(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := pgtest.NewAt(t, 75)
	// The runs index's trigger function has one source, installed by 00055
	// as well as 00080: it writes the bounds 00080 adds.
	if _, err := s.Pool.Exec(ctx, `ALTER TABLE journal_runs ADD COLUMN first_ingested_at timestamptz, ADD COLUMN ingested_before timestamptz`); err != nil {
		t.Fatal(err)
	}
	// Runs of 30 events over the last ten weeks: run.started, tool.started
	// and tool.completed pairs.
	if _, err := s.Pool.Exec(ctx, `INSERT INTO journal_events (source_id, event_id, project, run_id, type, ts, actor,
    data, payload_digest, operation_id, settles, ingested_at)
SELECT 'bot', 'r' || (g / 30) || '/' || (g % 30), 'p' || ((g / 30) % 7), 'run-' || (g / 30),
    CASE WHEN g % 30 = 0 THEN 'run.started' WHEN g % 2 = 1 THEN 'tool.started' ELSE 'tool.completed' END,
    now() - interval '70 days' + g * interval '3 minutes', 'agent',
    CASE WHEN g % 30 = 0 THEN '{}'::jsonb ELSE jsonb_build_object('operation_id', 'op-' || ((g % 30 + 1) / 2), 'tool', 't') END,
    sha256(('d' || g)::bytea), CASE WHEN g % 30 = 0 THEN NULL ELSE 'op-' || ((g % 30 + 1) / 2) END,
    g % 30 <> 0 AND g % 2 = 0,
    now() - interval '70 days' + g * interval '3 minutes'
FROM generate_series(0, $1::int - 1) g`, convertedEvents); err != nil {
		t.Fatal(err)
	}
	before := pgtest.Strings(t, s.Pool, `SELECT seq || '|' || source_id || '|' || event_id || '|' || ingested_at FROM journal_events ORDER BY seq`)

	start := time.Now()
	if _, err := migrations.Apply(ctx, s.Pool); err != nil {
		t.Fatal(err)
	}
	t.Logf("00080 converted %d events in %v", convertedEvents, time.Since(start).Round(time.Millisecond))

	after := pgtest.Strings(t, s.Pool, `SELECT seq || '|' || source_id || '|' || event_id || '|' || ingested_at FROM journal_events ORDER BY seq`)
	if len(after) != len(before) {
		t.Fatalf("%d events after the conversion, %d before", len(after), len(before))
	}
	for i := range before {
		if before[i] != after[i] {
			t.Fatalf("row %d: %q before, %q after", i, before[i], after[i])
		}
	}
	for what, q := range map[string]string{
		"events without their key row": `SELECT count(*) FROM journal_events e WHERE NOT EXISTS (SELECT 1 FROM journal_keys k
    WHERE k.source_id = e.source_id AND k.event_id = e.event_id AND k.seq = e.seq AND k.ingested_at = e.ingested_at
      AND k.payload_digest = e.payload_digest AND k.project = e.project AND k.run_id = e.run_id)`,
		"key rows without their event": `SELECT count(*) FROM journal_keys k WHERE NOT EXISTS (SELECT 1 FROM journal_events e
    WHERE e.seq = k.seq AND e.ingested_at = k.ingested_at)`,
		"runs whose floor is not their oldest event": `SELECT count(*) FROM journal_runs r
    WHERE r.first_ingested_at IS DISTINCT FROM (SELECT min(e.ingested_at) FROM journal_events e
        WHERE e.project = r.project AND e.run_id = r.run_id)`,
		"runs missing from the runs index": `SELECT count(*) FROM (SELECT DISTINCT project, run_id FROM journal_events) e
    WHERE NOT EXISTS (SELECT 1 FROM journal_runs r WHERE r.project = e.project AND r.run_id = e.run_id)`,
	} {
		if n := pgtest.Strings(t, s.Pool, `SELECT n::text FROM (`+q+`) c(n)`); len(n) != 1 || n[0] != "0" {
			t.Errorf("%s: %v", what, n)
		}
	}

	j := journal.New(s.Pool, nil)
	old := kernel.Event{SourceID: "bot", EventID: "r0/1", Project: "p0", RunID: "run-0", Type: kernel.TypeToolStarted,
		TS: time.Now(), Actor: kernel.ActorAgent, Data: []byte(`{"operation_id":"op-1","tool":"t"}`)}
	fresh := old
	fresh.EventID = "r0/new"
	res, err := j.Ingest(ctx, []kernel.Event{old, fresh})
	if err != nil {
		t.Fatal(err)
	}
	// The old row was written with another digest than this event's
	// canonical one: a conflict, as the flat journal would answer.
	if res[0].Status != kernel.StatusConflict || res[1].Status != kernel.StatusAccepted {
		t.Fatalf("after the conversion: %v; want conflict for the changed old event, accepted for the new", res)
	}
	again, err := j.Ingest(ctx, []kernel.Event{fresh})
	if err != nil || again[0].Status != kernel.StatusRepeated {
		t.Fatalf("the new event again: %v, %v; want repeated", again, err)
	}
	var newest, maxOld int64
	if err := s.Pool.QueryRow(ctx, `SELECT (SELECT seq FROM journal_events WHERE event_id = 'r0/new'),
    (SELECT max(seq) FROM journal_events WHERE event_id <> 'r0/new')`).Scan(&newest, &maxOld); err != nil || newest <= maxOld {
		t.Fatalf("the new event's seq %d after the old ones' %d (%v)", newest, maxOld, err)
	}
	evs, err := j.RunEvents(ctx, "p0", "run-0")
	if err != nil || len(evs) == 0 {
		t.Fatalf("run-0 after the conversion: %d events, %v", len(evs), err)
	}
}
