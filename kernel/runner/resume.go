package runner

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/rs/zerolog"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/client"

	"github.com/seed-7bc021c3/reckon/kernel"
	"github.com/seed-7bc021c3/reckon/platform/defaults"
	"github.com/seed-7bc021c3/reckon/platform/pglisten"
)

// AwaitChannel is the PostgreSQL notification channel on which the journal
// announces an event that may move a waiting run (migration 00040): a
// kernel run.awaiting, or a probe's or an operator's reconciliation. The
// payload is {"project", "run_id"}.
const AwaitChannel = "reckon_await"

// Resumer brings settlements to the runs that wait for them. For every
// wait the journal shows unended it either signals the run (SignalSettled)
// when a probe or an operator has settled the awaited operation, or asks
// once for a triage of the run (Triage) while nothing has. It acts when
// the journal announces such an event (AwaitChannel) and on a periodic
// scan of every wait, which makes up for an announcement nobody heard (a
// resumer down or reconnecting) and a signal lost with its sender. The run
// reads the settlement from the journal itself, so a signal sent twice, or
// for a settlement that does not resume, changes nothing.
type Resumer struct {
	// Pool reads the journal and holds no listening session (that has a
	// connection of its own, with the pool's configuration).
	Pool *pgxpool.Pool
	// Client signals the waiting runs.
	Client client.Client
	// Triage asks for a triage of one run now (the pipeline's sweep of that
	// run, under the same lock as the scheduled sweep); nil asks none, and
	// the scheduled sweep takes the run at its next tick.
	Triage func(ctx context.Context, project, runID string)
	// AwaitTimeout is RECKON_AWAIT_TIMEOUT: waits begun longer ago than it
	// (and a day's slack for runs started with a longer bound) are over
	// and not scanned. Default DefaultAwaitTimeout.
	AwaitTimeout time.Duration
	// Scan is the period of the full scan; default 30s.
	Scan time.Duration
	// Resend is how long a run that was signalled and still waits goes
	// before it is signalled again (its settlement read failed, or the
	// signal was lost); default 1m.
	Resend time.Duration
	// MaxTriages bounds the triages asked for at once; default 4.
	MaxTriages int
	// Now is the clock the scan's window is measured on; default time.Now.
	Now func() time.Time
	Log zerolog.Logger

	mu       sync.Mutex
	signaled map[awaitKey]sent
	triaged  map[awaitKey]bool
}

// awaitKey names one wait: a run waits for each of its operations at most
// once.
type awaitKey struct{ project, runID, operationID string }

// sent is the last signal a wait was sent: for which reconciliation, when.
type sent struct {
	rec kernel.EventKey
	at  time.Time
}

// wait is one unended wait as the journal shows it (Resumer.waits).
type wait struct {
	Project     string
	RunID       string
	OperationID string
	Since       time.Time
	// Settlement is the awaited operation's newest reconciliation (Found
	// false: none yet).
	Settlement Settlement
	// Failed says the kernel's tool.failed of the operation is journaled:
	// a triage lists the operation only then.
	Failed bool
}

func (r *Resumer) defaults() {
	r.AwaitTimeout = defaults.Positive(r.AwaitTimeout, DefaultAwaitTimeout)
	r.Scan = defaults.Positive(r.Scan, 30*time.Second)
	r.Resend = defaults.Positive(r.Resend, time.Minute)
	r.MaxTriages = defaults.Positive(r.MaxTriages, 4)
	if r.Now == nil {
		r.Now = time.Now
	}
}

// maxWaits bounds the waits one scan reads, the oldest first: past it, a
// newer wait is acted on when the journal announces its events, and by
// the scans once older waits have ended.
const maxWaits = 1000

