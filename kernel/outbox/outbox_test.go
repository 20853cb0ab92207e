package outbox_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/rs/zerolog"

	"github.com/seed-7bc021c3/reckon/adapter/auth"
	"github.com/seed-7bc021c3/reckon/adapter/httpapi"
	"github.com/seed-7bc021c3/reckon/internal/pgtest"
	"github.com/seed-7bc021c3/reckon/internal/reckontest"
	"github.com/seed-7bc021c3/reckon/kernel"
	"github.com/seed-7bc021c3/reckon/kernel/journal"
	"github.com/seed-7bc021c3/reckon/kernel/outbox"
)

var t0 = time.Date(2026, 11, 30, 10, 0, 0, 0, time.UTC)

func events(run string, n int) []kernel.Event {
	out := make([]kernel.Event, n)
	for i := range out {
		out[i] = kernel.Event{SourceID: kernel.SourceKernel, EventID: fmt.Sprintf("%s/op-%d/started", run, i),
			Project: "acme", RunID: run, Type: kernel.TypeToolStarted, TS: t0, Actor: "kernel",
			Data: []byte(fmt.Sprintf(`{"operation_id":"op-%d","tool":"run_command"}`, i))}
	}
	return out
}

func count(t *testing.T, s *pgtest.Schema, q string) int {
	t.Helper()
	return pgtest.Int(t, s.Pool, q)
}

func enqueue(t *testing.T, s *pgtest.Schema, evs ...kernel.Event) {
	t.Helper()
	if err := outbox.Enqueue(context.Background(), s.Pool, evs...); err != nil {
		t.Fatal(err)
	}
}

func drain(t *testing.T, p *outbox.Publisher) {
	t.Helper()
	if err := p.Drain(context.Background()); err != nil {
		t.Fatal(err)
	}
}

func exec(t *testing.T, s *pgtest.Schema, sql string) {
	t.Helper()
	if _, err := s.Pool.Exec(context.Background(), sql); err != nil {
		t.Fatal(err)
	}
}

// waitDue waits until every undelivered, unparked row is due again (past
// its retry backoff), so that a drain will claim them.
func waitDue(t *testing.T, s *pgtest.Schema) {
	t.Helper()
	reckontest.Eventually(t, 10*time.Second, "retried rows to fall due", func() bool {
		return count(t, s, "SELECT count(*) FROM kernel_event_outbox_undelivered WHERE next_attempt_at > now()") == 0
	})
}

func fastCfg() outbox.Config {
	return outbox.Config{BatchSize: 50, BaseBackoff: time.Millisecond, MaxBackoff: 5 * time.Millisecond, PollInterval: 5 * time.Millisecond}
}

func TestEnqueueRolledBackLeavesNoRow(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := pgtest.New(t)
	tx, err := s.Pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := outbox.Enqueue(ctx, tx, events("r", 3)...); err != nil {
		t.Fatal(err)
	}
	if err := tx.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	if n := count(t, s, "SELECT count(*) FROM kernel_event_outbox"); n != 0 {
		t.Fatalf("%d rows after rollback", n)
	}
	tx, _ = s.Pool.Begin(ctx)
	if err := outbox.Enqueue(ctx, tx, events("r", 3)...); err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if n := count(t, s, "SELECT count(*) FROM kernel_event_outbox"); n != 3 {
		t.Fatalf("%d rows after commit, want 3", n)
	}
}

func TestEnqueueSameKeyIsIdempotentDifferentPayloadConflicts(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := pgtest.New(t)
	evs := events("r", 2)
	enqueue(t, s, evs...)
	if err := outbox.Enqueue(ctx, s.Pool, evs...); err != nil {
		t.Fatalf("re-enqueue of the same events: %v", err)
	}
	changed := evs[1]
	changed.Data = []byte(`{"operation_id":"op-1","tool":"mcp__create_issue"}`)
	err := outbox.Enqueue(ctx, s.Pool, changed)
	if kernel.ErrorCode(err) != kernel.EConflict {
		t.Fatalf("different payload under an enqueued key: %v", err)
	}
	bad := evs[0]
	bad.Type = "tool.sideways"
	if err := outbox.Enqueue(ctx, s.Pool, bad); kernel.ErrorCode(err) != kernel.EInvalid {
		t.Fatalf("invalid event enqueued: %v", err)
	}
	if n := count(t, s, "SELECT count(*) FROM kernel_event_outbox"); n != 2 {
		t.Fatalf("%d rows, want 2", n)
	}
	// On a pool the batch is first written on the condition that every
	// key is new; a batch mixing a new key with an enqueued one falls
	// back to writing the new one and answering the other as a repeat;
	// one with a conflict is answered EConflict, as before this first
	// try, having written its new key (on a pool nothing holds the batch
	// together; in a caller's transaction the caller rolls back).
	fresh := events("r-mixed", 2)
	if err := outbox.Enqueue(ctx, s.Pool, fresh[0], evs[0]); err != nil {
		t.Fatalf("a new key with an enqueued one: %v", err)
	}
	if err := outbox.Enqueue(ctx, s.Pool, fresh[1], changed); kernel.ErrorCode(err) != kernel.EConflict {
		t.Fatalf("a new key with a conflicting one: %v", err)
	}
	if n := count(t, s, "SELECT count(*) FROM kernel_event_outbox"); n != 4 {
		t.Fatalf("%d rows, want 4 (the mixed batches' new keys once each)", n)
	}
	if n := count(t, s, "SELECT count(*) FROM kernel_event_outbox_undelivered"); n != 4 {
		t.Fatalf("%d rows pending, want 4", n)
	}
}

