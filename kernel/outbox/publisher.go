package outbox

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"

	"github.com/seed-7bc021c3/reckon/kernel"
	"github.com/seed-7bc021c3/reckon/kernel/pgplan"
	"github.com/seed-7bc021c3/reckon/kernel/webhook"
	"github.com/seed-7bc021c3/reckon/platform/backoff"
	"github.com/seed-7bc021c3/reckon/platform/defaults"
	"github.com/seed-7bc021c3/reckon/platform/promx"
)

// Config tunes a Publisher. Zero values take the defaults.
type Config struct {
	BatchSize    int           // rows per delivery; default 500
	PollInterval time.Duration // idle wait between empty drains; default 100ms
	BaseBackoff  time.Duration // first retry delay; default 500ms
	MaxBackoff   time.Duration // retry delay cap; default 1m
	// OutageBackoff caps the publisher loop's backoff while whole passes
	// fail (the database unreachable); default 10s.
	OutageBackoff time.Duration
	Retention     time.Duration // delivered rows enqueued longer ago than this are pruned; default 24h
	PruneEvery    time.Duration // maintenance period; default 1m
}

func (c Config) withDefaults() Config {
	c.BatchSize = defaults.Positive(c.BatchSize, 500)
	c.PollInterval = defaults.Positive(c.PollInterval, 100*time.Millisecond)
	c.BaseBackoff = defaults.Positive(c.BaseBackoff, 500*time.Millisecond)
	c.MaxBackoff = defaults.Positive(c.MaxBackoff, time.Minute)
	c.OutageBackoff = defaults.Positive(c.OutageBackoff, 10*time.Second)
	c.Retention = defaults.Positive(c.Retention, 24*time.Hour)
	c.PruneEvery = defaults.Positive(c.PruneEvery, time.Minute)
	return c
}

// Metrics of the outbox and its publishers; shared by every publisher of a
// process.
type Metrics struct {
	delivered *prometheus.CounterVec
	parked    prometheus.Counter
	failures  prometheus.Counter
	pruned    prometheus.Counter
	// loopErrors counts publisher passes that failed as a whole (the
	// database unreachable): each is followed by a backoff.
	loopErrors prometheus.Counter
}

// NewMetrics registers the outbox metrics with reg (when not nil), including
// gauges of backlog and oldest undelivered age read from pool at scrape time.
func NewMetrics(reg prometheus.Registerer, pool *pgxpool.Pool) *Metrics {
	m := &Metrics{
		delivered: promx.CounterVec("reckon_outbox_delivered_total",
			"Outbox rows marked delivered, by the journal's answer (accepted, repeated).",
			"status"),
		parked: promx.Counter("reckon_outbox_parked_total",
			"Outbox rows parked because the journal answered conflict."),
		failures: promx.Counter("reckon_outbox_delivery_failures_total",
			"Batch deliveries that failed and were scheduled for retry."),
		pruned: promx.Counter("reckon_outbox_pruned_total",
			"Delivered outbox rows deleted after the retention period."),
		loopErrors: promx.Counter("reckon_outbox_publish_errors_total",
			"Publisher passes that failed as a whole (e.g. the database unreachable), each followed by a capped, jittered backoff."),
	}
	m.MustRegister(reg, pool)
	return m
}

// MustRegister registers the metrics with reg (nothing when nil), and the
// backlog gauges read from pool at scrape time when pool is set: the
// process that publishes registers them.
func (m *Metrics) MustRegister(reg prometheus.Registerer, pool *pgxpool.Pool) {
	if reg == nil {
		return
	}
	reg.MustRegister(m.delivered, m.parked, m.failures, m.pruned, m.loopErrors)
	if pool != nil {
		reg.MustRegister(statsGauges(pool))
	}
}