// waits lists the unended waits the journal shows, of one run (project
// and runID set) or of every run (both empty).
func (r *Resumer) waits(ctx context.Context, project, runID string) ([]wait, error) {
	since := r.Now().Add(-r.AwaitTimeout - 24*time.Hour)
	rows, err := r.Pool.Query(ctx, awaitingSQL, since, project, runID, maxWaits)
	if err != nil {
		return nil, fmt.Errorf("read waiting runs: %w", err)
	}
	defer rows.Close()
	var out []wait
	for rows.Next() {
		var (
			w                   wait
			src, id, eff, basis *string
		)
		if err := rows.Scan(&w.Project, &w.RunID, &w.OperationID, &w.Since, &src, &id, &eff, &basis, &w.Failed); err != nil {
			return nil, fmt.Errorf("read waiting runs: %w", err)
		}
		if src != nil && id != nil {
			w.Settlement = Settlement{Found: true, Key: kernel.EventKey{SourceID: *src, EventID: *id}, Effect: deref(eff), Basis: deref(basis)}
		}
		out = append(out, w)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("read waiting runs: %w", err)
	}
	return out, nil
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

// Run listens for the journal's announcements and scans every Scan until
// ctx ends; then it waits for the triages it asked for.
func (r *Resumer) Run(ctx context.Context) error {
	r.defaults()
	var triages sync.WaitGroup
	defer triages.Wait()
	slots := make(chan struct{}, r.MaxTriages)
	wake := make(chan kernel.RunKey, 64)
	go r.listen(ctx, wake)
	tick := time.NewTicker(r.Scan)
	defer tick.Stop()
	r.pass(ctx, "", "", slots, &triages)
	for {
		select {
		case <-ctx.Done():
			return nil
		case k := <-wake:
			r.pass(ctx, k.Project, k.RunID, slots, &triages)
		case <-tick.C:
			r.pass(ctx, "", "", slots, &triages)
		}
	}
}

// pass is act with its error logged: a pass that could not read the
// journal is retried by the next.
func (r *Resumer) pass(ctx context.Context, project, runID string, slots chan struct{}, triages *sync.WaitGroup) {
	if err := r.act(ctx, project, runID, slots, triages); err != nil && ctx.Err() == nil {
		r.Log.Warn().Err(err).Str("project", project).Str("run_id", runID).Msg("waiting runs not checked; the next scan retries")
	}
}

// act signals each wait of the scope whose operation a probe or an
// operator has settled, and asks for a triage of each whose operation
// nothing has settled yet (once per wait, MaxTriages at a time).
func (r *Resumer) act(ctx context.Context, project, runID string, slots chan struct{}, triages *sync.WaitGroup) error {
	waits, err := r.waits(ctx, project, runID)
	if err != nil {
		return err
	}
	if project == "" {
		r.forgetEnded(waits)
	}
	for _, w := range waits {
		switch {
		case w.Settlement.Resumes():
			r.signal(ctx, w)
		case !w.Settlement.Found && w.Failed && r.Triage != nil && r.claimTriage(w):
			r.triage(ctx, w, slots, triages)
		}
	}
	return nil
}

// signal sends the wait's settlement to its run, unless the same one was
// sent less than Resend ago.
func (r *Resumer) signal(ctx context.Context, w wait) {
	k := awaitKey{w.Project, w.RunID, w.OperationID}
	now := r.Now()
	r.mu.Lock()
	last, ok := r.signaled[k]
	if ok && last.rec == w.Settlement.Key && now.Sub(last.at) < r.Resend {
		r.mu.Unlock()
		return
	}
	if r.signaled == nil {
		r.signaled = map[awaitKey]sent{}
	}
	r.signaled[k] = sent{rec: w.Settlement.Key, at: now}
	r.mu.Unlock()
	err := r.Client.SignalWorkflow(ctx, kernel.WorkflowID(w.Project, w.RunID), "", SignalSettled,
		Settled{OperationID: w.OperationID, Reconciliation: w.Settlement.Key})
	log := r.Log.With().Str("project", w.Project).Str("run_id", w.RunID).Str("operation_id", w.OperationID).
		Str("reconciliation", w.Settlement.Key.String()).Logger()
	var nf *serviceerror.NotFound
	switch {
	case err == nil:
		log.Info().Str("effect", w.Settlement.Effect).Str("basis", w.Settlement.Basis).Msg("waiting run signalled its settlement")
	case errors.As(err, &nf):
		// The run is over (its end not yet journaled): nothing waits.
		log.Debug().Err(err).Msg("waiting run not signalled: its workflow has ended")
	default:
		r.mu.Lock()
		delete(r.signaled, k) // sent again on the next pass
		r.mu.Unlock()
		log.Warn().Err(err).Msg("waiting run not signalled; the next scan retries")
	}
}

// claimTriage reports whether the wait's triage is still to be asked for,
// and marks it asked.
func (r *Resumer) claimTriage(w wait) bool {
	k := awaitKey{w.Project, w.RunID, w.OperationID}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.triaged[k] {
		return false
	}
	if r.triaged == nil {
		r.triaged = map[awaitKey]bool{}
	}
	r.triaged[k] = true
	return true
}

// triage asks for the wait's run to be triaged, in the background once a
// slot is free; the pass goes on meanwhile.
func (r *Resumer) triage(ctx context.Context, w wait, slots chan struct{}, triages *sync.WaitGroup) {
	triages.Add(1)
	go func() {
		defer triages.Done()
		select {
		case slots <- struct{}{}:
		case <-ctx.Done():
			return
		}
		defer func() { <-slots }()
		r.Log.Info().Str("project", w.Project).Str("run_id", w.RunID).Str("operation_id", w.OperationID).
			Msg("run waits for a settlement; triage of the run asked for")
		r.Triage(ctx, w.Project, w.RunID)
	}()
}

// forgetEnded drops what the resumer remembers of waits a full scan no
// longer shows.
func (r *Resumer) forgetEnded(waits []wait) {
	open := make(map[awaitKey]bool, len(waits))
	for _, w := range waits {
		open[awaitKey{w.Project, w.RunID, w.OperationID}] = true
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	for k := range r.signaled {
		if !open[k] {
			delete(r.signaled, k)
		}
	}
	for k := range r.triaged {
		if !open[k] {
			delete(r.triaged, k)
		}
	}
}

// listen passes on the runs the journal announces (AwaitChannel) until
// ctx ends. After a lost connection it asks for a full scan, since
// announcements made meanwhile were not heard.
func (r *Resumer) listen(ctx context.Context, wake chan<- kernel.RunKey) {
	got := func(payload string) {
		k, ok := kernel.ParseRunKey(payload)
		if !ok {
			return
		}
		select {
		case wake <- k:
		case <-ctx.Done():
		}
	}
	rescan := func() {
		select {
		case wake <- kernel.RunKey{}: // a full scan: what was announced meanwhile
		default:
		}
	}
	pglisten.Listen(ctx, r.Pool, AwaitChannel, "not listening for waiting runs; the periodic scan covers them meanwhile", r.Log, got, rescan)
}
