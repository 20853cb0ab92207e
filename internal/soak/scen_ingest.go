package soak

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/seed-7bc021c3/reckon/kernel"
)

// senders is how many requests the load generator keeps in flight.
const senders = 2

// ingestKill: the load generator posts batches while `reckon dev` is
// SIGKILLed and restarted every few seconds. Recovery is from the kill to
// the first batch acknowledged by the restarted process.
func (s *soak) ingestKill(ctx context.Context, sc *Scenario, budget time.Time) error {
	sc.RecoveryMeans = "from SIGKILL of reckon dev to the first batch acknowledged by the restarted process (restart included)"
	if err := s.st.startDev(ctx); err != nil {
		return err
	}
	g := newLoadgen(s.api, "soak-ingest", s.agent, s.o.IngestRate)
	r := g.start(ctx, senders)
	var err error
	for round := 1; round <= s.o.Rounds && err == nil; round++ {
		if time.Now().After(budget) {
			sc.figure("rounds_cut_by_time_limit", s.o.Rounds-round+1)
			break
		}
		sleep(ctx, 1500*time.Millisecond+rand.N(2*time.Second))
		if ctx.Err() != nil {
			break
		}
		at := time.Now()
		s.st.killDev()
		dead := time.Now()
		if err = s.st.startDev(ctx); err != nil {
			break
		}
		back, werr := g.waitAckSentAfter(ctx, dead, 2*time.Minute)
		if werr != nil {
			err = werr
			break
		}
		sc.Rounds++
		sc.Recovery.add(back.Sub(at))
		s.progress("%s round %d/%d: dev SIGKILLed, acknowledging again after %.1f s; %d events acknowledged so far",
			sc.Name, round, s.o.Rounds, back.Sub(at).Seconds(), g.ackedEvents())
	}
	r.drain(2 * time.Minute)
	s.verifyIngest(ctx, sc, g)
	return err
}

// pgRestart: the load generator posts batches while the private cluster
// is stopped with -m immediate and started again; reckon dev is never
// restarted. Unavailability is from the stop to the first acknowledged
// batch after it.
func (s *soak) pgRestart(ctx context.Context, sc *Scenario, budget time.Time) error {
	sc.RecoveryMeans = "unavailability: from pg_ctl stop -m immediate to the first batch acknowledged after it (crash recovery and reconnect included; dev not restarted)"
	if err := s.st.startDev(ctx); err != nil {
		return err
	}
	dev := s.st.dev
	g := newLoadgen(s.api, "soak-pgrestart", s.agent, s.o.IngestRate)
	r := g.start(ctx, senders)
	var err error
	var restarts []float64
	n := pgRounds(s.o.Rounds)
	for round := 1; round <= n && err == nil; round++ {
		if time.Now().After(budget) {
			sc.figure("rounds_cut_by_time_limit", n-round+1)
			break
		}
		sleep(ctx, 2*time.Second+rand.N(2*time.Second))
		if ctx.Err() != nil {
			break
		}
		at := time.Now()
		if err = s.cluster.Stop(ctx, true); err != nil {
			break
		}
		dead := time.Now()
		if err = s.cluster.Start(ctx); err != nil {
			break
		}
		restarts = append(restarts, roundS(time.Since(at)))
		back, werr := g.waitAckSentAfter(ctx, dead, 2*time.Minute)
		if werr != nil {
			err = werr
			break
		}
		if dev.exited() {
			err = fmt.Errorf("reckon dev exited after the database restart (it must recover without a restart)")
			break
		}
		sc.Rounds++
		sc.Recovery.add(back.Sub(at))
		s.progress("%s round %d/%d: PostgreSQL stopped -m immediate and started (%.1f s), ingest back after %.1f s; dev not restarted",
			sc.Name, round, n, restarts[len(restarts)-1], back.Sub(at).Seconds())
	}
	sc.figure("pg_stop_start_seconds", restarts)
	r.drain(2 * time.Minute)
	if err == nil && (dev != s.st.dev || dev.exited()) {
		err = fmt.Errorf("reckon dev did not survive the database restarts")
	}
	s.verifyIngest(ctx, sc, g)
	return err
}

// verifyIngest checks from outside that every acknowledged key is in the
// journal exactly once and that a resend of every acknowledged batch
// answers repeated for every event.
func (s *soak) verifyIngest(ctx context.Context, sc *Scenario, g *loadgen) {
	if ctx.Err() != nil {
		return // interrupted: nothing to conclude
	}
	batches := ackedBatches(sc, g)
	// The journal, read directly: every acknowledged key exactly once.
	if err := s.ensureStack(ctx); err != nil {
		sc.problem("restart the stack for the checks: %v", err)
		return
	}
	journalLost, ok := s.checkJournal(ctx, sc, g, batches)
	if !ok {
		return
	}
	start := time.Now()
	repeated, accepted, conflict := s.resend(ctx, sc, g, batches)
	// accepted on a resend: the first answer acknowledged an event the
	// journal did not keep.
	sc.Lost += accepted
	sc.SpuriousConflicts += conflict
	sc.figure("resend", map[string]any{"repeated": repeated, "accepted": accepted, "conflict": conflict, "seconds": roundS(time.Since(start))})
	s.progress("%s: journal checked (%d acknowledged keys missing); resend of %d events: %d repeated, %d accepted, %d conflict",
		sc.Name, journalLost, repeated+accepted+conflict, repeated, accepted, conflict)
}

