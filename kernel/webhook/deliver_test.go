package webhook_test

import (
	"bytes"
	"context"
	"crypto/hmac"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"

	"github.com/seed-7bc021c3/reckon/internal/pgtest"
	"github.com/seed-7bc021c3/reckon/internal/reckontest"
	"github.com/seed-7bc021c3/reckon/kernel"
	"github.com/seed-7bc021c3/reckon/kernel/outbox"
	"github.com/seed-7bc021c3/reckon/kernel/webhook"
	"github.com/seed-7bc021c3/reckon/platform/config"
)

var key = []byte("a-test-signing-key-of-32-bytes!!")

// ruled is an operator's ruling on op of run, as the reconcile path
// enqueues it: a settled notification.
func ruled(run, op, note string) kernel.Event {
	r := reckontest.Run{Project: "acme", RunID: run, Source: kernel.SourceKernel}
	ev := r.Ruling(op, kernel.EffectNone, kernel.EventKey{SourceID: "bot", EventID: run + "/" + op + "/started"}, t0)
	ev.Data, _ = json.Marshal(kernel.Reconciliation{OperationID: op, Effect: kernel.EffectNone, Note: note, Basis: kernel.BasisOperator})
	return ev
}

// unknown is the supervisor's unknown on op of run, with its wall's
// verdict: an attention notification.
func unknown(t *testing.T, run, op string) []kernel.Event {
	t.Helper()
	v, err := kernel.NewEvent(kernel.SourceKernel, run+"/verdict/"+op, "acme", run, kernel.TypeSupervisorVerdict, kernel.ActorSupervisor, t0,
		kernel.Verdict{Kind: kernel.VerdictKindReconciliation, OperationIDs: []string{op}, Supervisor: "builtin"})
	if err != nil {
		t.Fatal(err)
	}
	r, err := kernel.NewEvent(kernel.SourceKernel, run+"/"+op+"/reconciled/wall", "acme", run, kernel.TypeOperationReconciled, kernel.ActorSupervisor, t0,
		kernel.Reconciliation{OperationID: op, Effect: kernel.EffectUnknown, Basis: kernel.BasisInference, Note: "no evidence"})
	if err != nil {
		t.Fatal(err)
	}
	r.ParentEventID = &kernel.EventKey{SourceID: "bot", EventID: run + "/" + op + "/started"}
	return []kernel.Event{v, r}
}

func count(t *testing.T, s *pgtest.Schema, q string, args ...any) int {
	t.Helper()
	var n int
	if err := s.Pool.QueryRow(context.Background(), q, args...).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

func deliverer(s *pgtest.Schema, cfg webhook.Config, reg prometheus.Registerer) *webhook.Deliverer {
	if cfg.BaseBackoff == 0 {
		cfg.BaseBackoff, cfg.MaxBackoff, cfg.PollInterval = 10*time.Millisecond, 150*time.Millisecond, 10*time.Millisecond
	}
	var m *webhook.Metrics
	if reg != nil {
		m = webhook.NewMetrics(reg, s.Pool, webhook.EndpointIDs(cfg.Endpoints))
	}
	return webhook.New(s.Pool, cfg, m, zerolog.Nop())
}

// TestNotificationsCommitWithTheirFact: the outbox writes a reconcile's
// notification in the reconcile's transaction, one row per endpoint that
// asked for its event; a rolled-back transaction leaves none, the same
// fact enqueued again none more, and an event refused as a conflict none
// at all.
func TestNotificationsCommitWithTheirFact(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := pgtest.New(t)
	late := ruled("r-0", "op-0", "enqueued before any endpoint")
	if err := outbox.Enqueue(ctx, s.Pool, late); err != nil {
		t.Fatal(err)
	}
	d := deliverer(s, webhook.Config{Endpoints: []config.Webhook{
		{URL: "http://127.0.0.1:9/pager", Key: key, Events: []string{webhook.EventAttention}},
		{URL: "http://127.0.0.1:9/chat", Key: key, Events: []string{webhook.EventAttention, webhook.EventSettled}},
		{URL: "http://127.0.0.1:9/ops", Key: key, Events: []string{webhook.EventConflictParked}},
	}}, nil)
	if err := d.Register(ctx); err != nil {
		t.Fatal(err)
	}
	rows := func(event string) int {
		return count(t, s, "SELECT count(*) FROM webhook_deliveries WHERE event = $1", event)
	}

	wall := unknown(t, "r-1", "op-1")
	if err := outbox.Enqueue(ctx, s.Pool, wall...); err != nil {
		t.Fatal(err)
	}
	if got := rows(webhook.EventAttention); got != 2 {
		t.Fatalf("attention rows %d, want one per endpoint that asked (2)", got)
	}
	if err := outbox.Enqueue(ctx, s.Pool, wall...); err != nil {
		t.Fatal(err)
	}
	tx := s.Tx(t)
	if err := outbox.Enqueue(ctx, tx, ruled("r-1", "op-1", "checked by hand")); err != nil {
		t.Fatal(err)
	}
	if err := tx.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	if got, settled := rows(webhook.EventAttention), rows(webhook.EventSettled); got != 2 || settled != 0 {
		t.Fatalf("after a repeat and a rollback: attention %d settled %d, want 2 and 0", got, settled)
	}
	tx = s.Tx(t)
	if err := outbox.Enqueue(ctx, tx, ruled("r-1", "op-1", "checked by hand")); err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if got := rows(webhook.EventSettled); got != 1 {
		t.Fatalf("settled rows %d after a committed ruling, want 1 (one endpoint asked)", got)
	}
	changed := ruled("r-0", "op-0", "another payload under the same key")
	if err := outbox.Enqueue(ctx, s.Pool, changed); kernel.ErrorCode(err) != kernel.EConflict {
		t.Fatalf("conflicting enqueue: %v", err)
	}
	if got := rows(webhook.EventSettled); got != 1 {
		t.Fatalf("a conflicting event was announced: settled rows %d", got)
	}
}

// receiver is a local webhook endpoint that records every request and
// answers what its mode says.
type receiver struct {
	mu   sync.Mutex
	got  []received
	mode func(r received, nth int) int // status to answer
}

type received struct {
	id, ts, sig string
	body        []byte
}

func (rc *receiver) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	x := received{id: r.Header.Get(webhook.HeaderID), ts: r.Header.Get(webhook.HeaderTimestamp), sig: r.Header.Get(webhook.HeaderSignature), body: body}
	rc.mu.Lock()
	rc.got = append(rc.got, x)
	status := rc.mode(x, len(rc.got))
	rc.mu.Unlock()
	if status == http.StatusServiceUnavailable {
		w.Header().Set("Retry-After", "0")
	}
	w.WriteHeader(status)
}

