package soak

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/seed-7bc021c3/reckon/kernel"
)

// loadgen posts batches of agent events with known keys to the API. A
// batch is a pure function of its number, so a retry after a kill sends
// exactly the same payload: an answer other than accepted or repeated is a
// spurious conflict. Unacknowledged batches are retried until they are
// acknowledged.
type loadgen struct {
	c         *client
	project   string
	source    string // the agent token's name: the only source_id it may write
	base      time.Time
	batchRuns int           // runs per batch, 4 events each
	interval  time.Duration // pacing between batches over all senders; 0: none

	mu       sync.Mutex
	next     int          // batches [0, next) were sent at least once
	retry    []int        // sent, not acknowledged, to send again
	inflight map[int]bool // being sent
	acked    []bool
	draining bool // no new batches, only retries
	slot     time.Time
	acks     []ack // every acknowledgement, for recovery times
	refused  error // the API refused a batch (4xx): the soak cannot go on

	accepted, repeated, conflicts, failures int64
	conflictKeys                            []string
}

func newLoadgen(c *client, project, source string, eventsPerSecond int) *loadgen {
	g := &loadgen{c: c, project: project, source: source, base: time.Now().UTC().Truncate(time.Second),
		batchRuns: 50, inflight: map[int]bool{}}
	if eventsPerSecond > 0 {
		g.interval = time.Duration(float64(time.Second) * float64(g.batchRuns*4) / float64(eventsPerSecond))
	}
	return g
}

// batch builds batch n: batchRuns complete external runs (run.started,
// tool.started, tool.completed, run.completed) of actor agent under the
// agent's own source, the only events an agent token may write.
func (g *loadgen) batch(n int) []kernel.Event {
	ts := g.base.Add(time.Duration(n) * time.Millisecond)
	evs := make([]kernel.Event, 0, g.batchRuns*4)
	add := func(runID, suffix, typ string, data any) {
		ev, err := kernel.NewEvent(g.source, runID+"/"+suffix, g.project, runID, typ, "agent", ts, data)
		if err != nil {
			panic(err) // fixed shapes: cannot fail
		}
		evs = append(evs, ev)
	}
	for r := range g.batchRuns {
		// The key is (source_id, event_id) whatever the project: run ids
		// carry the project so two load generators never share a key.
		runID := fmt.Sprintf("%s-b%07d-r%02d", g.project, n, r)
		add(runID, "run/started", kernel.TypeRunStarted, map[string]any{"plan_summary": "soak load"})
		add(runID, "op-1/started", kernel.TypeToolStarted, map[string]any{"operation_id": "op-1", "tool": "soak.load", "args": map[string]any{"batch": n, "run": r}})
		add(runID, "op-1/completed", kernel.TypeToolCompleted, map[string]any{"operation_id": "op-1", "result_summary": "ok"})
		add(runID, "run/completed", kernel.TypeRunCompleted, map[string]any{})
	}
	return evs
}

// take returns the next batch to send: a retry first, else a new one
// unless draining. ok is false when there is nothing left to do.
func (g *loadgen) take() (n int, ok bool, wait bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.refused != nil {
		return 0, false, false
	}
	if len(g.retry) > 0 {
		n = g.retry[0]
		g.retry = g.retry[1:]
	} else if !g.draining {
		n = g.next
		g.next++
		g.acked = append(g.acked, false)
	} else {
		// Draining: done once nothing is in flight either.
		return 0, false, len(g.inflight) > 0
	}
	g.inflight[n] = true
	return n, true, false
}

// pace reserves the next send slot and sleeps until it.
func (g *loadgen) pace(ctx context.Context) {
	if g.interval == 0 {
		return
	}
	g.mu.Lock()
	now := time.Now()
	if g.slot.Before(now) {
		g.slot = now
	}
	at := g.slot
	g.slot = g.slot.Add(g.interval)
	g.mu.Unlock()
	sleep(ctx, time.Until(at))
}