// statsGauges are the outbox's backlog gauges, read from the database
// on scrape (promx.DBGauges: with the database unreachable the scrape
// still succeeds, reckon_outbox_stats_up 0).
func statsGauges(pool *pgxpool.Pool) *promx.DBGauges {
	backlog := prometheus.NewDesc("reckon_outbox_backlog", "Outbox rows not yet delivered (parked rows excluded).", nil, nil)
	oldest := prometheus.NewDesc("reckon_outbox_oldest_undelivered_age_seconds", "Age of the oldest undelivered outbox row.", nil, nil)
	parked := prometheus.NewDesc("reckon_outbox_parked_rows", "Outbox rows currently parked on a conflict.", nil, nil)
	return promx.NewDBGauges("reckon_outbox_stats", "outbox gauges", []*prometheus.Desc{backlog, oldest, parked},
		func(ctx context.Context) ([]prometheus.Metric, error) {
			var n, parkedRows int64
			var age float64
			if err := pool.QueryRow(ctx, statsSQL).Scan(&n, &age); err != nil {
				return nil, err
			}
			if err := pool.QueryRow(ctx, parkedCountSQL).Scan(&parkedRows); err != nil {
				return nil, err
			}
			return []prometheus.Metric{
				prometheus.MustNewConstMetric(backlog, prometheus.GaugeValue, float64(n)),
				prometheus.MustNewConstMetric(oldest, prometheus.GaugeValue, age),
				prometheus.MustNewConstMetric(parked, prometheus.GaugeValue, float64(parkedRows)),
			}, nil
		})
}

// Publisher drains the outbox to a journal. Several may run at once, in one
// process or many: each claims rows with FOR UPDATE SKIP LOCKED and holds the
// lock until the rows are marked, so no row is in two deliveries at once.
type Publisher struct {
	pool    *pgxpool.Pool
	journal kernel.Journal
	cfg     Config
	log     zerolog.Logger
	m       *Metrics
	// tasks run in the maintenance loop after the outbox prune (the
	// journal's open-hint repair when the journal is in-process, evidence
	// retention), in the order they were added.
	tasks []maintenanceTask
}

// maintenanceTask is one WithMaintenance task: done names what its count
// of rows means in the log.
type maintenanceTask struct {
	name, done string
	run        func(context.Context) (int64, error)
}

// NewPublisher returns a publisher from pool's outbox to j.
func NewPublisher(pool *pgxpool.Pool, j kernel.Journal, cfg Config, m *Metrics, log zerolog.Logger) *Publisher {
	if m == nil {
		m = NewMetrics(nil, nil)
	}
	return &Publisher{pool: pool, journal: j, cfg: cfg.withDefaults(), log: log, m: m}
}

// WithMaintenance adds a task to the periodic maintenance loop, run every
// PruneEvery after the outbox prune. name says what it does in the log of a
// failure ("journal maintenance"), done what its count of rows means when
// it changed some ("journal open hints repaired").
func (p *Publisher) WithMaintenance(name, done string, f func(context.Context) (int64, error)) *Publisher {
	p.tasks = append(p.tasks, maintenanceTask{name: name, done: done, run: f})
	return p
}

// Run drains until ctx ends, waiting PollInterval whenever the outbox has no
// due rows, and prunes delivered rows every PruneEvery.
func (p *Publisher) Run(ctx context.Context) error {
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		p.maintain(ctx)
	}()
	defer wg.Wait()
	// A failing pass (the database down) backs off exponentially with
	// jitter, capped at OutageBackoff, and is logged once when the
	// failures start and once when they end, not at every attempt.
	failures := 0
	var since time.Time
	for {
		n, err := p.PublishOnce(ctx)
		if ctx.Err() != nil {
			return nil
		}
		wait := p.cfg.PollInterval
		switch {
		case err != nil:
			p.m.loopErrors.Inc()
			if failures == 0 {
				since = time.Now()
				p.log.Warn().Err(err).Msg("outbox publisher cannot publish; retrying with backoff until it can (logged again when it recovers)")
			}
			failures++
			// Capped before the jitter is drawn: min() after it would
			// make most waits exactly OutageBackoff, in step across
			// every publisher of a fleet.
			wait = backoff.Jittered(min(p.cfg.BaseBackoff, p.cfg.OutageBackoff), p.cfg.OutageBackoff, failures-1)
		case failures > 0:
			p.log.Info().Int("failed_attempts", failures).Int64("outage_ms", time.Since(since).Milliseconds()).Msg("outbox publisher recovered")
			failures = 0
		}
		if err != nil || n < p.cfg.BatchSize {
			select {
			case <-ctx.Done():
				return nil
			case <-time.After(wait):
			}
		}
	}
}