// flaky fails every other Ingest call before touching the journal, and
// every third after it (the journal has the events, the answer is lost):
// both are what a network or a crash does to a delivery.
type flaky struct {
	j     kernel.Journal
	calls atomic.Int64
}

func (f *flaky) Ingest(ctx context.Context, evs []kernel.Event) ([]kernel.IngestResult, error) {
	n := f.calls.Add(1)
	if n%2 == 0 {
		return nil, errors.New("injected: connection reset before delivery")
	}
	res, err := f.j.Ingest(ctx, evs)
	if err == nil && n%3 == 0 {
		return nil, errors.New("injected: answer lost after delivery")
	}
	return res, err
}

func TestPublisherDeliversEverythingOnceThroughIntermittentFailures(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := reckontest.Setup(t, reckontest.Config{RealClock: true})
	s, j := b.Schema, b.Journal
	enqueue(t, s, events("r", 400)...)
	f := &flaky{j: j}
	reg := prometheus.NewRegistry()
	p := outbox.NewPublisher(s.Pool, f, fastCfg(), outbox.NewMetrics(reg, nil), zerolog.Nop())
	deadline := time.Now().Add(30 * time.Second)
	for count(t, s, "SELECT count(*) FROM kernel_event_outbox_undelivered") > 0 {
		if time.Now().After(deadline) {
			t.Fatal("outbox not drained")
		}
		_, _ = p.PublishOnce(ctx)
		time.Sleep(2 * time.Millisecond)
	}
	if n := count(t, s, "SELECT count(*) FROM journal_events"); n != 400 {
		t.Fatalf("journal has %d rows, want 400", n)
	}
	if n := count(t, s, "SELECT count(*) FROM kernel_event_outbox WHERE attempts > 0"); n == 0 {
		t.Fatal("no retries happened; the fault injection did not bite")
	}
	if n := deliveredCount(t, reg, kernel.StatusRepeated); n == 0 {
		t.Fatal("no redelivery was answered repeated; lost answers were not exercised")
	}
}

func TestConflictIsParkedAndStaysParked(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := pgtest.New(t)
	reg := prometheus.NewRegistry()
	j := journal.New(s.Pool, nil)
	evs := events("r", 3)
	// The journal already holds a different payload under evs[1]'s key.
	other := evs[1]
	other.Data = []byte(`{"operation_id":"op-1","tool":"something_else"}`)
	if _, err := j.Ingest(ctx, []kernel.Event{other}); err != nil {
		t.Fatal(err)
	}
	enqueue(t, s, evs...)
	m := outbox.NewMetrics(reg, s.Pool)
	p := outbox.NewPublisher(s.Pool, j, fastCfg(), m, zerolog.Nop())
	for i := 0; i < 3; i++ {
		drain(t, p)
	}
	if n := count(t, s, "SELECT count(*) FROM kernel_event_outbox WHERE parked_at IS NOT NULL AND id NOT IN (SELECT id FROM kernel_event_outbox_undelivered) AND park_reason <> ''"); n != 1 {
		t.Fatalf("%d parked rows, want 1", n)
	}
	if n := count(t, s, "SELECT attempts FROM kernel_event_outbox WHERE parked_at IS NOT NULL"); n != 0 {
		t.Fatalf("parked row was retried %d times", n)
	}
	if n := count(t, s, "SELECT count(*) FROM kernel_event_outbox WHERE parked_at IS NULL AND id NOT IN (SELECT id FROM kernel_event_outbox_undelivered)"); n != 2 {
		t.Fatalf("%d delivered, want 2", n)
	}
	if a, r := deliveredCount(t, reg, kernel.StatusAccepted), deliveredCount(t, reg, kernel.StatusRepeated); a != 2 || r != 0 {
		t.Fatalf("delivered %v accepted and %v repeated, want 2 and 0", a, r)
	}
	if err := testutil.GatherAndCompare(reg, strings.NewReader(`
# HELP reckon_outbox_parked_total Outbox rows parked because the journal answered conflict.
# TYPE reckon_outbox_parked_total counter
reckon_outbox_parked_total 1
`), "reckon_outbox_parked_total"); err != nil {
		t.Fatalf("parked counter: %v", err)
	}
	parked, err := outbox.ListParked(ctx, s.Pool, 10)
	if err != nil || len(parked) != 1 || parked[0].Key != evs[1].Key() {
		t.Fatalf("ListParked: %v %v", parked, err)
	}
	// The journal still holds the original payload.
	stored, _ := j.Event(ctx, evs[1].Key())
	if string(stored.Data) == string(evs[1].Data) {
		t.Fatal("conflict overwrote the journal")
	}
}