func (rc *receiver) snapshot() []received {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return append([]received(nil), rc.got...)
}

// TestReceiverOutageLosesNothing: notifications written while the
// receiver is closed, then answering 503, all arrive once it is back,
// each attempt signed after the Standard Webhooks convention for its own
// timestamp; an attempt the receiver took but failed is sent again under
// the same webhook-id and body. Two deliverers drain the same rows.
func TestReceiverOutageLosesNothing(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := pgtest.New(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close() // the receiver is down: connections are refused
	clock := reckontest.NewClock(time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC))
	cfg := webhook.Config{Now: clock.Now, Endpoints: []config.Webhook{
		{URL: "http://" + addr + "/hook", Key: key, Events: []string{webhook.EventAttention, webhook.EventSettled}}}}
	reg := prometheus.NewRegistry()
	runCtx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	for i, d := range []*webhook.Deliverer{deliverer(s, cfg, reg), deliverer(s, cfg, nil)} {
		if i == 0 {
			if err := d.Register(ctx); err != nil {
				t.Fatal(err)
			}
		}
		wg.Add(1)
		go func() { defer wg.Done(); _ = d.Run(runCtx) }()
	}
	defer func() { cancel(); wg.Wait() }()

	const n = 30
	var want []string
	for i := range n {
		evs := unknown(t, fmt.Sprintf("r-%d", i), "op-1")
		if i%2 == 1 {
			evs = []kernel.Event{ruled(fmt.Sprintf("r-%d", i), "op-1", "checked")}
		}
		if err := outbox.Enqueue(ctx, s.Pool, evs...); err != nil {
			t.Fatal(err)
		}
		ns, _ := webhook.Derive(evs)
		want = append(want, ns[0].MsgID)
	}
	id := webhook.EndpointID(cfg.Endpoints[0].URL)
	reckontest.Eventually(t, 30*time.Second, "attempts against the closed receiver", func() bool {
		return count(t, s, "SELECT count(*) FROM webhook_deliveries WHERE attempts >= 2 AND last_error LIKE '%refused%'") > 0
	})
	if got := reckontest.Value(t, reg, "reckon_webhook_backlog", map[string]string{"endpoint": id}); got != n {
		t.Fatalf("backlog gauge %v during the outage, want %d", got, n)
	}

	rc := &receiver{}
	failedOnce := map[string]bool{}
	rc.mode = func(r received, nth int) int {
		switch {
		case nth <= 5:
			return http.StatusServiceUnavailable // back, but not ready yet
		case !failedOnce[r.id] && len(failedOnce) < 3:
			failedOnce[r.id] = true // taken, then failed: sent again
			return http.StatusInternalServerError
		}
		return http.StatusNoContent
	}
	srv := &http.Server{Handler: rc, ReadHeaderTimeout: 5 * time.Second}
	ln, err = net.Listen("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = srv.Serve(ln) }()
	defer srv.Close()

	reckontest.Eventually(t, 60*time.Second, "every notification delivered", func() bool {
		return count(t, s, "SELECT count(*) FROM webhook_deliveries WHERE delivered_at IS NULL") == 0
	})
	got := rc.snapshot()
	ok := map[string]int{}
	bodies := map[string][]byte{}
	for _, r := range got {
		if r.ts != strconv.FormatInt(clock.Now().Unix(), 10) {
			t.Errorf("webhook-timestamp %q, want the deliverer's clock %d", r.ts, clock.Now().Unix())
		}
		at, _ := strconv.ParseInt(r.ts, 10, 64)
		if want := webhook.Sign(key, r.id, time.Unix(at, 0), r.body); !hmac.Equal([]byte(r.sig), []byte(want)) {
			t.Errorf("%s: signature %q does not verify", r.id, r.sig)
		}
		if b, seen := bodies[r.id]; seen && !bytes.Equal(b, r.body) {
			t.Errorf("%s sent twice with two bodies", r.id)
		}
		bodies[r.id] = r.body
		ok[r.id]++
	}
	for _, m := range want {
		if ok[m] == 0 {
			t.Errorf("notification %s never arrived", m)
		}
	}
	rc.mu.Lock()
	defer rc.mu.Unlock()
	dups := 0
	for id := range failedOnce {
		if ok[id] < 2 {
			t.Errorf("%s failed once and was not sent again", id)
		}
		dups++
	}
	if len(ok) != n || dups != 3 {
		t.Fatalf("%d distinct webhook-ids (want %d), %d failed once (want 3); %d requests", len(ok), n, dups, len(got))
	}
	if got := reckontest.Value(t, reg, "reckon_webhook_backlog", map[string]string{"endpoint": id}); got != 0 {
		t.Fatalf("backlog gauge %v once delivered", got)
	}
	t.Logf("%d notifications, %d requests: %d refused or failed attempts recorded before the receiver came back",
		n, len(got), count(t, s, "SELECT coalesce(sum(attempts), 0) FROM webhook_deliveries")-len(got))
}

// TestDeliverersSendEachRowOnce: three deliverers on one database send
// each of 200 notifications once when the receiver answers at once.
func TestDeliverersSendEachRowOnce(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := pgtest.New(t)
	rc := &receiver{mode: func(received, int) int { return http.StatusOK }}
	srv := &http.Server{Handler: rc, ReadHeaderTimeout: 5 * time.Second}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = srv.Serve(ln) }()
	defer srv.Close()
	cfg := webhook.Config{BatchSize: 7, Endpoints: []config.Webhook{
		{URL: "http://" + ln.Addr().String(), Key: key, Events: []string{webhook.EventSettled}}}}
	if err := deliverer(s, cfg, nil).Register(ctx); err != nil {
		t.Fatal(err)
	}
	const n = 200
	for i := range n {
		if err := outbox.Enqueue(ctx, s.Pool, ruled(fmt.Sprintf("r-%d", i), "op-1", "checked")); err != nil {
			t.Fatal(err)
		}
	}
	runCtx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	for range 3 {
		d := deliverer(s, cfg, nil)
		wg.Add(1)
		go func() { defer wg.Done(); _ = d.Run(runCtx) }()
	}
	reckontest.Eventually(t, 60*time.Second, "every notification delivered", func() bool {
		return count(t, s, "SELECT count(*) FROM webhook_deliveries WHERE delivered_at IS NULL") == 0
	})
	cancel()
	wg.Wait()
	times := map[string]int{}
	for _, r := range rc.snapshot() {
		times[r.id]++
	}
	if len(times) != n {
		t.Fatalf("%d distinct notifications received, want %d", len(times), n)
	}
	for id, k := range times {
		if k != 1 {
			t.Errorf("%s received %d times", id, k)
		}
	}
}