func (p *Publisher) maintain(ctx context.Context) {
	t := time.NewTicker(p.cfg.PruneEvery)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if n, err := p.Prune(ctx); err != nil {
			p.log.Warn().Err(err).Msg("outbox prune failed")
		} else if n > 0 {
			p.log.Debug().Int64("rows", n).Msg("outbox pruned delivered rows")
		}
		for _, task := range p.tasks {
			if n, err := task.run(ctx); err != nil {
				p.log.Warn().Err(err).Msg(task.name + " failed")
			} else if n > 0 {
				p.log.Info().Int64("rows", n).Msg(task.done)
			}
		}
	}
}

// Prune deletes delivered rows older than the retention and returns how
// many it deleted.
func (p *Publisher) Prune(ctx context.Context) (int64, error) {
	var total int64
	for {
		tag, err := p.pool.Exec(ctx, pruneSQL, p.cfg.Retention.Seconds(), 5000)
		if err != nil {
			return total, fmt.Errorf("prune outbox: %w", err)
		}
		total += tag.RowsAffected()
		p.m.pruned.Add(float64(tag.RowsAffected()))
		if tag.RowsAffected() < 5000 {
			return total, nil
		}
	}
}

// PublishOnce claims one batch of due rows, delivers it and marks the
// outcome: delivered on accepted or repeated, parked on conflict, scheduled
// for a later attempt with capped exponential backoff and full jitter when
// the delivery itself failed. It returns how many rows it claimed.
func (p *Publisher) PublishOnce(ctx context.Context) (int, error) {
	// A delivery commit need not wait for its WAL flush: if the server loses
	// it, the rows are still undelivered in the outbox and are delivered
	// again, which the journal answers repeated. With the in-process journal
	// the journal rows and their marks are lost or kept together. The
	// durability point of an event is its enqueue, which stays synchronous.
	// Said in the BEGIN's own round trip.
	tx, err := p.pool.BeginTx(ctx, pgx.TxOptions{BeginQuery: beginAsyncCommitSQL})
	if err != nil {
		return 0, fmt.Errorf("publish: begin: %w", err)
	}
	defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }()
	oj, inDB := p.journal.(OutboxJournal)
	if !inDB {
		b, err := p.claim(ctx, tx)
		if err != nil || b.claimed() == 0 {
			return 0, err
		}
		return p.publish(ctx, tx, b)
	}
	c, err := p.claimKeys(ctx, tx)
	if err != nil || len(c.ids) == 0 {
		return 0, err
	}
	if !c.legacy {
		results, err := p.deliverInDB(ctx, tx, oj, c)
		switch {
		case err == nil:
			return p.finish(ctx, tx, c.batch, results)
		case ctx.Err() != nil:
			return 0, ctx.Err()
		case !isDataError(err):
			if rerr := p.retryLater(ctx, tx, c.batch, err); rerr != nil {
				return 0, rerr
			}
			return len(c.ids), fmt.Errorf("publish: deliver %d rows: %w", len(c.ids), err)
		}
		// A row the journal's table refuses was written past Enqueue;
		// the checked path below validates every event and parks the
		// ones the journal rejects instead of retrying the batch forever.
		p.log.Warn().Err(err).Int("rows", len(c.ids)).Msg("outbox batch refused by the journal's table; delivering it the checked way (validated, refused events parked)")
	}
	// Rows enqueued before their prepared columns existed, or a batch
	// refused above: read their events and deliver them the checked way.
	b, err := p.claimed(ctx, tx, c.ids)
	if err != nil {
		return 0, err
	}
	return p.publish(ctx, tx, b)
}