// counting records how many times each key reached the journal.
type counting struct {
	j    kernel.Journal
	mu   sync.Mutex
	seen map[kernel.EventKey]int
}

func (c *counting) Ingest(ctx context.Context, evs []kernel.Event) ([]kernel.IngestResult, error) {
	c.mu.Lock()
	for _, e := range evs {
		c.seen[e.Key()]++
	}
	c.mu.Unlock()
	return c.j.Ingest(ctx, evs)
}

func TestTwoPublishersDeliverEachRowOnce(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	s := pgtest.New(t)
	c := &counting{j: journal.New(s.Pool, nil), seen: map[kernel.EventKey]int{}}
	const n = 2000
	var wg sync.WaitGroup
	for i := 0; i < 2; i++ {
		p := outbox.NewPublisher(s.Pool, c, outbox.Config{BatchSize: 100, PollInterval: time.Millisecond}, nil, zerolog.Nop())
		wg.Add(1)
		go func() {
			defer wg.Done()
			_ = p.Run(ctx)
		}()
	}
	// Enqueue while the publishers run, in many small transactions.
	for b := 0; b < n/100; b++ {
		enqueue(t, s, events(fmt.Sprintf("r%d", b), 100)...)
	}
	reckontest.Eventually(t, 30*time.Second, "the outbox to drain", func() bool {
		return count(t, s, "SELECT count(*) FROM kernel_event_outbox_undelivered") == 0
	})
	cancel()
	wg.Wait()
	if got := count(t, s, "SELECT count(*) FROM journal_events"); got != n {
		t.Fatalf("journal rows %d, want %d", got, n)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.seen) != n {
		t.Fatalf("%d distinct keys delivered, want %d", len(c.seen), n)
	}
	for k, times := range c.seen {
		if times != 1 {
			t.Fatalf("%s delivered %d times", k, times)
		}
	}
}

// The HTTP journal carries what a caller may legitimately ingest: an
// agent's outbox under its own source, with its agent token. Kernel events
// are delivered in-process (the publisher in the journal's database): the
// ingest API refuses them, and the publisher keeps them undelivered.
func TestPublisherThroughHTTPIngestAPI(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := pgtest.New(t)
	tokens, err := auth.Parse("pub:agent:publisher-secret,ro:reader:reader-secret")
	if err != nil {
		t.Fatal(err)
	}
	api := httpapi.New(httpapi.Config{Tokens: tokens, Log: zerolog.Nop(), Journal: journal.New(s.Pool, nil)})
	srv := httptest.NewServer(api)
	defer srv.Close()

	evs := agentEvents("http", 120)
	enqueue(t, s, evs...)
	// A reader token cannot ingest: the delivery fails and is retried, not dropped.
	bad := outbox.NewPublisher(s.Pool, httpapi.NewJournalClient(srv.URL, "reader-secret"), fastCfg(), nil, zerolog.Nop())
	if _, err := bad.PublishOnce(ctx); err == nil {
		t.Fatal("reader token delivered events")
	}
	if n := count(t, s, "SELECT count(*) FROM journal_events"); n != 0 {
		t.Fatalf("%d journal rows after forbidden delivery", n)
	}
	waitDue(t, s)
	p := outbox.NewPublisher(s.Pool, httpapi.NewJournalClient(srv.URL, "publisher-secret"), fastCfg(), nil, zerolog.Nop())
	drain(t, p)
	if n := count(t, s, "SELECT count(*) FROM journal_events"); n != 120 {
		t.Fatalf("journal rows %d, want 120", n)
	}
	if n := count(t, s, "SELECT count(*) FROM kernel_event_outbox_undelivered"); n != 0 {
		t.Fatalf("%d undelivered", n)
	}

	// A kernel event through the HTTP journal is refused (403) and stays
	// undelivered, waiting for an in-process publisher.
	enqueue(t, s, events("kern", 1)...)
	_, err = p.PublishOnce(ctx)
	if kernel.ErrorCode(err) != kernel.EForbidden || !strings.Contains(err.Error(), "source_id") {
		t.Fatalf("kernel event over HTTP: %v, want a 403 naming source_id", err)
	}
	if n := count(t, s, "SELECT count(*) FROM kernel_event_outbox WHERE source_id = 'kernel' AND id IN (SELECT id FROM kernel_event_outbox_undelivered)"); n != 1 {
		t.Fatalf("kernel row: %d undelivered, want 1", n)
	}
	if n := count(t, s, "SELECT count(*) FROM journal_events WHERE source_id = 'kernel'"); n != 0 {
		t.Fatalf("%d kernel rows reached the journal over HTTP", n)
	}
	in := outbox.NewPublisher(s.Pool, journal.New(s.Pool, nil), fastCfg(), nil, zerolog.Nop())
	waitDue(t, s)
	drain(t, in)
	if n := count(t, s, "SELECT count(*) FROM journal_events WHERE source_id = 'kernel'"); n != 1 {
		t.Fatalf("in-process delivery: %d kernel rows, want 1", n)
	}
}

