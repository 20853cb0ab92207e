package webhook

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/rs/zerolog"

	"github.com/seed-7bc021c3/reckon/kernel"
	"github.com/seed-7bc021c3/reckon/platform/backoff"
	"github.com/seed-7bc021c3/reckon/platform/config"
	"github.com/seed-7bc021c3/reckon/platform/defaults"
)

// Config tunes a Deliverer. Zero values take the defaults.
type Config struct {
	// Endpoints are RECKON_WEBHOOKS' (config.Config.Webhooks).
	Endpoints []config.Webhook
	// BatchSize bounds the rows one pass claims; default 100.
	BatchSize int
	// Concurrency bounds the endpoints delivered to at once; default 8.
	Concurrency int
	// Timeout bounds one attempt; default 15s (the convention's 15 to
	// 30 s). A claim's lease is twice it and 5 s more.
	Timeout time.Duration
	// BaseBackoff and MaxBackoff shape the retry delays
	// (backoff.Jittered: after n failed attempts, between BaseBackoff and
	// BaseBackoff·2^(n-1), at most MaxBackoff); defaults 5s and 5m. The
	// cap bounds how long after a receiver comes back its notifications
	// arrive.
	BaseBackoff, MaxBackoff time.Duration
	// PollInterval is the wait after a pass that found nothing due;
	// default 500ms.
	PollInterval time.Duration
	// Client sends the requests; default one that follows no redirect
	// (a 3xx is a failed attempt: the convention asks for the URL to be
	// updated instead).
	Client *http.Client
	// Now is the clock of the webhook-timestamp header; default time.Now.
	Now func() time.Time
}

func (c Config) withDefaults() Config {
	c.BatchSize = defaults.Positive(c.BatchSize, 100)
	c.Concurrency = defaults.Positive(c.Concurrency, 8)
	c.Timeout = defaults.Positive(c.Timeout, 15*time.Second)
	c.BaseBackoff = defaults.Positive(c.BaseBackoff, 5*time.Second)
	c.MaxBackoff = defaults.Positive(c.MaxBackoff, 5*time.Minute)
	c.PollInterval = defaults.Positive(c.PollInterval, 500*time.Millisecond)
	if c.Client == nil {
		c.Client = &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	return c
}

// endpoint is one configured endpoint under its id.
type endpoint struct {
	id string
	config.Webhook
}

// EndpointID names an endpoint in the database, the metrics and the logs:
// "wh_" and 16 hex digits of a digest of its URL, never the URL itself
// (an incoming-webhook URL is a secret).
func EndpointID(rawURL string) string {
	sum := sha256.Sum256([]byte(rawURL))
	return "wh_" + hex.EncodeToString(sum[:8])
}

// EndpointIDs are the ids of ws, in order.
func EndpointIDs(ws []config.Webhook) []string {
	ids := make([]string, len(ws))
	for i, w := range ws {
		ids[i] = EndpointID(w.URL)
	}
	return ids
}

// Deliverer drains webhook_deliveries to the configured endpoints.
// Several run at once safely, in one process or many: each claims rows
// under a lease with FOR UPDATE SKIP LOCKED. A deliverer sends only the
// rows of endpoints it knows; every delivering process of a database is
// meant to have the same RECKON_WEBHOOKS.
type Deliverer struct {
	pool      *pgxpool.Pool
	cfg       Config
	endpoints map[string]endpoint
	ids       []string
	m         *Metrics
	log       zerolog.Logger
}

// New returns a deliverer from pool's webhook_deliveries to cfg's
// endpoints; m may be nil (no metrics).
func New(pool *pgxpool.Pool, cfg Config, m *Metrics, log zerolog.Logger) *Deliverer {
	cfg = cfg.withDefaults()
	if m == nil {
		m = NewMetrics(nil, nil, nil)
	}
	d := &Deliverer{pool: pool, cfg: cfg, endpoints: map[string]endpoint{}, m: m, log: log}
	for _, w := range cfg.Endpoints {
		id := EndpointID(w.URL)
		d.endpoints[id] = endpoint{id: id, Webhook: w}
		d.ids = append(d.ids, id)
	}
	return d
}

// Register makes the database's endpoints this deliverer's: each is
// registered for its events (from the next transaction on, writers write
// its notifications) and every other is dropped with its undelivered rows
// (an endpoint taken out of the configuration is no longer notified). It
// logs each endpoint by id and host, and what it dropped.
func (d *Deliverer) Register(ctx context.Context) error {
	tx, err := d.pool.Begin(ctx)
	if err != nil {
		return fmt.Errorf("webhook: register: %w", err)
	}
	defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }()
	var dropped int64
	b := &pgx.Batch{}
	b.Queue(undeliveredOfOthersSQL, d.ids).QueryRow(func(row pgx.Row) error { return row.Scan(&dropped) })
	b.Queue(dropOthersSQL, d.ids)
	for _, id := range d.ids {
		b.Queue(registerSQL, id, d.endpoints[id].Events)
	}
	if err := tx.SendBatch(ctx, b).Close(); err != nil {
		return fmt.Errorf("webhook: register %d endpoints: %w", len(d.ids), err)
	}
	if err := tx.Commit(ctx); err != nil {
		return fmt.Errorf("webhook: register: commit: %w", err)
	}
	for _, id := range d.ids {
		e := d.endpoints[id]
		d.log.Info().Str("endpoint", id).Str("host", host(e.URL)).Strs("events", e.Events).Msg("webhook endpoint registered")
	}
	if dropped > 0 {
		d.log.Warn().Int64("undelivered", dropped).Msg("webhook endpoints no longer configured were dropped with their undelivered notifications")
	}
	return nil
}

