package journal_test

import (
	"context"
	"fmt"
	"sync"
	"testing"

	"github.com/seed-7bc021c3/reckon/internal/pgtest"
	"github.com/seed-7bc021c3/reckon/kernel"
	"github.com/seed-7bc021c3/reckon/kernel/journal"
)

// TestGroupCommitAnswersEachCaller runs many concurrent single-event Ingest
// calls, which share round trips (group commit), and checks that every
// caller gets the answer it would get alone: one accepted and one repeated
// per identical pair, one accepted and one conflict per differing pair, an
// error only for the invalid event, and exactly the accepted rows written.
func TestGroupCommitAnswersEachCaller(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := pgtest.New(t).Pool
	s := journal.New(pool, nil)

	type call struct {
		kind string // unique, same, differ, invalid
		ev   kernel.Event
	}
	var calls []call
	for i := range 60 {
		calls = append(calls, call{"unique", ev("g", fmt.Sprintf("u%d", i), kernel.TypeRunCompleted, `{}`)})
	}
	for i := range 10 {
		e := ev("g", fmt.Sprintf("s%d", i), kernel.TypeRunFailed, `{"error":"x"}`)
		calls = append(calls, call{"same", e}, call{"same", e})
		a, b := ev("g", fmt.Sprintf("d%d", i), kernel.TypeRunFailed, `{"error":"a"}`), ev("g", fmt.Sprintf("d%d", i), kernel.TypeRunFailed, `{"error":"b"}`)
		calls = append(calls, call{"differ", a}, call{"differ", b})
	}
	bad := ev("g", "bad", kernel.TypeRunFailed, `{"error":`)
	calls = append(calls, call{"invalid", bad})

	results := make([][]kernel.IngestResult, len(calls))
	errs := make([]error, len(calls))
	var wg sync.WaitGroup
	for i, c := range calls {
		wg.Go(func() { results[i], errs[i] = s.Ingest(ctx, []kernel.Event{c.ev}) })
	}
	wg.Wait()

	byKey := map[string][]string{}
	for i, c := range calls {
		if c.kind == "invalid" {
			if errs[i] == nil {
				t.Fatalf("invalid event accepted: %v", results[i])
			}
			continue
		}
		if errs[i] != nil {
			t.Fatalf("call %d (%s): %v", i, c.kind, errs[i])
		}
		if len(results[i]) != 1 || results[i][0].EventID != c.ev.EventID {
			t.Fatalf("call %d got answers %+v for %s", i, results[i], c.ev.EventID)
		}
		byKey[c.ev.EventID] = append(byKey[c.ev.EventID], results[i][0].Status)
	}
	for id, sts := range byKey {
		accepted, repeated, conflict := 0, 0, 0
		for _, st := range sts {
			switch st {
			case kernel.StatusAccepted:
				accepted++
			case kernel.StatusRepeated:
				repeated++
			case kernel.StatusConflict:
				conflict++
			}
		}
		switch id[0] {
		case 'u':
			if accepted != 1 || len(sts) != 1 {
				t.Errorf("%s: %v", id, sts)
			}
		case 's':
			if accepted != 1 || repeated != 1 {
				t.Errorf("%s: %v, want one accepted and one repeated", id, sts)
			}
		case 'd':
			if accepted != 1 || conflict != 1 {
				t.Errorf("%s: %v, want one accepted and one conflict", id, sts)
			}
		}
	}
	var n int
	if err := pool.QueryRow(ctx, `SELECT count(*) FROM journal_events WHERE source_id = 'g'`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	if want := 60 + 10 + 10; n != want {
		t.Fatalf("%d rows written, want %d", n, want)
	}
}

// TestGroupCommitFailureStaysWithItsCaller: an event that passes
// validation but that PostgreSQL refuses (a NUL character, which jsonb
// cannot store) fails the combined statement; the other callers' events
// are then written on their own and only that caller gets the error.
func TestGroupCommitFailureStaysWithItsCaller(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := pgtest.New(t).Pool
	s := journal.New(pool, nil)
	// An event that validation passes and PostgreSQL refuses: validation now
	// refuses every byte PostgreSQL would (NUL, invalid UTF-8), so a trigger
	// in this test's own schema plays the refusing database.
	if _, err := pool.Exec(ctx, `
CREATE FUNCTION refuse_poison() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF NEW.event_id = 'poison' THEN RAISE EXCEPTION 'poison refused'; END IF;
    RETURN NEW;
END $$;
CREATE TRIGGER refuse_poison BEFORE INSERT ON journal_events
    FOR EACH ROW EXECUTE FUNCTION refuse_poison();`); err != nil {
		t.Fatalf("install the refusing trigger: %v", err)
	}
	poison := ev("p", "poison", kernel.TypeRunFailed, `{"error":"a b"}`)
	if _, err := poison.Prepare(); err != nil {
		t.Fatalf("the poison event must pass validation: %v", err)
	}
	const n = 40
	errs := make([]error, n+1)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			_, errs[i] = s.Ingest(ctx, []kernel.Event{ev("p", fmt.Sprintf("ok%d", i), kernel.TypeRunCompleted, `{}`)})
		})
	}
	wg.Go(func() { _, errs[n] = s.Ingest(ctx, []kernel.Event{poison}) })
	wg.Wait()
	for i := range n {
		if errs[i] != nil {
			t.Fatalf("caller %d failed with the poison event's error: %v", i, errs[i])
		}
	}
	if errs[n] == nil {
		t.Fatal("the poison event was accepted")
	}
	var got int
	if err := pool.QueryRow(ctx, `SELECT count(*) FROM journal_events WHERE source_id = 'p'`).Scan(&got); err != nil {
		t.Fatal(err)
	}
	if got != n {
		t.Fatalf("%d rows written, want %d", got, n)
	}
}