// httpPublisherSetup serves the ingest API to an agent token "pub",
// counting the requests to /v1/events.
func httpPublisherSetup(t *testing.T, s *pgtest.Schema) (url string, posts *atomic.Int64) {
	t.Helper()
	tokens, err := auth.Parse("pub:agent:publisher-secret")
	if err != nil {
		t.Fatal(err)
	}
	api := httpapi.New(httpapi.Config{Tokens: tokens, Log: zerolog.Nop(), Journal: journal.New(s.Pool, nil)})
	posts = new(atomic.Int64)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/v1/events" {
			posts.Add(1)
		}
		api.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	return srv.URL, posts
}

// agentEvents are events of an agent's run "run" under the source "pub".
func agentEvents(run string, n int) []kernel.Event {
	evs := events(run, n)
	for i := range evs {
		evs[i].SourceID, evs[i].Actor = "pub", "agent"
	}
	return evs
}

// One event the ingest API refuses to the publisher's token does not
// hold back its batch: the others are delivered in the same pass, and
// only the refused rows stay due, with the refusal as their last error.
func TestHTTPPublisherDeliversAroundARefusedEvent(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := pgtest.New(t)
	url, posts := httpPublisherSetup(t, s)
	a := agentEvents("a", 30)
	kern := events("kern", 2)
	// One Enqueue: the rows keep this order, the kernel events at 10 and 21.
	enqueue(t, s, slices.Concat(a[:10], kern[:1], a[10:20], kern[1:], a[20:])...)
	cfg := fastCfg()
	cfg.BaseBackoff, cfg.MaxBackoff = time.Hour, time.Hour
	p := outbox.NewPublisher(s.Pool, httpapi.NewJournalClient(url, "publisher-secret"), cfg, nil, zerolog.Nop())
	n, err := p.PublishOnce(ctx)
	if n != 32 || kernel.ErrorCode(err) != kernel.EForbidden || !strings.Contains(err.Error(), "2 of 32 events left undelivered") || !strings.Contains(err.Error(), "source_id") {
		t.Fatalf("PublishOnce: %d, %v; want 32 claimed and a 403 naming the 2 refused events", n, err)
	}
	if got := count(t, s, "SELECT count(*) FROM journal_events WHERE source_id = 'pub'"); got != 30 {
		t.Fatalf("%d agent events delivered, want all 30 in the one pass", got)
	}
	if got := count(t, s, `SELECT count(*) FROM kernel_event_outbox WHERE source_id = 'kernel' AND id IN (SELECT id FROM kernel_event_outbox_undelivered)
		AND attempts = 1 AND last_error LIKE '%source_id%'
		AND id IN (SELECT id FROM kernel_event_outbox_undelivered WHERE next_attempt_at > now() + interval '30 minutes')`); got != 2 {
		t.Fatalf("%d kernel rows left due later with the refusal, want 2", got)
	}
	if got := count(t, s, "SELECT count(*) FROM journal_events WHERE source_id = 'kernel'"); got != 0 {
		t.Fatalf("%d kernel events reached the journal over HTTP", got)
	}
	// Refused at 10, then [0,10) delivered, then the rest refused at its
	// 10th, and its two parts delivered: 5 requests, not one per event.
	if got := posts.Load(); got != 5 {
		t.Fatalf("%d requests, want 5", got)
	}
}

