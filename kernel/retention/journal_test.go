package retention_test

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/csv"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/seed-7bc021c3/reckon/internal/pgtest"
	"github.com/seed-7bc021c3/reckon/internal/reckontest"
	"github.com/seed-7bc021c3/reckon/kernel"
	"github.com/seed-7bc021c3/reckon/kernel/journal"
	"github.com/seed-7bc021c3/reckon/kernel/operations"
	"github.com/seed-7bc021c3/reckon/kernel/retention"
)

// The journal tests run their passes six weeks ahead of the database's
// clock: what Store.Ingest journals now lands in journal_events_legacy,
// which ends at most a week from now, so under a retention of three
// weeks it and the two weeks after it are old; rows placed in the
// partitions near that future now (moveTo) are not.
const (
	ahead      = 42 * 24 * time.Hour
	keep       = 21 * 24 * time.Hour
	window     = 14 * 24 * time.Hour
	legacyName = "journal_events_legacy"
)

// journalFixture is one test's schema, journal and clock.
type journalFixture struct {
	t     *testing.T
	s     *pgtest.Schema
	store *journal.Store
	now   time.Time
	log   bytes.Buffer
}

func newJournalFixture(t *testing.T) *journalFixture {
	t.Helper()
	s := pgtest.New(t)
	f := &journalFixture{t: t, s: s, store: journal.New(s.Pool, nil), now: time.Now().Add(ahead).UTC()}
	// A first pass without retention creates the partitions up to the
	// future now, for moveTo.
	if r, err := f.maintainer(0, "").Pass(context.Background()); err != nil || r.Created == 0 {
		t.Fatalf("extend: %+v, %v; want partitions created", r, err)
	}
	return f
}

// maintainer is a fresh maintenance value (its first pass is due).
func (f *journalFixture) maintainer(retain time.Duration, exportDir string) *retention.Journal {
	return &retention.Journal{Pool: f.s.Pool, Retention: retain, ExportDir: exportDir, Window: window,
		Now: func() time.Time { return f.now }, Log: zerolog.New(&f.log)}
}

// pass makes one pass with the tests' retention.
func (f *journalFixture) pass(exportDir string) retention.JournalReport {
	f.t.Helper()
	r, err := f.maintainer(keep, exportDir).Pass(context.Background())
	if err != nil {
		f.t.Fatalf("pass: %v", err)
	}
	return r
}

func (f *journalFixture) ingest(want string, evs ...kernel.Event) {
	f.t.Helper()
	res, err := f.store.Ingest(context.Background(), evs)
	if err != nil {
		f.t.Fatal(err)
	}
	for _, r := range res {
		if r.Status != want {
			f.t.Fatalf("ingest %s/%s: %s (%s), want %s", r.SourceID, r.EventID, r.Status, r.Reason, want)
		}
	}
}

// moveTo sets the ingested_at of ev's row to at, and so of its key row
// and its run's bounds: the journal then holds it in at's partition, as
// if journaled then.
func (f *journalFixture) moveTo(ev kernel.Event, at time.Time) {
	f.t.Helper()
	pgtest.RedateJournal(f.t, f.s.Pool, `UPDATE journal_events SET ingested_at = $3 WHERE source_id = $1 AND event_id = $2`,
		ev.SourceID, ev.EventID, at)
}

func (f *journalFixture) partitions() []string {
	return pgtest.Strings(f.t, f.s.Pool, `SELECT name FROM reckon_journal_partitions()`)
}

func (f *journalFixture) count(q string, args ...any) int {
	f.t.Helper()
	return pgtest.Int(f.t, f.s.Pool, q, args...)
}

// gzipRows reads an export back: its rows, the header left out.
func gzipRows(t *testing.T, path string) [][]string {
	t.Helper()
	file, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer file.Close()
	zr, err := gzip.NewReader(file)
	if err != nil {
		t.Fatal(err)
	}
	recs, err := csv.NewReader(zr).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	if len(recs) == 0 || recs[0][0] != "seq" {
		t.Fatalf("export %s has no header: %v", path, recs)
	}
	return recs[1:]
}

