package journal

import (
	"context"
	"sync"
	"time"

	"github.com/seed-7bc021c3/reckon/kernel"
)

// Group commit: concurrent small Ingest calls (the HTTP API's one-event
// POSTs, single-event clients) share one round trip and one commit instead
// of paying one each. There is no timer: while no batch is in flight a call
// goes to the database at once, so a lone caller waits for nothing; calls
// that arrive while batches are in flight queue up and leave together with
// the next one. Each caller still gets its own answers (accepted, repeated,
// conflict) exactly as if the calls had run one after another: in arrival
// order within a batch; two batches in flight commit in either order, as
// two concurrent callers' requests could anyway (a caller's next call
// starts after its answer, so its own calls keep their order). One
// caller's failure never fails the others (see flush).
const (
	// groupMaxEvents bounds one combined batch, so a queue that built up
	// under load leaves in round trips of a size PostgreSQL handles well.
	groupMaxEvents = 500
	// groupMaxInFlight is how many combined batches may be in flight at
	// once. Two: one batch's statement and commit run in the database
	// while the next gathers and is prepared, so the client's work and the
	// WAL flush overlap; more batches only split the events per commit
	// (BenchmarkIngestSingleConcurrent).
	groupMaxInFlight = 2
	// groupSmall is the largest call that joins a group; larger batches
	// already amortise their round trip and go straight to the database.
	groupSmall = 64
	// groupTimeout bounds a combined batch's statement; it does not follow
	// any one caller's context, since others' events ride in it too.
	groupTimeout = time.Minute
)

// groupCall is one caller's share of a combined batch.
type groupCall struct {
	ctx   context.Context
	preps []prepared
	res   []kernel.IngestResult
	err   error
	done  chan struct{}
}

// grouper queues small ingest calls and flushes them in combined batches.
type grouper struct {
	s        *Store
	mu       sync.Mutex
	pending  []*groupCall
	inFlight int
}

// ingest queues preps and waits for their answers. When ctx ends first the
// caller gets ctx.Err(), and its events may or may not be written: the same
// ambiguity as a request that times out, which a retry resolves (repeated).
func (g *grouper) ingest(ctx context.Context, preps []prepared) ([]kernel.IngestResult, error) {
	c := &groupCall{ctx: ctx, preps: preps, done: make(chan struct{})}
	g.mu.Lock()
	g.pending = append(g.pending, c)
	start := g.inFlight < groupMaxInFlight
	if start {
		g.inFlight++
	}
	g.mu.Unlock()
	if start {
		go g.loop()
	}
	select {
	case <-c.done:
		return c.res, c.err
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// loop flushes queued calls until the queue is empty.
func (g *grouper) loop() {
	for {
		g.mu.Lock()
		n, events := 0, 0
		for n < len(g.pending) && (n == 0 || events+len(g.pending[n].preps) <= groupMaxEvents) {
			events += len(g.pending[n].preps)
			n++
		}
		if n == 0 {
			g.inFlight--
			g.mu.Unlock()
			return
		}
		calls := append([]*groupCall(nil), g.pending[:n]...)
		g.pending = append(g.pending[:0], g.pending[n:]...)
		g.mu.Unlock()
		g.flush(calls)
	}
}

// flush writes calls in one round trip and hands each its answers. Calls
// whose caller gave up are dropped before the write. When the combined
// statement fails, the calls are written again (retry), so that only the
// call that cannot be written gets the error.
func (g *grouper) flush(calls []*groupCall) {
	live := calls[:0]
	for _, c := range calls {
		if err := c.ctx.Err(); err != nil {
			c.err = err
			close(c.done)
			continue
		}
		live = append(live, c)
	}
	if len(live) == 0 {
		return
	}
	if len(live) == 1 {
		g.alone(live[0])
		return
	}
	var all []prepared
	for _, c := range live {
		all = append(all, c.preps...)
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(live[0].ctx), groupTimeout)
	defer cancel()
	res, err := g.s.ingestRetry(ctx, all)
	if err != nil {
		g.retry(live, err)
		return
	}
	off := 0
	for _, c := range live {
		c.res = res[off : off+len(c.preps) : off+len(c.preps)]
		off += len(c.preps)
		close(c.done)
	}
}

// retry writes again the calls of a combined batch that failed with err.
// A refusal of an agents' write (a kernel or gateway run, another source's
// run, the gateway's source) is one call's doing, and the combined batch
// is written again in halves, each failing half split again, in their
// order: about 2·log2(n) writes for one refused call among n, where
// writing every call alone takes n, so that an agent cannot make every
// batch its refused writes ride in cost a round trip per caller. Any other
// error (the database down, say) has each call written alone, so that
// each caller gets the error its own write meets.
func (g *grouper) retry(calls []*groupCall, err error) {
	if kernel.ErrorCode(err) != kernel.EForbidden || len(calls) <= 2 {
		for _, c := range calls {
			g.s.groupRetries.Inc()
			g.alone(c)
		}
		return
	}
	half := len(calls) / 2
	for _, part := range [][]*groupCall{calls[:half], calls[half:]} {
		g.s.groupRetries.Inc()
		g.flush(part)
	}
}

// alone writes one call by itself under its caller's own context: nobody
// else's events ride in it, so a caller that gives up stops its write.
func (g *grouper) alone(c *groupCall) {
	c.res, c.err = g.s.ingestRetry(c.ctx, c.preps)
	close(c.done)
}