// A batch of mostly refused events spends at most maxRefusalsPerPass
// requests a pass; what it did not judge stays due, untouched, for the next
// pass, which delivers the good events behind it.
func TestHTTPPublisherBoundsRefusalsPerPass(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := pgtest.New(t)
	url, posts := httpPublisherSetup(t, s)
	enqueue(t, s, slices.Concat(events("kern", 20), agentEvents("a", 5))...)
	cfg := fastCfg()
	cfg.BaseBackoff, cfg.MaxBackoff = time.Hour, time.Hour
	p := outbox.NewPublisher(s.Pool, httpapi.NewJournalClient(url, "publisher-secret"), cfg, nil, zerolog.Nop())
	if _, err := p.PublishOnce(ctx); kernel.ErrorCode(err) != kernel.EForbidden {
		t.Fatalf("first pass: %v, want a 403", err)
	}
	if got := posts.Load(); got != 16 {
		t.Fatalf("first pass: %d requests, want 16 (one per refusal)", got)
	}
	if got := count(t, s, "SELECT count(*) FROM kernel_event_outbox WHERE attempts = 0 AND id IN (SELECT id FROM kernel_event_outbox_undelivered WHERE next_attempt_at <= now())"); got != 9 {
		t.Fatalf("%d rows left due and untouched, want 9", got)
	}
	if _, err := p.PublishOnce(ctx); kernel.ErrorCode(err) != kernel.EForbidden {
		t.Fatalf("second pass: %v, want a 403", err)
	}
	if got := count(t, s, "SELECT count(*) FROM journal_events WHERE source_id = 'pub'"); got != 5 {
		t.Fatalf("%d agent events delivered after two passes, want 5", got)
	}
	if got := count(t, s, "SELECT count(*) FROM kernel_event_outbox WHERE source_id = 'kernel' AND attempts = 1 AND id IN (SELECT id FROM kernel_event_outbox_undelivered)"); got != 20 {
		t.Fatalf("%d kernel rows deferred once, want 20", got)
	}
	if n, err := p.PublishOnce(ctx); n != 0 || err != nil {
		t.Fatalf("third pass: %d, %v; want nothing due", n, err)
	}
}

