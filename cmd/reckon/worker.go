package main

import (
	"context"
	"flag"
	"syscall"

	"github.com/seed-7bc021c3/reckon/internal/app"
)

// runWorker runs the run workflow and its activities against an external
// (or another process's embedded) Temporal frontend. Events go to the
// outbox in DATABASE_URL; a publisher elsewhere delivers them.
func runWorker(ctx context.Context, args []string) error {
	s, err := prologue(flag.NewFlagSet("worker", flag.ContinueOnError), args,
		needTemporal("is required for a separate worker (`reckon dev` prints its embedded server's address)"))
	if err != nil {
		return err
	}
	if err := s.openCore(ctx); err != nil {
		return err
	}
	defer s.close()
	s.core.KeepOnSignal(ctx, "reckon worker", syscall.SIGHUP)
	cfg := s.cfg
	k, err := s.core.StartKernel(ctx, app.KernelConfig{})
	if err != nil {
		return err
	}
	defer k.Close()
	s.core.Log.Log().Msgf("reckon worker: executing runs from task queue %s on %s (namespace %s)", cfg.TaskQueue, cfg.TemporalAddress, cfg.TemporalNamespace)
	<-ctx.Done()
	return nil
}
