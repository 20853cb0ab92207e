package journal

import (
	"context"
	"math/rand/v2"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/seed-7bc021c3/reckon/internal/pgtest"
	"github.com/seed-7bc021c3/reckon/kernel"
)

// journalRowsSQL is every row of a journal as the two tables must agree
// on it, in journal order (seq itself may differ: the partitioned journal
// draws a batch's numbers ahead, and a skipped key leaves a gap).
const journalRowsSQL = `SELECT concat_ws('|', source_id, event_id, project, run_id, type, ts, actor,
    parent_source_id, parent_event_id, data, encode(payload_digest, 'hex'), operation_id, settles, open)
FROM journal_events ORDER BY seq`

// TestIngestAnswersLikeFlatJournal drives the same batches (new events,
// repeats, conflicts, duplicates inside a batch; through COPY and the
// statement) into the partitioned journal and into the journal as it was
// before the key table, and requires the same answer for every event and
// the same rows in the same order. Between rounds the partitioned
// journal's rows are moved to other partitions (the next weeks' and the
// default one), so that redeliveries meet keys whose events are in other
// partitions than the one the write goes to.
func TestIngestAnswersLikeFlatJournal(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	parted, flatSchema := pgtest.New(t), pgtest.NewAt(t, 75)
	part := New(parted.Pool, nil)
	// The runs index's trigger function has one source, this version's,
	// installed by 00055 as well: it writes the bounds 00080 adds.
	if _, err := flatSchema.Pool.Exec(ctx, `ALTER TABLE journal_runs ADD COLUMN first_ingested_at timestamptz, ADD COLUMN ingested_before timestamptz`); err != nil {
		t.Fatal(err)
	}
	flat := New(flatSchema.Pool, nil)
	flat.stmts = statements{ingest: pgtest.FlatIngestSQL, digests: pgtest.FlatDigestsSQL}

	r := rand.New(rand.NewPCG(80, 80))
	batches := randomBatches(r, 24)
	for i, b := range batches {
		got, err := part.Ingest(ctx, b)
		if err != nil {
			t.Fatalf("batch %d, partitioned: %v", i, err)
		}
		preps, err := prepare(b)
		if err != nil {
			t.Fatal(err)
		}
		want, err := flat.ingest(ctx, flatSchema.Pool, preps)
		if err != nil {
			t.Fatalf("batch %d, flat: %v", i, err)
		}
		if !slices.Equal(got, want) {
			t.Fatalf("batch %d: answers differ\npartitioned %v\nflat        %v", i, got, want)
		}
		if i%8 == 3 {
			// Older events to other partitions: two weeks on, and past
			// every partition made ahead (the default one).
			pgtest.RedateJournal(t, parted.Pool, `UPDATE journal_events SET ingested_at = now() + CASE WHEN seq % 2 = 0
    THEN interval '14 days' ELSE interval '90 days' END WHERE ingested_at <= now()`)
		}
	}
	if got, want := pgtest.Strings(t, parted.Pool, journalRowsSQL), pgtest.Strings(t, flatSchema.Pool, journalRowsSQL); !slices.Equal(got, want) {
		t.Fatalf("journals differ: %d rows partitioned, %d flat\n%s", len(got), len(want), firstDifference(got, want))
	}
	partitions := pgtest.Strings(t, parted.Pool, `SELECT DISTINCT tableoid::regclass::text FROM journal_events ORDER BY 1`)
	if len(partitions) < 3 {
		t.Fatalf("rows in partitions %v: the test meant them in three at least", partitions)
	}
}

// firstDifference describes the first row two journals disagree on.
func firstDifference(got, want []string) string {
	for i := range min(len(got), len(want)) {
		if got[i] != want[i] {
			return "row " + strconv.Itoa(i) + ":\n  partitioned " + got[i] + "\n  flat        " + want[i]
		}
	}
	return "one is a prefix of the other"
}

// TestRunReadsPruneOtherPartitions: a read of a run's events is bounded by
// the run's weeks (RunBound), so the partitions of other weeks, older or
// newer, are not read at all: their scans are removed from the plan or
// never executed.
func TestRunReadsPruneOtherPartitions(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := pgtest.New(t)
	j := New(s.Pool, nil)
	ev := func(run, id, typ, data string) kernel.Event {
		return kernel.Event{SourceID: "bot", EventID: run + "/" + id, Project: "p", RunID: run, Type: typ,
			TS: time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC), Actor: kernel.ActorAgent, Data: []byte(data)}
	}
	started := `{"operation_id":"op-1","tool":"t"}`
	if _, err := j.Ingest(ctx, []kernel.Event{ev("old", "run", kernel.TypeRunStarted, `{}`),
		ev("old", "op-1/started", kernel.TypeToolStarted, started),
		ev("young", "run", kernel.TypeRunStarted, `{}`), ev("young", "op-1/started", kernel.TypeToolStarted, started),
		ev("young", "op-1/completed", kernel.TypeToolCompleted, `{"operation_id":"op-1"}`)}); err != nil {
		t.Fatal(err)
	}
	// The young run's events are journaled two weeks on, in a partition
	// of their own.
	pgtest.RedateJournal(t, s.Pool, `UPDATE journal_events SET ingested_at = now() + interval '14 days' WHERE run_id = 'young'`)

	for run, want := range map[string]int{"old": 2, "young": 3} {
		var own string
		if err := s.Pool.QueryRow(ctx, `SELECT DISTINCT tableoid::regclass::text FROM journal_events WHERE run_id = $1`, run).Scan(&own); err != nil {
			t.Fatal(err)
		}
		for _, q := range []struct{ what, sql string }{
			{"run events", runEventsSQL},
			{"operation events", strings.Replace(operationEventsSQL, "$3", "'op-1'", 1)},
			{"run terminal", runTerminalSQL},
		} {
			rows, err := s.Pool.Query(ctx, "EXPLAIN (ANALYZE, COSTS OFF, TIMING OFF, SUMMARY OFF) "+q.sql, "p", run)
			if err != nil {
				t.Fatalf("%s: %v", q.what, err)
			}
			lines, err := pgx.CollectRows(rows, pgx.RowTo[string])
			if err != nil {
				t.Fatal(err)
			}
			for _, m := range partitionRead.FindAllStringSubmatch(strings.Join(lines, "\n"), -1) {
				if m[1] != own {
					t.Errorf("%s of run %s (in %s) reads %s:\n%s", q.what, run, own, m[1], strings.Join(lines, "\n"))
				}
			}
		}
		if evs, err := j.RunEvents(ctx, "p", run); err != nil || len(evs) != want {
			t.Fatalf("run %s's events: %d, %v; want %d", run, len(evs), err, want)
		}
	}
}