func TestPruneDeletesOnlyOldDeliveredRows(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := pgtest.New(t)
	enqueue(t, s, events("p", 10)...)
	p := outbox.NewPublisher(s.Pool, journal.New(s.Pool, nil), outbox.Config{Retention: time.Hour}, nil, zerolog.Nop())
	drain(t, p)
	enqueue(t, s, events("q", 3)...) // pending, never pruned, old or not
	exec(t, s, "UPDATE kernel_event_outbox SET created_at = now() - interval '2 hours' WHERE event_id LIKE 'p/op-1%' OR event_id LIKE 'q/%'")
	// Parked: kept for an operator, however old.
	exec(t, s, "UPDATE kernel_event_outbox SET created_at = now() - interval '2 hours', parked_at = now() WHERE event_id = 'p/op-2/started'")
	n, err := p.Prune(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if n != 1 {
		t.Fatalf("pruned %d, want 1 (p/op-1)", n)
	}
	if got := count(t, s, "SELECT count(*) FROM kernel_event_outbox"); got != 12 {
		t.Fatalf("%d rows left, want 12", got)
	}
}

func TestInvalidRowIsParkedWithoutBlockingItsBatch(t *testing.T) {
	t.Parallel()
	s := pgtest.New(t)
	enqueue(t, s, events("v", 5)...)
	// A row written by something that skipped validation.
	exec(t, s, `UPDATE kernel_event_outbox SET event = jsonb_set(event, '{type}', '"tool.sideways"') WHERE event_id = 'v/op-2/started'`)
	p := outbox.NewPublisher(s.Pool, journal.New(s.Pool, nil), fastCfg(), nil, zerolog.Nop())
	drain(t, p)
	if n := count(t, s, "SELECT count(*) FROM journal_events"); n != 4 {
		t.Fatalf("%d journal rows, want 4", n)
	}
	if n := count(t, s, "SELECT count(*) FROM kernel_event_outbox WHERE parked_at IS NOT NULL AND event_id = 'v/op-2/started'"); n != 1 {
		t.Fatal("invalid row not parked")
	}
}

// TestInTransactionDeliveryFailureIsRetried exercises the one-commit path of
// the in-process journal: an ingest that fails inside the claim transaction
// rolls back to its savepoint, the retry is recorded in the same
// transaction, and nothing reaches the journal until the cause is gone.
func TestInTransactionDeliveryFailureIsRetried(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := pgtest.New(t)
	exec(t, s, `
CREATE FUNCTION refuse() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN RAISE EXCEPTION 'journal refuses writes'; END $$;
CREATE TRIGGER refuse BEFORE INSERT ON journal_events FOR EACH ROW EXECUTE FUNCTION refuse();`)
	enqueue(t, s, events("tx", 5)...)
	p := outbox.NewPublisher(s.Pool, journal.New(s.Pool, nil), fastCfg(), nil, zerolog.Nop())
	if _, err := p.PublishOnce(ctx); err == nil || !strings.Contains(err.Error(), "journal refuses writes") {
		t.Fatalf("PublishOnce: %v", err)
	}
	if n := count(t, s, "SELECT count(*) FROM kernel_event_outbox WHERE attempts = 1 AND last_error LIKE '%journal refuses writes%' AND id IN (SELECT id FROM kernel_event_outbox_undelivered)"); n != 5 {
		t.Fatalf("%d rows carry the recorded retry, want 5", n)
	}
	if n := count(t, s, "SELECT count(*) FROM journal_events"); n != 0 {
		t.Fatalf("%d journal rows survived the rolled-back savepoint", n)
	}
	exec(t, s, "DROP TRIGGER refuse ON journal_events")
	waitDue(t, s)
	drain(t, p)
	if n := count(t, s, "SELECT count(*) FROM journal_events"); n != 5 {
		t.Fatalf("%d journal rows, want 5", n)
	}
}

// failing answers every delivery with err.
type failing struct{ err error }

func (f failing) Ingest(context.Context, []kernel.Event) ([]kernel.IngestResult, error) {
	return nil, f.err
}

// A delivery error longer than last_error keeps is cut on a rune boundary:
// a cut through "é" is invalid UTF-8, which PostgreSQL refuses, and the
// retry could not be scheduled.
func TestLongDeliveryErrorIsStoredOnARuneBoundary(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := pgtest.New(t)
	enqueue(t, s, events("r", 1)...)
	msg := strings.Repeat("x", 1999) + "é and more" // "é" is bytes 2000 and 2001
	p := outbox.NewPublisher(s.Pool, failing{errors.New(msg)}, fastCfg(), nil, zerolog.Nop())
	if _, err := p.PublishOnce(ctx); err == nil || strings.Contains(err.Error(), "schedule retry") {
		t.Fatalf("publish: %v", err)
	}
	var stored string
	var attempts int
	if err := s.Pool.QueryRow(ctx, `SELECT last_error, attempts FROM kernel_event_outbox`).Scan(&stored, &attempts); err != nil {
		t.Fatal(err)
	}
	if attempts != 1 || stored != strings.Repeat("x", 1999) {
		t.Fatalf("attempts %d, last_error %d bytes ending %q", attempts, len(stored), stored[len(stored)-3:])
	}
}

// picky is a journal reached without IngestTx (as over HTTP) that rejects
// as invalid any request holding the poisoned event, or more than max
// events (as the ingest API answers 413 to an oversized body).
type picky struct {
	j      *journal.Store
	poison string
	max    int
}

func (p picky) Ingest(ctx context.Context, evs []kernel.Event) ([]kernel.IngestResult, error) {
	if len(evs) > p.max {
		return nil, kernel.Errorf(kernel.EInvalid, "ingest API 413: request body too large")
	}
	for _, ev := range evs {
		if ev.EventID == p.poison {
			return nil, kernel.Errorf(kernel.EInvalid, "ingest API 400: events[%s]: data is not valid here", ev.EventID)
		}
	}
	return p.j.Ingest(ctx, evs)
}

// A batch the journal rejects as a whole is not retried as a whole forever:
// its events go one at a time, the good ones are delivered, and only the
// one the journal rejects alone is parked, with the journal's reason.
func TestRejectedBatchIsDeliveredOneByOne(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name, poison string
		max          int
		parked       int
	}{
		{"one bad event", "v/op-2/started", 100, 1},
		{"batch too large", "", 3, 0},
		{"both", "v/op-4/started", 3, 1},
	} {
		s := pgtest.New(t)
		enqueue(t, s, events("v", 5)...)
		p := outbox.NewPublisher(s.Pool, picky{j: journal.New(s.Pool, nil), poison: c.poison, max: c.max}, fastCfg(), nil, zerolog.Nop())
		drain(t, p)
		if n := count(t, s, "SELECT count(*) FROM journal_events"); n != 5-c.parked {
			t.Errorf("%s: %d journal rows, want %d", c.name, n, 5-c.parked)
		}
		if n := count(t, s, "SELECT count(*) FROM kernel_event_outbox WHERE id IN (SELECT id FROM kernel_event_outbox_undelivered)"); n != 0 {
			t.Errorf("%s: %d rows still waiting", c.name, n)
		}
		if c.poison != "" {
			var reason string
			if err := s.Pool.QueryRow(context.Background(), `SELECT park_reason FROM kernel_event_outbox WHERE parked_at IS NOT NULL AND event_id = $1`, c.poison).Scan(&reason); err != nil || !strings.Contains(reason, "not valid here") {
				t.Errorf("%s: poisoned row park reason %q (%v)", c.name, reason, err)
			}
		}
	}
}