// TestRegisterReplacesTheEndpoints: a deliverer registers its
// configuration's endpoints and drops the others with their undelivered
// rows; a deliverer never claims the rows of an endpoint it does not know.
func TestRegisterReplacesTheEndpoints(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := pgtest.New(t)
	a := config.Webhook{URL: "http://127.0.0.1:9/a", Key: key, Events: []string{webhook.EventSettled}}
	b := config.Webhook{URL: "http://127.0.0.1:9/b", Key: key, Events: []string{webhook.EventSettled}}
	if err := deliverer(s, webhook.Config{Endpoints: []config.Webhook{a, b}}, nil).Register(ctx); err != nil {
		t.Fatal(err)
	}
	if err := outbox.Enqueue(ctx, s.Pool, ruled("r-1", "op-1", "checked")); err != nil {
		t.Fatal(err)
	}
	if got := count(t, s, "SELECT count(*) FROM webhook_deliveries"); got != 2 {
		t.Fatalf("%d rows, want one per endpoint", got)
	}
	onlyB := deliverer(s, webhook.Config{Endpoints: []config.Webhook{b}}, nil)
	if err := onlyB.Register(ctx); err != nil {
		t.Fatal(err)
	}
	if got := count(t, s, "SELECT count(*) FROM webhook_deliveries WHERE endpoint_id = $1", webhook.EndpointID(a.URL)); got != 0 {
		t.Fatalf("the dropped endpoint keeps %d rows", got)
	}
	if got := count(t, s, "SELECT count(*) FROM webhook_endpoints"); got != 1 {
		t.Fatalf("%d endpoints registered, want 1", got)
	}
	none := deliverer(s, webhook.Config{Endpoints: []config.Webhook{{URL: "http://127.0.0.1:9/c", Key: key, Events: []string{webhook.EventSettled}}}}, nil)
	if n, err := none.DeliverOnce(ctx); err != nil || n != 0 {
		t.Fatalf("a deliverer of another endpoint claimed %d rows (%v)", n, err)
	}
}