// TestJournalDropsAndExportsOldPartition: a partition older than the
// retention, held by no run that matters, is exported (a gzip CSV of its
// rows in journal order) and dropped; the runs index forgets the runs it
// held every event of, not those with newer events; the key rows stay, so
// the same old event delivered again is repeated and another payload under
// its key a conflict. The default partition and the newer ones stay.
func TestJournalDropsAndExportsOldPartition(t *testing.T) {
	t.Parallel()
	f := newJournalFixture(t)
	old := reckontest.Run{Project: "p", RunID: "r-old", Source: "agent-1"}
	ts := f.now.Add(-60 * 24 * time.Hour)
	oldEvents := []kernel.Event{old.RunStarted(ts)}
	for i := range 5 {
		op := fmt.Sprintf("op-%d", i)
		oldEvents = append(oldEvents, old.Started(op, "run_command", ts), old.Completed(op, ts))
	}
	oldEvents = append(oldEvents, old.RunCompleted(ts))
	f.ingest(kernel.StatusAccepted, oldEvents...)
	// A run begun long ago and still reporting: its first event goes with
	// the old partition, its newer one keeps its runs index row.
	both := reckontest.Run{Project: "p", RunID: "r-both", Source: "agent-1"}
	late := both.Started("op-late", "run_command", f.now.Add(-24*time.Hour))
	f.ingest(kernel.StatusAccepted, both.RunStarted(ts), late, both.Completed("op-late", f.now.Add(-24*time.Hour)))
	f.moveTo(late, f.now.Add(-24*time.Hour))

	dir := t.TempDir()
	r := f.pass(dir)
	if !slices.Contains(r.Dropped, legacyName) || len(r.Held) != 0 {
		t.Fatalf("report %+v: want %s dropped, nothing held", r, legacyName)
	}
	parts := f.partitions()
	if slices.Contains(parts, legacyName) || !slices.Contains(parts, "journal_events_default") {
		t.Errorf("partitions after the pass: %v", parts)
	}
	file := filepath.Join(dir, legacyName+".csv.gz")
	if !slices.Contains(r.Exported, file) {
		t.Fatalf("exported %v, want %s", r.Exported, file)
	}
	rows, err := gzipRows(t, file), error(nil)
	if want := len(oldEvents) + 2; len(rows) != want || r.DroppedRows < int64(want) {
		t.Errorf("export holds %d rows (report %d), want %d: the old run's and r-both's first two", len(rows), r.DroppedRows, want)
	}
	seqs := make([]int, len(rows))
	for i, row := range rows {
		if seqs[i], err = strconv.Atoi(row[0]); err != nil {
			t.Fatalf("export row %v: %v", row, err)
		}
	}
	if !slices.IsSorted(seqs) {
		t.Errorf("export not in journal order: seq %v", seqs)
	}
	if n := f.count(`SELECT count(*) FROM journal_events WHERE run_id = 'r-old'`); n != 0 {
		t.Errorf("%d events of the old run left", n)
	}
	if got := pgtest.Strings(t, f.s.Pool, `SELECT run_id FROM journal_runs ORDER BY 1`); !slices.Equal(got, []string{"r-both"}) || r.RunsDeleted != 1 {
		t.Errorf("runs index holds %v (deleted %d), want r-both alone", got, r.RunsDeleted)
	}
	if n := f.count(`SELECT count(*) FROM journal_keys WHERE run_id = 'r-old'`); n != len(oldEvents) {
		t.Errorf("%d key rows of the old run, want %d: keys outlive their events", n, len(oldEvents))
	}
	// The redelivery of a dropped event is repeated; another payload
	// under its key is a conflict, and neither writes an event.
	f.ingest(kernel.StatusRepeated, oldEvents[0], oldEvents[3])
	changed := oldEvents[0]
	changed.TS = changed.TS.Add(time.Second)
	f.ingest(kernel.StatusConflict, changed)
	if n := f.count(`SELECT count(*) FROM journal_events WHERE run_id = 'r-old'`); n != 0 {
		t.Errorf("the redelivery wrote %d events", n)
	}
	// Nothing is left to drop; a failed export would have kept it.
	if r := f.pass(dir); len(r.Dropped) != 0 {
		t.Errorf("second pass dropped %v", r.Dropped)
	}
}

// TestJournalFailedExportKeepsPartition: when the export cannot be
// written the pass fails and the partition stays.
func TestJournalFailedExportKeepsPartition(t *testing.T) {
	t.Parallel()
	f := newJournalFixture(t)
	run := reckontest.Run{Project: "p", RunID: "r", Source: "agent-1"}
	f.ingest(kernel.StatusAccepted, run.RunStarted(f.now), run.RunCompleted(f.now))
	_, err := f.maintainer(keep, filepath.Join(t.TempDir(), "missing")).Pass(context.Background())
	if err == nil || !strings.Contains(err.Error(), legacyName) {
		t.Fatalf("pass into a missing directory: %v, want an error naming the partition", err)
	}
	if !slices.Contains(f.partitions(), legacyName) || f.count(`SELECT count(*) FROM journal_events`) != 2 {
		t.Errorf("the partition whose export failed is gone")
	}
	if !errors.Is(err, os.ErrNotExist) {
		t.Errorf("error %v, want the file system's", err)
	}
}