// Pending reads what is on its way by the event's own fields, and nothing
// delivered.
func TestPendingFiltersByRunOperationAndType(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := pgtest.New(t)
	a, b := events("run-a", 3), events("run-b", 2)
	enqueue(t, s, a[0])
	drain(t, outbox.NewPublisher(s.Pool, journal.New(s.Pool, nil), fastCfg(), nil, zerolog.Nop()))
	enqueue(t, s, append(a[1:], b...)...)
	all, err := outbox.Pending(ctx, s.Pool, outbox.PendingFilter{Project: a[0].Project})
	if err != nil || len(all) != 4 || all[0].Key() != a[1].Key() {
		t.Fatalf("pending of the project: %v %v", all, err)
	}
	run, _ := outbox.Pending(ctx, s.Pool, outbox.PendingFilter{Project: a[0].Project, RunID: "run-b"})
	op, _ := outbox.Pending(ctx, s.Pool, outbox.PendingFilter{Project: a[0].Project, RunID: "run-a", OperationID: a[2].OperationID()})
	typ, _ := outbox.Pending(ctx, s.Pool, outbox.PendingFilter{Project: a[0].Project, Types: []string{kernel.TypeSupervisorVerdict}})
	if len(run) != 2 || len(op) != 1 || op[0].Key() != a[2].Key() || len(typ) != 0 {
		t.Fatalf("filters: run %d, operation %v, type %d", len(run), op, len(typ))
	}
	if _, err := outbox.Pending(ctx, s.Pool, outbox.PendingFilter{}); err == nil {
		t.Fatal("a filter without a project was accepted")
	}
}

// TestPendingOfAnOperationIsTheJournalsOperation: an event is pending for
// the operation the journal will record for it (its operation_id column,
// which Prepare fills from data's operation_id by its exact name, and only
// from a string), the operation Event.OperationID names, not another
// reading of its data: a run.completed whose data carries "operation_id":
// 5 (a member no type declares, kept) belongs to no operation.
func TestPendingOfAnOperationIsTheJournalsOperation(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := pgtest.New(t)
	started := events("r", 6)[5] // operation op-5
	odd := kernel.Event{SourceID: kernel.SourceKernel, EventID: "r/completed", Project: started.Project, RunID: "r",
		Type: kernel.TypeRunCompleted, TS: started.TS, Actor: "kernel", Data: []byte(`{"operation_id":5}`)}
	if odd.OperationID() != "" {
		t.Fatalf("OperationID of %s = %q, want none", odd.Data, odd.OperationID())
	}
	enqueue(t, s, started, odd)
	for _, op := range []string{"op-5", "5"} {
		got, err := outbox.Pending(ctx, s.Pool, outbox.PendingFilter{Project: started.Project, RunID: "r", OperationID: op})
		if err != nil {
			t.Fatal(err)
		}
		var keys []string
		for _, e := range got {
			keys = append(keys, e.EventID)
		}
		if want := map[string]int{"op-5": 1, "5": 0}[op]; len(got) != want || (want == 1 && got[0].Key() != started.Key()) {
			t.Fatalf("pending of operation %q: %v, want %d (the tool.started only)", op, keys, want)
		}
	}
	if n, err := outbox.PendingCount(ctx, s.Pool, kernel.RunKey{Project: started.Project, RunID: "r"}); err != nil || n != 2 {
		t.Fatalf("pending of the run: %d, %v; want both", n, err)
	}
}

// TestMaintenanceRunsEveryTask: each WithMaintenance adds a task (the
// journal's repair and the evidence retention both run), one failing does
// not stop the next, and the loop repeats every PruneEvery.
func TestMaintenanceRunsEveryTask(t *testing.T) {
	t.Parallel()
	s := pgtest.New(t)
	var first, second atomic.Int64
	cfg := fastCfg()
	cfg.PruneEvery = 5 * time.Millisecond
	p := outbox.NewPublisher(s.Pool, journal.New(s.Pool, nil), cfg, nil, zerolog.Nop()).
		WithMaintenance("failing task", "-", func(context.Context) (int64, error) {
			first.Add(1)
			return 0, errors.New("down")
		}).
		WithMaintenance("second task", "rows changed", func(context.Context) (int64, error) { return second.Add(1), nil })
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = p.Run(ctx) }()
	deadline := time.Now().Add(10 * time.Second)
	for (first.Load() < 2 || second.Load() < 2) && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	cancel()
	<-done
	if first.Load() < 2 || second.Load() < 2 {
		t.Fatalf("maintenance ran the tasks %d and %d times, want each at least twice", first.Load(), second.Load())
	}
}