// ack is one acknowledged request: when it was sent and answered.
type ack struct{ sent, answered time.Time }

// send is one sender's loop; it returns when ctx ends, the API refuses a
// batch, or (draining) every batch is acknowledged.
func (g *loadgen) send(ctx context.Context) {
	backoff := 50 * time.Millisecond
	for ctx.Err() == nil {
		n, ok, wait := g.take()
		if !ok {
			if wait {
				sleep(ctx, 20*time.Millisecond)
				continue
			}
			return
		}
		if !g.isDraining() {
			g.pace(ctx)
		}
		rctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		sent := time.Now()
		res, err := g.c.ingest(rctx, g.batch(n))
		cancel()
		g.mu.Lock()
		delete(g.inflight, n)
		switch {
		case err == nil:
			g.acked[n] = true
			g.acks = append(g.acks, ack{sent: sent, answered: time.Now()})
			for i, r := range res {
				switch r.Status {
				case kernel.StatusAccepted:
					g.accepted++
				case kernel.StatusRepeated:
					g.repeated++
				default:
					g.conflicts++
					if len(g.conflictKeys) < 10 {
						g.conflictKeys = append(g.conflictKeys, fmt.Sprintf("%s:%s (batch %d, event %d): %s", r.SourceID, r.EventID, n, i, r.Status))
					}
				}
			}
			backoff = 50 * time.Millisecond
		case refused(err):
			g.refused = fmt.Errorf("batch %d: %w", n, err)
		default:
			g.failures++
			g.retry = append(g.retry, n)
		}
		g.mu.Unlock()
		if err != nil {
			sleep(ctx, backoff+rand.N(backoff))
			backoff = min(backoff*2, time.Second)
		}
	}
}

func (g *loadgen) isDraining() bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.draining
}

// ackedEvents counts the events of acknowledged batches.
func (g *loadgen) ackedEvents() int64 {
	g.mu.Lock()
	defer g.mu.Unlock()
	var n int64
	for _, a := range g.acked {
		if a {
			n += int64(g.batchRuns * 4)
		}
	}
	return n
}

// waitAckSentAfter waits until a request sent after t is acknowledged and
// returns when the first such answer came; it gives up after timeout.
func (g *loadgen) waitAckSentAfter(ctx context.Context, t time.Time, timeout time.Duration) (time.Time, error) {
	deadline := time.Now().Add(timeout)
	for {
		g.mu.Lock()
		var first time.Time
		for i := len(g.acks) - 1; i >= 0 && g.acks[i].answered.After(t); i-- {
			if a := g.acks[i]; a.sent.After(t) && (first.IsZero() || a.answered.Before(first)) {
				first = a.answered
			}
		}
		refusedErr := g.refused
		g.mu.Unlock()
		switch {
		case refusedErr != nil:
			return time.Time{}, refusedErr
		case !first.IsZero():
			return first, nil
		case time.Now().After(deadline):
			return time.Time{}, fmt.Errorf("no batch acknowledged within %s of the fault", timeout)
		case ctx.Err() != nil:
			return time.Time{}, ctx.Err()
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// running is a load generator with its senders started.
type running struct {
	g      *loadgen
	cancel context.CancelFunc
	wg     sync.WaitGroup
}

// start runs senders until drain.
func (g *loadgen) start(ctx context.Context, senders int) *running {
	ctx, cancel := context.WithCancel(ctx)
	r := &running{g: g, cancel: cancel}
	for range senders {
		r.wg.Add(1)
		go func() {
			defer r.wg.Done()
			g.send(ctx)
		}()
	}
	return r
}

// drain stops new batches and waits until every sent batch is
// acknowledged, or timeout.
func (r *running) drain(timeout time.Duration) {
	r.g.mu.Lock()
	r.g.draining = true
	r.g.mu.Unlock()
	done := make(chan struct{})
	go func() { r.wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(timeout):
	}
	r.cancel()
	<-done
}

func sleep(ctx context.Context, d time.Duration) {
	if d <= 0 {
		return
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
	}
}