// publish delivers a decoded batch and marks the outcome (PublishOnce).
func (p *Publisher) publish(ctx context.Context, tx pgx.Tx, b batch) (int, error) {
	if err := p.parkUndecodable(ctx, tx, b.undecodable); err != nil {
		return 0, err
	}
	results, err := p.deliverBatch(ctx, tx, b.events)
	if err != nil {
		if ctx.Err() != nil {
			return 0, ctx.Err()
		}
		if rerr := p.retryLater(ctx, tx, b, err); rerr != nil {
			return 0, rerr
		}
		return b.claimed(), fmt.Errorf("publish: deliver %d events: %w", len(b.events), err)
	}
	if _, err := p.finish(ctx, tx, b, results); err != nil {
		return 0, err
	}
	return b.claimed(), deferredError(results)
}

// deferredError reports the events the journal refused to this publisher
// (statusDeferred), after the rest of their batch was delivered and
// marked: the pass counts as failed, so Run backs off and Drain stops
// instead of coming back for rows that only an in-process publisher
// delivers.
func deferredError(results []kernel.IngestResult) error {
	n, first := 0, ""
	for _, r := range results {
		if r.Status == statusDeferred {
			if n == 0 {
				first = r.Reason
			}
			n++
		}
	}
	if n == 0 {
		return nil
	}
	return kernel.Errorf(kernel.EForbidden, "publish: %d of %d events left undelivered for a later attempt, the rest delivered; first: %s", n, len(results), first)
}

// finish marks the journal's answers for b's rows and commits; it returns
// how many rows it marked.
func (p *Publisher) finish(ctx context.Context, tx pgx.Tx, b batch, results []kernel.IngestResult) (int, error) {
	if err := p.mark(ctx, tx, b, results); err != nil {
		return 0, err
	}
	ids := b.ids
	if err := tx.Commit(ctx); err != nil {
		// The journal has the events; the rows stay undelivered and will be
		// redelivered, which the journal answers as repeated.
		return 0, fmt.Errorf("publish: commit: %w", err)
	}
	return len(ids), nil
}

// OutboxJournal is a journal in the outbox's own database that writes
// claimed outbox rows into itself inside the publisher's transaction,
// reading them in the database (journal.Store). The publisher then never
// reads the events out: it claims keys, hands over the row ids and marks
// the answers, all in one commit. The journal answers per row, in ids'
// order; a database error of class 22 or 23 (a row it cannot store) makes
// the publisher deliver that batch through the checked path instead.
type OutboxJournal interface {
	IngestOutboxTx(ctx context.Context, tx pgx.Tx, ids []int64, keys []kernel.EventKey) ([]kernel.IngestResult, error)
}

// keyBatch is a batch claimed by key (claimKeys).
type keyBatch struct {
	batch
	keys []kernel.EventKey
	// legacy: some row lacks the prepared columns.
	legacy bool
}

// claimKeys locks a batch of due rows in tx, reading their keys only.
func (p *Publisher) claimKeys(ctx context.Context, tx pgx.Tx) (keyBatch, error) {
	var c keyBatch
	err := claimStatement(ctx, tx, claimKeysSQL, p.cfg.BatchSize, func(rows pgx.Rows) error {
		var id int64
		var att int
		var k kernel.EventKey
		var legacy bool
		_, err := pgx.ForEachRow(rows, []any{&id, &att, &k.SourceID, &k.EventID, &legacy}, func() error {
			c.ids, c.attempts, c.keys = append(c.ids, id), append(c.attempts, att), append(c.keys, k)
			c.legacy = c.legacy || legacy
			return nil
		})
		return err
	})
	if err != nil {
		return keyBatch{}, fmt.Errorf("publish: claim: %w", err)
	}
	return c, nil
}

// claimStatement runs a claim (claimSQL, claimKeysSQL) for up to limit
// rows in tx on its generic plan without sequential scans (pgplan), in
// one round trip, and hands its rows to read. The claim reads the outbox
// by the ids it locked, and a plan made while the outbox was small must
// not go on scanning it as it grows.
func claimStatement(ctx context.Context, tx pgx.Tx, sql string, limit int, read func(pgx.Rows) error) error {
	b := &pgx.Batch{}
	pgplan.Queue(b, "", sql, limit).Query(read)
	return tx.SendBatch(ctx, b).Close()
}