// host is the host of a configured URL, for the logs.
func host(rawURL string) string {
	u, err := url.Parse(rawURL)
	if err != nil {
		return "?"
	}
	return u.Host
}

// Run registers the endpoints, then delivers until ctx ends. A
// registration or a pass that fails as a whole (the database unreachable)
// is retried after a capped backoff. Delivered rows are pruned by the
// publishers' maintenance (Prune).
func (d *Deliverer) Run(ctx context.Context) error {
	for failures := 1; ; failures++ {
		err := d.Register(ctx)
		if err == nil {
			break
		}
		if failures == 1 {
			d.log.Warn().Err(err).Msg("webhook endpoints not registered; retrying with backoff, nothing is delivered until they are")
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(backoff.Jittered(d.cfg.PollInterval, outageBackoff, failures-1)):
		}
	}
	failures := 0
	for {
		n, err := d.DeliverOnce(ctx)
		if ctx.Err() != nil {
			return nil
		}
		wait := d.cfg.PollInterval
		if err != nil {
			if failures == 0 {
				d.log.Warn().Err(err).Msg("webhook deliverer cannot claim notifications; retrying with backoff")
			}
			failures++
			wait = backoff.Jittered(d.cfg.PollInterval, outageBackoff, failures-1)
		} else {
			failures = 0
		}
		if err != nil || n < d.cfg.BatchSize {
			select {
			case <-ctx.Done():
				return nil
			case <-time.After(wait):
			}
		}
	}
}

// outageBackoff caps the wait between passes that fail as a whole.
const outageBackoff = 10 * time.Second

// Retention is how long delivered rows are kept: the same fact written
// again within it (a retried activity) is recognized as sent, as the
// outbox recognizes an event enqueued again within its own retention.
const Retention = 24 * time.Hour

// Prune deletes the rows delivered longer ago than Retention and returns
// how many: a task of the publishers' maintenance loop, whether or not
// the process delivers webhooks.
func Prune(ctx context.Context, pool *pgxpool.Pool) (int64, error) {
	var total int64
	for {
		tag, err := pool.Exec(ctx, pruneSQL, Retention.Seconds(), 5000)
		if err != nil {
			return total, fmt.Errorf("webhook: prune: %w", err)
		}
		total += tag.RowsAffected()
		if tag.RowsAffected() < 5000 {
			return total, nil
		}
	}
}

// claimed is one leased row.
type claimed struct {
	id       int64
	endpoint string
	msgID    string
	body     []byte
	attempts int
}

// DeliverOnce leases a batch of due rows and delivers them: each
// endpoint's rows in order, the endpoints Concurrency at a time. It
// returns how many rows it claimed; the error is for a pass that could
// not claim (a failed attempt is the row's, retried later).
func (d *Deliverer) DeliverOnce(ctx context.Context) (int, error) {
	if len(d.ids) == 0 {
		return 0, nil
	}
	lease := 2*d.cfg.Timeout + 5*time.Second
	rows, err := d.pool.Query(ctx, claimSQL, d.ids, d.cfg.BatchSize, lease.Seconds())
	if err != nil {
		return 0, fmt.Errorf("webhook: claim: %w", err)
	}
	var batch []claimed
	var c claimed
	if _, err := pgx.ForEachRow(rows, []any{&c.id, &c.endpoint, &c.msgID, &c.body, &c.attempts}, func() error {
		batch = append(batch, c)
		return nil
	}); err != nil {
		return 0, fmt.Errorf("webhook: claim: %w", err)
	}
	byEndpoint := map[string][]claimed{}
	var order []string
	for _, r := range batch {
		if _, ok := byEndpoint[r.endpoint]; !ok {
			order = append(order, r.endpoint)
		}
		byEndpoint[r.endpoint] = append(byEndpoint[r.endpoint], r)
	}
	sem := make(chan struct{}, d.cfg.Concurrency)
	var wg sync.WaitGroup
	for _, id := range order {
		wg.Add(1)
		sem <- struct{}{}
		go func(e endpoint, rows []claimed) {
			defer func() { <-sem; wg.Done() }()
			d.deliverTo(ctx, e, rows)
		}(d.endpoints[id], byEndpoint[id])
	}
	wg.Wait()
	return len(batch), nil
}

