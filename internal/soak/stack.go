package soak

import (
	"context"
	"fmt"
	"time"
)

// stack is the system under test: `reckon dev --no-worker` (API, embedded
// Temporal, publisher) and, for runs, one separate `reckon worker`, the
// only worker there is, so that killing it kills every tool call in
// flight.
type stack struct {
	ps       *procs
	api      *client
	dev      *proc
	worker   *proc
	temporal string // the embedded Temporal frontend of the current dev
}

// readyTimeout bounds a start of dev or worker (the first start builds
// nothing, but migrates and starts the embedded server).
const readyTimeout = 3 * time.Minute

// startDev starts `reckon dev --no-worker` and waits until its API is
// healthy.
func (st *stack) startDev(ctx context.Context) error {
	p, err := st.ps.start("dev", []string{"dev", "--no-worker"})
	if err != nil {
		return err
	}
	addr, err := p.await(ctx, temporalLine, readyTimeout)
	if err != nil {
		p.kill()
		return err
	}
	deadline := time.Now().Add(readyTimeout)
	for !st.api.healthy(ctx) {
		if p.exited() || time.Now().After(deadline) || ctx.Err() != nil {
			p.kill()
			return fmt.Errorf("reckon dev: API %s not healthy (exited: %v); see its log", st.api.base, p.exited())
		}
		time.Sleep(50 * time.Millisecond)
	}
	st.dev, st.temporal = p, addr
	return nil
}

// startWorker starts `reckon worker` against the current dev's Temporal.
func (st *stack) startWorker(ctx context.Context) error {
	p, err := st.ps.start("worker", []string{"worker"}, "TEMPORAL_ADDRESS="+st.temporal)
	if err != nil {
		return err
	}
	if _, err := p.await(ctx, workerLine, readyTimeout); err != nil {
		p.kill()
		return err
	}
	st.worker = p
	return nil
}

// killDev SIGKILLs dev (API, publisher and embedded Temporal at once).
func (st *stack) killDev() {
	if st.dev != nil {
		st.dev.kill()
		st.dev = nil
	}
}

// killWorker SIGKILLs the worker.
func (st *stack) killWorker() {
	if st.worker != nil {
		st.worker.kill()
		st.worker = nil
	}
}

// stop ends the worker and dev gracefully.
func (st *stack) stop() {
	if st.worker != nil {
		st.worker.stop(20 * time.Second)
		st.worker = nil
	}
	if st.dev != nil {
		st.dev.stop(30 * time.Second)
		st.dev = nil
	}
}
