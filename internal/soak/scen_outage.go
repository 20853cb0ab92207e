package soak

import (
	"context"
	"fmt"
	"sync"
	"time"
)

// outage: runs start one every half second while the private cluster is
// stopped (-m immediate) for Options.Outage and started again. Neither
// dev nor the worker is restarted: the publisher must resume delivery by
// itself and nothing may be parked.
func (s *soak) outage(ctx context.Context, sc *Scenario) error {
	sc.RecoveryMeans = "from the database's return to the first outbox row delivered after it"
	if err := s.st.startDev(ctx); err != nil {
		return err
	}
	if err := s.st.startWorker(ctx); err != nil {
		return err
	}
	dev, worker := s.st.dev, s.st.worker
	rs := newRunSet(s, "soak-outage", 3)

	// Six runs in flight when the database stops, and one more every half
	// second: their workflows keep trying to record events through the
	// outage, and the API refuses new runs until it ends.
	for i := 1; i <= 6; i++ {
		if err := rs.start(ctx, fmt.Sprintf("o-first-%d", i)); err != nil {
			return err
		}
	}
	tctx, stopTrickle := context.WithCancel(ctx)
	var trickle sync.WaitGroup
	var trickleErr error
	trickle.Add(1)
	go func() {
		defer trickle.Done()
		for i := 1; tctx.Err() == nil; i++ {
			if err := rs.start(tctx, fmt.Sprintf("o%03d", i)); err != nil {
				if tctx.Err() == nil {
					trickleErr = err
				}
				return
			}
			sleep(tctx, 500*time.Millisecond)
		}
	}()
	defer func() { stopTrickle(); trickle.Wait() }()

	deadline := time.Now().Add(90 * time.Second)
	for len(rs.midCommand(rs.started(), 1)) == 0 {
		if time.Now().After(deadline) || ctx.Err() != nil {
			return fmt.Errorf("no command began within 90 s")
		}
		sleep(ctx, 20*time.Millisecond)
	}
	sleep(ctx, time.Second)
	before := len(rs.started())
	down := time.Now()
	if err := s.cluster.Stop(ctx, true); err != nil {
		return err
	}
	s.progress("%s: PostgreSQL stopped (-m immediate) with %d runs started; down for %s", sc.Name, before, s.o.Outage)
	sleep(ctx, s.o.Outage)
	if err := s.cluster.Start(ctx); err != nil {
		return err
	}
	up := time.Now()
	rs.mu.Lock()
	refusedWhileDown := rs.refusals
	rs.mu.Unlock()

	// Delivery resumes: an outbox row delivered after the database came
	// back (its journal row written since).
	var resumed time.Duration
	for {
		var n int64
		err := s.pool.QueryRow(ctx, `SELECT count(*) FROM journal_events j WHERE j.ingested_at >= $1
			AND EXISTS (SELECT 1 FROM kernel_event_outbox o WHERE o.source_id = j.source_id AND o.event_id = j.event_id)`, up).Scan(&n)
		if err == nil && n > 0 {
			resumed = time.Since(up)
			break
		}
		if time.Since(up) > 3*time.Minute || ctx.Err() != nil {
			stopTrickle()
			trickle.Wait()
			return fmt.Errorf("no outbox row delivered within 3 minutes of the database's return (%v)", err)
		}
		sleep(ctx, 50*time.Millisecond)
	}
	apiBack := time.Duration(0)
	for !s.api.healthy(ctx) && time.Since(up) < 3*time.Minute {
		sleep(ctx, 50*time.Millisecond)
	}
	apiBack = time.Since(up)
	sleep(ctx, 3*time.Second) // runs go on starting after the outage
	stopTrickle()
	trickle.Wait()
	if trickleErr != nil {
		sc.problem("%v", trickleErr)
	}
	sc.Rounds = 1
	sc.Recovery.add(resumed)
	s.progress("%s: PostgreSQL back after %.1f s; delivery resumed %.1f s later, API healthy after %.1f s; %d run starts refused while down and retried",
		sc.Name, up.Sub(down).Seconds(), resumed.Seconds(), apiBack.Seconds(), refusedWhileDown)
	if dev != s.st.dev || dev.exited() || worker != s.st.worker || worker.exited() {
		sc.problem("dev or the worker exited during the outage (they must ride it out without a restart)")
	}
	if err := s.settleRuns(ctx, sc, rs); err != nil {
		return err
	}
	sc.figure("outage_seconds", roundS(up.Sub(down)))
	sc.figure("delivery_resumed_after_seconds", roundS(resumed))
	sc.figure("api_healthy_after_seconds", roundS(apiBack))
	sc.figure("runs_in_flight_at_the_stop", before)
	sc.figure("run_starts_refused_while_down_and_retried", refusedWhileDown)
	return nil
}

// started returns the runs acknowledged so far.
func (rs *runSet) started() []string {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	return append([]string(nil), rs.runs...)
}