// outcome is one row's attempt.
type outcome struct {
	row    claimed
	status int
	err    error
	// retryAfter is the receiver's Retry-After, when it sent one.
	retryAfter time.Duration
}

// deliverTo sends one endpoint's rows in order and marks them. After a
// failed attempt the endpoint's other rows are not tried in this pass:
// they are postponed with the failed row's delay, so that a receiver that
// is down costs one attempt (and one timeout) per pass, not one per row.
func (d *Deliverer) deliverTo(ctx context.Context, e endpoint, rows []claimed) {
	var delivered []outcome
	var failed *outcome
	var rest []int64
	for i, r := range rows {
		o := d.attempt(ctx, e, r)
		if o.err == nil {
			delivered = append(delivered, o)
			continue
		}
		failed = &o
		for _, x := range rows[i+1:] {
			rest = append(rest, x.id)
		}
		break
	}
	d.mark(ctx, e, delivered, failed, rest)
}

// attempt sends one row, signed for this attempt.
func (d *Deliverer) attempt(ctx context.Context, e endpoint, r claimed) outcome {
	o := outcome{row: r}
	actx, cancel := context.WithTimeout(ctx, d.cfg.Timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(actx, http.MethodPost, e.URL, bytes.NewReader(r.body))
	if err != nil {
		o.err = err
		return o
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", "reckon-webhooks")
	SetHeaders(req.Header, e.Key, r.msgID, d.cfg.Now(), r.body)
	resp, err := d.cfg.Client.Do(req)
	if err != nil {
		o.err = errors.New(kernel.TruncateUTF8(err.Error(), maxError))
		return o
	}
	defer resp.Body.Close()
	// Read (a bounded part of) the answer, so the connection is reused
	// and a failure's body can say why.
	snippet, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
	o.status = resp.StatusCode
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		o.err = fmt.Errorf("the endpoint answered %d: %s", resp.StatusCode, kernel.Storable(string(bytes.TrimSpace(snippet))))
		o.retryAfter = retryAfter(resp.Header.Get("Retry-After"), d.cfg.Now())
	}
	return o
}

// maxError bounds a stored error.
const maxError = 1000

// retryAfter reads a Retry-After header: seconds or an HTTP date; 0 when
// absent or unreadable.
func retryAfter(v string, now time.Time) time.Duration {
	if v == "" {
		return 0
	}
	if s, err := strconv.Atoi(v); err == nil && s > 0 {
		return time.Duration(s) * time.Second
	}
	if t, err := http.ParseTime(v); err == nil && t.After(now) {
		return t.Sub(now)
	}
	return 0
}

// mark records an endpoint's pass in one round trip: the rows delivered,
// the failed one with its backoff, and the rest postponed with it. A mark
// that fails leaves the rows to their lease: due again when it ends,
// delivered again under the same webhook-id.
func (d *Deliverer) mark(ctx context.Context, e endpoint, delivered []outcome, failed *outcome, rest []int64) {
	b := &pgx.Batch{}
	if len(delivered) > 0 {
		ids, statuses := make([]int64, len(delivered)), make([]int32, len(delivered))
		for i, o := range delivered {
			ids[i], statuses[i] = o.row.id, int32(o.status)
		}
		b.Queue(deliveredSQL, ids, statuses)
	}
	if failed != nil {
		delay := backoff.Jittered(d.cfg.BaseBackoff, d.cfg.MaxBackoff, failed.row.attempts)
		if ra := min(failed.retryAfter, d.cfg.MaxBackoff); ra > delay {
			delay = ra
		}
		b.Queue(failedSQL, []int64{failed.row.id}, []float64{delay.Seconds()}, []int32{int32(failed.status)},
			[]string{kernel.TruncateUTF8(failed.err.Error(), maxError)})
		if len(rest) > 0 {
			b.Queue(postponedSQL, rest, delay.Seconds())
		}
		d.log.Warn().Str("endpoint", e.id).Str("host", host(e.URL)).Str("webhook_id", failed.row.msgID).
			Int("attempts", failed.row.attempts+1).Int("status", failed.status).Err(failed.err).
			Dur("retry_in", delay).Int("postponed", len(rest)).Msg("webhook delivery failed; retrying with backoff")
		d.m.attempt(e.id, "failed")
	}
	for range delivered {
		d.m.attempt(e.id, "delivered")
	}
	if b.Len() == 0 {
		return
	}
	if err := d.pool.SendBatch(context.WithoutCancel(ctx), b).Close(); err != nil {
		d.log.Warn().Err(err).Str("endpoint", e.id).Msg("webhook deliveries not marked; they are sent again when their lease ends")
	}
}