// TestJournalHoldsPartitionOfListedOperation: an unsettled operation
// inside the window, whose tool.started is in a newer partition, holds
// back the old partition with its run's run.started (the run's owner for
// the listing), and the listing still shows it; once settled, the next
// pass drops the partition.
func TestJournalHoldsPartitionOfListedOperation(t *testing.T) {
	t.Parallel()
	f := newJournalFixture(t)
	ctx := context.Background()
	held := reckontest.Run{Project: "p", RunID: "r-held", Source: "agent-1"}
	done := reckontest.Run{Project: "p", RunID: "r-done", Source: "agent-1"}
	start := held.Started("op-1", "run_command", f.now.Add(-2*24*time.Hour))
	f.ingest(kernel.StatusAccepted, held.RunStarted(f.now.Add(-50*24*time.Hour)), start,
		done.RunStarted(f.now), done.RunCompleted(f.now))
	f.moveTo(start, f.now.Add(-2*24*time.Hour))

	r := f.pass("")
	if !slices.Equal(r.Held, []string{legacyName}) || slices.Contains(r.Dropped, legacyName) || len(r.Dropped) == 0 {
		t.Fatalf("report %+v: want %s held, the empty old weeks dropped", r, legacyName)
	}
	if !strings.Contains(f.log.String(), "p/r-held") || strings.Contains(f.log.String(), "r-done") {
		t.Errorf("the log does not name the holding run alone: %s", f.log.String())
	}
	ops := operations.New(f.s.Pool, operations.Config{Window: window, Now: func() time.Time { return f.now }})
	page, err := ops.List(ctx, operations.ListParams{Project: "p"})
	if err != nil {
		t.Fatal(err)
	}
	if len(page.Operations) != 1 || page.Operations[0].OperationID != "op-1" || page.Operations[0].RunID != "r-held" {
		t.Fatalf("listing after the pass: %+v, want op-1 of r-held", page.Operations)
	}
	// Settled, the operation leaves the listing and holds nothing.
	f.ingest(kernel.StatusAccepted, held.Completed("op-1", f.now.Add(-24*time.Hour)))
	if r := f.pass(""); !slices.Equal(r.Dropped, []string{legacyName}) || len(r.Held) != 0 {
		t.Errorf("pass after the settlement: %+v, want %s dropped", r, legacyName)
	}
}

// TestJournalHoldsAwaitingRun: a run the runs index says is awaiting (a
// kernel run.awaiting without its run.resumed) holds back the partitions
// of its events, whatever their age; once it fails, it holds nothing, and
// the partition goes at the next pass that looks (hourly).
func TestJournalHoldsAwaitingRun(t *testing.T) {
	t.Parallel()
	f := newJournalFixture(t)
	wait := reckontest.Run{Project: "p", RunID: "r-wait", Source: kernel.SourceKernel}
	began := f.now.Add(-50 * 24 * time.Hour)
	f.ingest(kernel.StatusAccepted, wait.RunStarted(began),
		wait.Event("await/op-1", kernel.TypeRunAwaiting, began, kernel.RunAwaiting{OperationID: "op-1"}))
	if got := pgtest.Strings(t, f.s.Pool, `SELECT status FROM journal_runs WHERE run_id = 'r-wait'`); !slices.Equal(got, []string{"awaiting"}) {
		t.Fatalf("runs index status %v, want awaiting", got)
	}
	if r := f.pass(""); !slices.Equal(r.Held, []string{legacyName}) || slices.Contains(r.Dropped, legacyName) {
		t.Fatalf("report %+v: want %s held by the awaiting run", r, legacyName)
	}
	if !strings.Contains(f.log.String(), "p/r-wait") {
		t.Errorf("the log does not name the awaiting run: %s", f.log.String())
	}
	// One maintenance value looks for partitions to drop once per Every:
	// the loop's next passes within it only extend.
	m := f.maintainer(keep, "")
	if r, err := m.Pass(context.Background()); err != nil || !slices.Equal(r.Held, []string{legacyName}) {
		t.Fatalf("pass: %+v, %v; want %s held", r, err, legacyName)
	}
	f.ingest(kernel.StatusAccepted, wait.RunFailed(f.now))
	f.now = f.now.Add(retention.DefaultJournalEvery - time.Minute)
	if r, err := m.Pass(context.Background()); err != nil || len(r.Dropped)+len(r.Held) != 0 {
		t.Errorf("pass within the hour: %+v, %v; want no drop looked for", r, err)
	}
	f.now = f.now.Add(time.Minute)
	if r, err := m.Pass(context.Background()); err != nil || !slices.Equal(r.Dropped, []string{legacyName}) {
		t.Errorf("pass an hour on, after the wait ended: %+v, %v; want %s dropped", r, err, legacyName)
	}
}

