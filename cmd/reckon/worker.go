package main

import (
	"context"
	"flag"
	"fmt"
	"os"

	"github.com/seed-7bc021c3/reckon/internal/app"
	"github.com/seed-7bc021c3/reckon/kernel/config"
)

func init() {
	register("worker", "run worker only: executes runs from TEMPORAL_ADDRESS's task queue (no API, no publisher)", runWorker)
}

// runWorker runs the run workflow and its activities against an external
// (or another process's embedded) Temporal frontend. Events go to the
// outbox in DATABASE_URL; a publisher elsewhere delivers them.
func runWorker(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("worker", flag.ContinueOnError)
	if err := fs.Parse(args); err != nil {
		return err
	}
	cfg, err := config.Load()
	if err != nil {
		return err
	}
	if cfg.TemporalAddress == "" {
		return &config.Error{Var: "TEMPORAL_ADDRESS", Problem: "is required for a separate worker (`reckon dev` prints its embedded server's address)"}
	}
	core, err := app.NewCore(ctx, cfg, false)
	if err != nil {
		return err
	}
	defer core.Close()
	k, err := core.StartKernel(ctx, app.KernelConfig{})
	if err != nil {
		return err
	}
	defer k.Close()
	fmt.Fprintf(os.Stderr, "reckon worker: executing runs from task queue %s on %s (namespace %s)\n", cfg.TaskQueue, cfg.TemporalAddress, cfg.TemporalNamespace)
	<-ctx.Done()
	return nil
}