// ackedBatches takes the load's first answers into sc and returns the
// batches it acknowledged.
func ackedBatches(sc *Scenario, g *loadgen) []int {
	g.mu.Lock()
	acked := append([]bool(nil), g.acked...)
	refusedErr := g.refused
	sc.SpuriousConflicts += g.conflicts
	for _, k := range g.conflictKeys {
		sc.problem("spurious conflict: %s", k)
	}
	sc.figure("first_answers", map[string]int64{"accepted": g.accepted, "repeated": g.repeated, "conflict": g.conflicts})
	sc.figure("failed_requests_retried", g.failures)
	g.mu.Unlock()
	if refusedErr != nil {
		sc.problem("the API refused a batch: %v", refusedErr)
	}
	var batches []int
	unacked := 0
	for n, a := range acked {
		if a {
			batches = append(batches, n)
		} else {
			unacked++
		}
	}
	sc.Acknowledged += int64(len(batches) * g.batchRuns * 4)
	sc.figure("batches_acknowledged", len(batches))
	sc.figure("events_per_batch", g.batchRuns*4)
	if unacked > 0 {
		sc.problem("%d batch(es) never acknowledged although retried with the stack up", unacked)
	}
	return batches
}

// checkJournal counts every event of batches missing from the journal as
// lost and every extra copy as duplicated, and returns how many it lost;
// ok is false when the journal could not be read.
func (s *soak) checkJournal(ctx context.Context, sc *Scenario, g *loadgen, batches []int) (lost int64, ok bool) {
	present := map[string]int{}
	rows, err := s.pool.Query(ctx, `SELECT event_id FROM journal_events WHERE source_id = $1 AND project = $2`, g.source, g.project)
	if err != nil {
		sc.problem("read the journal: %v", err)
		return 0, false
	}
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			sc.problem("read the journal: %v", err)
			rows.Close()
			return 0, false
		}
		present[id]++
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		sc.problem("read the journal: %v", err)
		return 0, false
	}
	var missing []string
	lostBefore := sc.Lost
	for _, n := range batches {
		for _, ev := range g.batch(n) {
			switch c := present[ev.EventID]; {
			case c == 0:
				sc.Lost++
				if len(missing) < 5 {
					missing = append(missing, ev.EventID)
				}
			case c > 1:
				sc.Duplicated += int64(c - 1)
			}
		}
	}
	if len(missing) > 0 {
		sc.problem("acknowledged but not in the journal: %v …", missing)
	}
	sc.figure("journal_rows", len(present))
	return sc.Lost - lostBefore, true
}

// resend sends every batch of batches again, from several senders, and
// counts the answers: every event must be repeated.
func (s *soak) resend(ctx context.Context, sc *Scenario, g *loadgen, batches []int) (repeated, accepted, conflict int64) {
	var mu sync.Mutex
	work := make(chan int)
	var wg sync.WaitGroup
	var sendErr error
	for range senders {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for n := range work {
				var res []kernel.IngestResult
				var err error
				for attempt := 0; attempt < 20; attempt++ {
					if res, err = s.api.ingest(ctx, g.batch(n)); err == nil || refused(err) || ctx.Err() != nil {
						break
					}
					sleep(ctx, 200*time.Millisecond)
				}
				mu.Lock()
				if err != nil {
					sendErr = fmt.Errorf("resend batch %d: %w", n, err)
				}
				for _, r := range res {
					switch r.Status {
					case kernel.StatusRepeated:
						repeated++
					case kernel.StatusAccepted:
						accepted++
					default:
						conflict++
					}
				}
				mu.Unlock()
			}
		}()
	}
	for _, n := range batches {
		if ctx.Err() != nil {
			break
		}
		mu.Lock()
		stop := sendErr != nil
		mu.Unlock()
		if stop {
			break
		}
		work <- n
	}
	close(work)
	wg.Wait()
	if sendErr != nil {
		sc.problem("%v", sendErr)
	}
	return repeated, accepted, conflict
}

// ensureStack starts dev again when it is not running (the checks talk to
// its API).
func (s *soak) ensureStack(ctx context.Context) error {
	if s.st.dev != nil && !s.st.dev.exited() {
		return nil
	}
	return s.st.startDev(ctx)
}