// TestJournalPassSkipsWhileAnotherRuns: of two processes' passes one runs;
// the other, finding the maintenance lock taken, does nothing.
func TestJournalPassSkipsWhileAnotherRuns(t *testing.T) {
	t.Parallel()
	f := newJournalFixture(t)
	tx := f.s.Tx(t)
	if _, err := tx.Exec(context.Background(), `SELECT pg_advisory_xact_lock(hashtextextended('reckon journal retention ' || current_schema(), 0))`); err != nil {
		t.Fatal(err)
	}
	f.now = f.now.Add(ahead)
	before := f.partitions()
	if r := f.pass(""); !r.Skipped || r.Created != 0 || len(r.Dropped) != 0 {
		t.Errorf("pass under another's lock: %+v, want skipped", r)
	}
	if got := f.partitions(); !slices.Equal(got, before) {
		t.Errorf("partitions changed under another's lock: %v, want %v", got, before)
	}
}

// TestJournalKeyHorizon: key rows are deleted once older than the
// retention plus retention.KeySlack, and not before.
func TestJournalKeyHorizon(t *testing.T) {
	t.Parallel()
	f := newJournalFixture(t)
	horizon := f.now.Add(-keep - retention.KeySlack)
	for id, at := range map[string]time.Time{
		"past-1": horizon.Add(-time.Hour), "past-2": horizon.Add(-90 * 24 * time.Hour),
		"inside": horizon.Add(time.Hour), "recent": f.now.Add(-time.Hour),
	} {
		if _, err := f.s.Pool.Exec(context.Background(), `INSERT INTO journal_keys (source_id, event_id, project, run_id, seq, ingested_at, payload_digest)
			VALUES ('agent-1', $1, 'p', 'r', nextval('journal_events_seq'), $2, '\x00')`, id, at); err != nil {
			t.Fatal(err)
		}
	}
	if r := f.pass(""); r.KeysDeleted != 2 {
		t.Errorf("deleted %d keys, want 2", r.KeysDeleted)
	}
	if got := pgtest.Strings(t, f.s.Pool, `SELECT event_id FROM journal_keys ORDER BY 1`); !slices.Equal(got, []string{"inside", "recent"}) {
		t.Errorf("keys left %v, want inside and recent", got)
	}
}

// TestJournalExtendsWithoutRetention: with the retention off a pass still
// creates the weeks ahead (up to now + retention.ExtendAhead) and drops
// nothing; with it on, the default partition is never dropped, and rows in
// it are reported.
func TestJournalExtendsWithoutRetention(t *testing.T) {
	t.Parallel()
	f := newJournalFixture(t)
	ctx := context.Background()
	var newest time.Time
	if err := f.s.Pool.QueryRow(ctx, `SELECT max(upper_bound) FROM reckon_journal_partitions()`).Scan(&newest); err != nil {
		t.Fatal(err)
	}
	if newest.Before(f.now.Add(retention.ExtendAhead)) {
		t.Errorf("newest partition ends %s, before now + ExtendAhead %s", newest, f.now.Add(retention.ExtendAhead))
	}
	before := f.partitions()
	if r, err := f.maintainer(0, "").Pass(ctx); err != nil || r.Created != 0 || len(r.Dropped) != 0 {
		t.Errorf("second pass without retention: %+v, %v; want nothing created or dropped", r, err)
	}
	if got := f.partitions(); !slices.Equal(got, before) {
		t.Errorf("partitions %v, want %v", got, before)
	}
	// A row past every partition lands in the default partition.
	if _, err := f.s.Pool.Exec(ctx, `INSERT INTO journal_events (source_id, event_id, project, run_id, type, ts, actor, data, payload_digest, ingested_at)
		VALUES ('agent-1', 'far', 'p', 'r', 'run.started', now(), 'agent', '{}', '\x00', $1)`, newest.Add(365*24*time.Hour)); err != nil {
		t.Fatal(err)
	}
	r := f.pass("")
	if !r.DefaultRows || slices.Contains(r.Dropped, "journal_events_default") || !slices.Contains(f.partitions(), "journal_events_default") {
		t.Errorf("report %+v: want the default partition's rows reported and the partition kept", r)
	}
	if !strings.Contains(f.log.String(), "default partition holds rows") {
		t.Errorf("no warning of the default partition's rows: %s", f.log.String())
	}
}