// TestBadRowsAreParkedNotDropped: rows written past Enqueue (corruption, an
// older version) that hold no event, or an event the journal refuses, are
// parked with a reason a person can act on, and the valid rows of the same
// batch are delivered, in order.
func TestBadRowsAreParkedNotDropped(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := pgtest.New(t)
	good := events("g", 4)
	enqueue(t, s, good[:2]...)
	invalid := good[0]
	invalid.EventID, invalid.Actor = "g/bad-actor", "robot"
	body, err := json.Marshal(invalid)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range []struct{ id, body string }{{"g/not-an-event", `[1, 2]`}, {"g/bad-actor", string(body)}} {
		if _, err := s.Pool.Exec(ctx, `INSERT INTO kernel_event_outbox (source_id, event_id, event, payload_digest)
VALUES ('kernel', $1, $2::jsonb, '\x00')`, r.id, r.body); err != nil {
			t.Fatal(err)
		}
	}
	enqueue(t, s, good[2:]...)
	drain(t, outbox.NewPublisher(s.Pool, journal.New(s.Pool, nil), fastCfg(), nil, zerolog.Nop()))

	rows, err := s.Pool.Query(ctx, `SELECT event_id, park_reason FROM kernel_event_outbox WHERE parked_at IS NOT NULL ORDER BY event_id`)
	if err != nil {
		t.Fatal(err)
	}
	parked := map[string]string{}
	for rows.Next() {
		var id, reason string
		if err := rows.Scan(&id, &reason); err != nil {
			t.Fatal(err)
		}
		parked[id] = reason
	}
	if rows.Err() != nil {
		t.Fatal(rows.Err())
	}
	if len(parked) != 2 || parked["g/not-an-event"] != "outbox row does not hold an event" ||
		!strings.Contains(parked["g/bad-actor"], `field "actor"`) {
		t.Fatalf("parked rows: %q", parked)
	}
	var order []string
	evs, err := journal.New(s.Pool, nil).RunEvents(ctx, "acme", "g")
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range evs {
		order = append(order, e.EventID)
	}
	want := []string{good[0].EventID, good[1].EventID, good[2].EventID, good[3].EventID}
	if !slices.Equal(order, want) {
		t.Fatalf("journal holds %v, want %v", order, want)
	}
	if n := count(t, s, "SELECT count(*) FROM kernel_event_outbox WHERE id IN (SELECT id FROM kernel_event_outbox_undelivered)"); n != 0 {
		t.Fatalf("%d rows still waiting", n)
	}
}

// An answer of the ingest API that says nothing about the events — a
// request timeout (408, documented on POST /v1/events), a rate limit
// (429), a proxy's or a wrong URL's 404 — is retried, never taken for a
// rejection of the events and parked as "journal rejected the event",
// valid events and all.
func TestPublisherRetriesHTTPAnswersThatRejectNoEvent(t *testing.T) {
	t.Parallel()
	for _, code := range []int{http.StatusRequestTimeout, http.StatusTooManyRequests, http.StatusNotFound} {
		t.Run(strconv.Itoa(code), func(t *testing.T) {
			t.Parallel()
			s := pgtest.New(t)
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
				w.Header().Set("Content-Type", "application/json")
				w.WriteHeader(code)
				_, _ = w.Write([]byte(`{"error": "not now"}`))
			}))
			defer srv.Close()
			evs := agentEvents("transient", 3)
			enqueue(t, s, evs...)
			p := outbox.NewPublisher(s.Pool, httpapi.NewJournalClient(srv.URL, "secret"), fastCfg(), nil, zerolog.Nop())
			if _, err := p.PublishOnce(context.Background()); err == nil {
				t.Fatalf("%d: delivery succeeded", code)
			}
			if n := count(t, s, "SELECT count(*) FROM kernel_event_outbox WHERE parked_at IS NOT NULL"); n != 0 {
				t.Fatalf("%d: %d rows parked; a %d rejects no event", code, n, code)
			}
			if n := count(t, s, "SELECT count(*) FROM kernel_event_outbox WHERE id IN (SELECT id FROM kernel_event_outbox_undelivered) AND attempts = 1"); n != 3 {
				t.Fatalf("%d: %d rows scheduled for a retry, want 3", code, n)
			}
		})
	}
}

// deliveredCount is reckon_outbox_delivered_total{status} in reg, 0
// before the first of that status.
func deliveredCount(t *testing.T, reg *prometheus.Registry, status string) float64 {
	t.Helper()
	n, _ := reckontest.Sample(t, reg, "reckon_outbox_delivered_total", map[string]string{"status": status})
	return n
}