// deliverInDB hands the claimed rows to the journal under a savepoint, so
// that a refused batch leaves the transaction usable for the checked path
// or the retry mark.
func (p *Publisher) deliverInDB(ctx context.Context, tx pgx.Tx, oj OutboxJournal, c keyBatch) ([]kernel.IngestResult, error) {
	return underSavepoint(ctx, tx, func(sp pgx.Tx) ([]kernel.IngestResult, error) {
		res, err := oj.IngestOutboxTx(ctx, sp, c.ids, c.keys)
		if err == nil && len(res) != len(c.ids) {
			err = fmt.Errorf("journal answered %d results for %d rows", len(res), len(c.ids))
		}
		return res, err
	})
}

// underSavepoint runs ingest in a savepoint of tx, rolled back when ingest
// fails, so that the transaction stays usable for what follows.
func underSavepoint(ctx context.Context, tx pgx.Tx, ingest func(pgx.Tx) ([]kernel.IngestResult, error)) ([]kernel.IngestResult, error) {
	sp, err := tx.Begin(ctx)
	if err != nil {
		return nil, fmt.Errorf("savepoint: %w", err)
	}
	res, err := ingest(sp)
	if err != nil {
		_ = sp.Rollback(ctx)
		return nil, err
	}
	if err := sp.Commit(ctx); err != nil {
		return nil, fmt.Errorf("release savepoint: %w", err)
	}
	return res, nil
}

// isDataError reports a database error about the data itself (SQLSTATE
// class 22, data exception, or 23, integrity constraint violation): the
// same rows would fail again on every retry.
func isDataError(err error) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && (strings.HasPrefix(pgErr.Code, "22") || strings.HasPrefix(pgErr.Code, "23"))
}

// batch is one claimed batch of outbox rows: the valid events with their
// row ids and attempts, and the rows that hold no valid event.
type batch struct {
	ids         []int64
	attempts    []int
	events      []kernel.Event
	undecodable []int64
}

func (b batch) claimed() int { return len(b.ids) + len(b.undecodable) }

// claim locks a batch of due rows in tx (FOR UPDATE SKIP LOCKED) and
// decodes them.
func (p *Publisher) claim(ctx context.Context, tx pgx.Tx) (batch, error) {
	var b batch
	err := claimStatement(ctx, tx, claimSQL, p.cfg.BatchSize, func(rows pgx.Rows) error {
		var err error
		b, err = decodeBatch(rows)
		return err
	})
	if err != nil {
		return batch{}, fmt.Errorf("publish: claim: %w", err)
	}
	return b, nil
}

// claimed reads and decodes the events of rows this transaction claimed.
func (p *Publisher) claimed(ctx context.Context, tx pgx.Tx, ids []int64) (batch, error) {
	rows, err := tx.Query(ctx, claimedSQL, ids)
	if err != nil {
		return batch{}, fmt.Errorf("publish: read claimed rows: %w", err)
	}
	return decodeBatch(rows)
}

// decodeBatch decodes claimed rows (id, event, attempts).
func decodeBatch(rows pgx.Rows) (batch, error) {
	defer rows.Close()
	var b batch
	for rows.Next() {
		var id int64
		var body []byte
		var att int
		if err := rows.Scan(&id, &body, &att); err != nil {
			return batch{}, fmt.Errorf("publish: scan: %w", err)
		}
		var ev kernel.Event
		if err := json.Unmarshal(body, &ev); err != nil {
			// Parked here so that a row holding no event at all cannot fail
			// its whole batch forever. An event that decodes but is not
			// valid is not checked here: the journal validates every event
			// it ingests and rejects such a batch as invalid, and
			// deliverBatch then parks that one event with the journal's
			// reason; validating here too would cost the publisher a
			// quarter of its CPU.
			b.undecodable = append(b.undecodable, id)
			continue
		}
		b.ids, b.attempts, b.events = append(b.ids, id), append(b.attempts, att), append(b.events, ev)
	}
	if err := rows.Err(); err != nil {
		return batch{}, fmt.Errorf("publish: read claimed rows: %w", err)
	}
	return b, nil
}