// partitionRead matches a scan of a partition of the journal that ran
// (neither pruned away nor marked never executed), and names it.
var partitionRead = regexp.MustCompile(`(?m)^.*Scan .*on (journal_events_\w+) .*\(actual rows=.*$`)

// TestRunBoundSeesEarlierTransaction: a writer whose transaction began
// before another's (an earlier ingested_at) may commit after it, and
// after the other created the run's row in the runs index with its later
// ingested_at as the run's floor. The runs index trigger lowers the floor
// to the earlier writer's rows, so no read bounded by it misses them:
// whether the earlier writer meets the row committed or waits on it.
func TestRunBoundSeesEarlierTransaction(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := pgtest.New(t)
	j := New(s.Pool, nil)
	insert := func(tx pgx.Tx, id string, at time.Time) error {
		_, err := tx.Exec(ctx, `INSERT INTO journal_events (source_id, event_id, project, run_id, type, ts, actor, data,
    payload_digest, ingested_at) VALUES ('bot', $1, 'p', $2, 'run.started', now(), 'agent', '{}', '\x00', $3)`, id, "run-"+id[:1], at)
		return err
	}
	base := time.Now().UTC().Truncate(time.Second)
	for _, committed := range []bool{true, false} {
		id := map[bool]string{true: "a", false: "b"}[committed]
		later, err := s.Pool.Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if err := insert(later, id+"-later", base.Add(time.Minute)); err != nil {
			t.Fatal(err)
		}
		earlier, err := s.Pool.Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		var wg sync.WaitGroup
		var earlierErr error
		if committed {
			if err := later.Commit(ctx); err != nil {
				t.Fatal(err)
			}
			earlierErr = insert(earlier, id+"-earlier", base)
		} else {
			// The earlier writer waits on the later one's uncommitted row
			// of the runs index.
			wg.Go(func() { earlierErr = insert(earlier, id+"-earlier", base) })
			time.Sleep(100 * time.Millisecond)
			if err := later.Commit(ctx); err != nil {
				t.Fatal(err)
			}
			wg.Wait()
		}
		if earlierErr != nil {
			t.Fatal(earlierErr)
		}
		if err := earlier.Commit(ctx); err != nil {
			t.Fatal(err)
		}
		evs, err := j.RunEvents(ctx, "p", "run-"+id)
		if err != nil || len(evs) != 2 {
			t.Errorf("committed=%v: the run's events read %d, %v; want both", committed, len(evs), err)
		}
	}
}

// TestExtendSkipsWeeksInDefault: reckon_journal_extend makes the weeks
// ahead, but a week whose rows already went to the default partition
// (nobody extended the journal in time) stays with it, and the weeks after
// it are made.
func TestExtendSkipsWeeksInDefault(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := pgtest.New(t)
	// A row five weeks on: past every partition made ahead.
	if _, err := s.Pool.Exec(ctx, `INSERT INTO journal_events (source_id, event_id, project, run_id, type, ts, actor, data,
    payload_digest, ingested_at) VALUES ('bot', 'e', 'p', 'r', 'run.started', now(), 'agent', '{}', '\x00', now() + interval '35 days')`); err != nil {
		t.Fatal(err)
	}
	var made int
	if err := s.Pool.QueryRow(ctx, `SELECT reckon_journal_extend(now() + interval '49 days')`).Scan(&made); err != nil {
		t.Fatal(err)
	}
	var where string
	if err := s.Pool.QueryRow(ctx, `SELECT tableoid::regclass::text FROM journal_events WHERE event_id = 'e'`).Scan(&where); err != nil || where != "journal_events_default" {
		t.Fatalf("the row five weeks on is in %q (%v), want journal_events_default", where, err)
	}
	gaps := pgtest.Strings(t, s.Pool, `SELECT p.name FROM reckon_journal_partitions() p
WHERE NOT p.is_default AND p.lower_bound IS NOT NULL
  AND NOT EXISTS (SELECT 1 FROM reckon_journal_partitions() q WHERE q.upper_bound = p.lower_bound)`)
	if made < 4 || len(gaps) != 1 {
		t.Fatalf("extend made %d partitions, ranges starting after a gap %v; want at least 4 and one gap (the week in the default)", made, gaps)
	}
}