// TestParkAnnouncesTheConflict: an outbox row the journal answers
// conflict is parked and its conflict.parked notification written in the
// same transaction, naming the event and the reason.
func TestParkAnnouncesTheConflict(t *testing.T) {
	t.Parallel()
	b := reckontest.Setup(t)
	d := deliverer(b.Schema, webhook.Config{Endpoints: []config.Webhook{
		{URL: "http://127.0.0.1:9/ops", Key: key, Events: []string{webhook.EventConflictParked}}}}, nil)
	if err := d.Register(b.Ctx); err != nil {
		t.Fatal(err)
	}
	r := reckontest.Run{Project: "acme", RunID: "r-1", Source: kernel.SourceKernel}
	b.Ingest(r.Completed("op-1", t0))
	changed := r.Completed("op-1", t0.Add(time.Second))
	if err := outbox.Enqueue(b.Ctx, b.Schema.Pool, changed); err != nil {
		t.Fatal(err)
	}
	b.Drain()
	var body string
	if err := b.Schema.Pool.QueryRow(b.Ctx, "SELECT body FROM webhook_deliveries WHERE event = 'conflict.parked'").Scan(&body); err != nil {
		t.Fatalf("no conflict.parked notification: %v", err)
	}
	var p struct {
		Data webhook.ParkedData `json:"data"`
		Text string             `json:"text"`
	}
	if err := json.Unmarshal([]byte(body), &p); err != nil {
		t.Fatal(err)
	}
	if p.Data.Event != changed.Key() || p.Data.RunID != "r-1" || p.Data.Type != kernel.TypeToolCompleted || !strings.Contains(p.Data.Reason, "different payload") {
		t.Fatalf("parked notification: %s", body)
	}
}

// TestPruneKeepsWhatIsNotDelivered: the prune deletes the rows delivered
// longer ago than the retention, and keeps the recent ones and every
// undelivered row, however old.
func TestPruneKeepsWhatIsNotDelivered(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := pgtest.New(t)
	if _, err := s.Pool.Exec(ctx, `
INSERT INTO webhook_endpoints (id, events) VALUES ('wh_a', '{settled}');
INSERT INTO webhook_deliveries (endpoint_id, msg_id, event, body, created_at, delivered_at) VALUES
    ('wh_a', 'msg_old_delivered', 'settled', '{}', now() - interval '3 days', now() - interval '25 hours'),
    ('wh_a', 'msg_new_delivered', 'settled', '{}', now() - interval '3 days', now() - interval '1 hour'),
    ('wh_a', 'msg_old_waiting', 'settled', '{}', now() - interval '3 days', NULL)`); err != nil {
		t.Fatal(err)
	}
	n, err := webhook.Prune(ctx, s.Pool)
	if err != nil || n != 1 {
		t.Fatalf("pruned %d (%v), want 1", n, err)
	}
	if got := count(t, s, "SELECT count(*) FROM webhook_deliveries WHERE msg_id IN ('msg_new_delivered', 'msg_old_waiting')"); got != 2 {
		t.Fatalf("%d of the recent and the undelivered rows kept, want both", got)
	}
}