// parkUndecodable parks rows that hold no event. Enqueue validated every
// row, so this is corruption or a row written by an older version: park,
// never drop.
func (p *Publisher) parkUndecodable(ctx context.Context, tx pgx.Tx, ids []int64) error {
	if len(ids) == 0 {
		return nil
	}
	reasons := make([]string, len(ids))
	for i := range reasons {
		reasons[i] = "outbox row does not hold an event"
	}
	if err := park(ctx, tx, ids, reasons); err != nil {
		return fmt.Errorf("publish: park undecodable: %w", err)
	}
	p.m.parked.Add(float64(len(ids)))
	p.log.Error().Ints64("outbox_ids", ids).Msg("outbox rows parked: not an event")
	return nil
}

// park parks the rows ids with their reasons in tx, and writes their
// conflict.parked webhooks in the same transaction: an endpoint hears of
// a park exactly when it commits.
func park(ctx context.Context, tx pgx.Tx, ids []int64, reasons []string) error {
	rows, err := tx.Query(ctx, parkSQL, ids, reasons)
	if err != nil {
		return err
	}
	var (
		d  webhook.ParkedData
		at time.Time
		ns []webhook.Notification
	)
	_, err = pgx.ForEachRow(rows, []any{&d.Event.SourceID, &d.Event.EventID, &d.Project, &d.RunID, &d.Type, &d.Reason, &at}, func() error {
		n, err := webhook.Parked(d, at)
		ns = append(ns, n)
		return err
	})
	if err != nil {
		return err
	}
	return webhook.Write(ctx, tx, ns)
}

// deliverBatch hands the events to the journal and checks it answered
// each. When the journal rejects the request as a whole — one event it will
// never accept, or a batch too large (the HTTP API answers 413) — the same
// batch would be rejected on every retry. If the journal names the event
// (kernel.RefusedEventIndex), deliverAround delivers the others around it;
// otherwise the events go one at a time. Either way only what the journal
// rejects on its own is parked.
func (p *Publisher) deliverBatch(ctx context.Context, tx pgx.Tx, events []kernel.Event) ([]kernel.IngestResult, error) {
	if len(events) == 0 {
		return nil, nil
	}
	refusals := maxRefusalsPerPass
	results, err := p.deliverAround(ctx, tx, events, &refusals)
	if err != nil && kernel.ErrorCode(err) == kernel.EInvalid && ctx.Err() == nil {
		return p.deliverEach(ctx, tx, events, err)
	}
	return results, err
}

// maxRefusalsPerPass bounds the requests one pass spends on a batch whose
// events the journal refuses one by one (deliverAround): each refusal
// costs a request, and a batch of nothing but kernel events sent over
// HTTP would otherwise cost as many requests as it has events, on every
// attempt. What is left unjudged stays due for the next pass.
const maxRefusalsPerPass = 16

// deliverAround delivers events. When the journal refuses the request
// for one event it names (kernel.RefusedEventIndex) as invalid or as
// forbidden to this publisher's token, that event is answered
// statusRejected (to be parked) or statusDeferred (left undelivered for
// a later attempt: a kernel event an agent's token may not write waits
// for an in-process publisher), and the events before and after it go in
// requests of their own, so that one such event never holds back its
// whole batch. Once *refusals is spent, the events not yet judged are
// answered statusUnjudged and left as they were.
func (p *Publisher) deliverAround(ctx context.Context, tx pgx.Tx, events []kernel.Event, refusals *int) ([]kernel.IngestResult, error) {
	if len(events) == 0 {
		return nil, nil
	}
	if *refusals <= 0 {
		out := make([]kernel.IngestResult, len(events))
		for i, ev := range events {
			out[i] = kernel.IngestResult{SourceID: ev.SourceID, EventID: ev.EventID, Status: statusUnjudged}
		}
		return out, nil
	}
	results, err := p.deliver(ctx, tx, events)
	if err == nil {
		if len(results) != len(events) {
			return nil, fmt.Errorf("journal answered %d results for %d events", len(results), len(events))
		}
		return results, nil
	}
	i, named := kernel.RefusedEventIndex(err)
	code := kernel.ErrorCode(err)
	if !named || i < 0 || i >= len(events) || (code != kernel.EInvalid && code != kernel.EForbidden) || ctx.Err() != nil {
		return nil, err
	}
	*refusals--
	refused := rejected(events[i], err)
	if code == kernel.EForbidden {
		refused.Status, refused.Reason = statusDeferred, "journal refused the event to this publisher: "+kernel.ErrorMessage(err)
		p.log.Warn().Str("source_id", refused.SourceID).Str("event_id", refused.EventID).Str("reason", refused.Reason).
			Msg("outbox row left undelivered: the journal refuses it to this publisher's token (a kernel event waits for an in-process publisher); the rest of its batch is delivered")
	}
	head, err := p.deliverAround(ctx, tx, events[:i], refusals)
	if err != nil {
		return nil, err
	}
	tail, err := p.deliverAround(ctx, tx, events[i+1:], refusals)
	if err != nil {
		return nil, err
	}
	out := make([]kernel.IngestResult, 0, len(events))
	out = append(append(append(out, head...), refused), tail...)
	return out, nil
}

// retryLater schedules the batch's rows for another attempt after a failed
// delivery and commits that.
func (p *Publisher) retryLater(ctx context.Context, tx pgx.Tx, b batch, cause error) error {
	delays := make([]float64, len(b.ids))
	reasons := make([]string, len(b.ids))
	reason := kernel.TruncateUTF8(cause.Error(), 2000)
	for i, a := range b.attempts {
		delays[i], reasons[i] = p.backoff(a).Seconds(), reason
	}
	if _, err := tx.Exec(ctx, retryLaterSQL, b.ids, delays, reasons); err != nil {
		return errors.Join(fmt.Errorf("publish: deliver: %w", cause), fmt.Errorf("publish: schedule retry: %w", err))
	}
	p.m.failures.Inc()
	if err := tx.Commit(ctx); err != nil {
		return fmt.Errorf("publish: commit retry: %w", err)
	}
	return nil
}

// mark records the journal's answers for b's rows: rows answered accepted
// or repeated are delivered, deferred rows are scheduled for a later
// attempt, unjudged rows are left as they are, any other answer parks its
// row with the reason.
func (p *Publisher) mark(ctx context.Context, tx pgx.Tx, b batch, results []kernel.IngestResult) error {
	ids := b.ids
	var delIDs, parkIDs, deferIDs []int64
	var parkReason, deferReason []string
	var deferDelay []float64
	for i, r := range results {
		switch r.Status {
		case statusUnjudged:
		case statusDeferred:
			deferIDs, deferReason = append(deferIDs, ids[i]), append(deferReason, kernel.TruncateUTF8(r.Reason, 2000))
			deferDelay = append(deferDelay, p.backoff(b.attempts[i]).Seconds())
		case kernel.StatusAccepted, kernel.StatusRepeated:
			delIDs = append(delIDs, ids[i])
			p.m.delivered.WithLabelValues(r.Status).Inc()
		default:
			reason := r.Reason
			if reason == "" {
				reason = "journal answered " + r.Status
			}
			parkIDs, parkReason = append(parkIDs, ids[i]), append(parkReason, reason)
			p.m.parked.Inc()
			msg := "outbox row parked: the journal holds a different payload under this key; an operator must resolve it"
			if r.Status == statusRejected {
				msg = "outbox row parked: the journal rejected the event; an operator must resolve it"
			}
			p.log.Error().Str("source_id", r.SourceID).Str("event_id", r.EventID).Str("status", r.Status).
				Str("reason", reason).Msg(msg)
		}
	}
	if len(delIDs) > 0 {
		if _, err := tx.Exec(ctx, markDeliveredSQL, delIDs); err != nil {
			return fmt.Errorf("publish: mark delivered: %w", err)
		}
	}
	if len(parkIDs) > 0 {
		if err := park(ctx, tx, parkIDs, parkReason); err != nil {
			return fmt.Errorf("publish: park: %w", err)
		}
	}
	if len(deferIDs) > 0 {
		if _, err := tx.Exec(ctx, retryLaterSQL, deferIDs, deferDelay, deferReason); err != nil {
			return fmt.Errorf("publish: schedule refused rows: %w", err)
		}
		p.m.failures.Inc()
	}
	return nil
}

// statusRejected marks, in the publisher's own bookkeeping, an event the
// journal refused as invalid when delivered alone; it is parked like a
// conflict. The journal itself never answers it.
const statusRejected = "rejected"

// statusDeferred and statusUnjudged are the publisher's own answers too
// (deliverAround): an event the journal refuses to this publisher, kept
// due for a later attempt with backoff, and an event not sent in this
// pass, left as it was.
const (
	statusDeferred = "deferred"
	statusUnjudged = "unjudged"
)

// rejected is the publisher's answer for an event the journal refused as
// invalid (err), to be parked.
func rejected(ev kernel.Event, err error) kernel.IngestResult {
	return kernel.IngestResult{SourceID: ev.SourceID, EventID: ev.EventID, Status: statusRejected,
		Reason: "journal rejected the event: " + kernel.ErrorMessage(err)}
}

// deliverEach delivers events one at a time after the journal rejected
// them as a batch (batchErr). An event rejected on its own is answered
// statusRejected, to be parked; any other failure ends the pass and is
// returned, and the whole batch is retried later (what was delivered before
// it is answered repeated then).
func (p *Publisher) deliverEach(ctx context.Context, tx pgx.Tx, events []kernel.Event, batchErr error) ([]kernel.IngestResult, error) {
	if len(events) == 1 {
		return []kernel.IngestResult{rejected(events[0], batchErr)}, nil
	}
	out := make([]kernel.IngestResult, len(events))
	for i, ev := range events {
		res, err := p.deliver(ctx, tx, []kernel.Event{ev})
		switch {
		case err == nil && len(res) == 1:
			out[i] = res[0]
		case err == nil:
			return nil, fmt.Errorf("journal answered %d results for 1 event", len(res))
		case kernel.ErrorCode(err) == kernel.EInvalid:
			out[i] = rejected(ev, err)
		default:
			return nil, err
		}
	}
	return out, nil
}

// TxJournal is a journal that can ingest inside the publisher's transaction:
// the journal in the same database as the outbox. Delivery and the delivered
// mark then commit together, in one commit instead of two.
type TxJournal interface {
	IngestTx(ctx context.Context, tx pgx.Tx, events []kernel.Event) ([]kernel.IngestResult, error)
}

// deliver hands the batch to the journal: inside tx under a savepoint when
// the journal supports it (a failed ingest then rolls back to the savepoint
// and the retry is recorded in the same transaction), otherwise through the
// Journal interface.
func (p *Publisher) deliver(ctx context.Context, tx pgx.Tx, events []kernel.Event) ([]kernel.IngestResult, error) {
	tj, ok := p.journal.(TxJournal)
	if !ok {
		return p.journal.Ingest(ctx, events)
	}
	return underSavepoint(ctx, tx, func(sp pgx.Tx) ([]kernel.IngestResult, error) {
		return tj.IngestTx(ctx, sp, events)
	})
}

// backoff is capped exponential with full jitter: a uniform delay in
// [base, min(cap, base*2^attempts)].
func (p *Publisher) backoff(attempts int) time.Duration {
	return backoff.Jittered(p.cfg.BaseBackoff, p.cfg.MaxBackoff, attempts)
}

// Drain publishes until no due row remains; for tools and tests that want
// the journal caught up now.
func (p *Publisher) Drain(ctx context.Context) error {
	for {
		n, err := p.PublishOnce(ctx)
		if err != nil {
			return err
		}
		if n == 0 {
			return nil
		}
	}
}
