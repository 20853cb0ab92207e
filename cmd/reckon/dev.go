package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"syscall"

	"github.com/seed-7bc021c3/reckon/internal/app"
)

func runDev(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("dev", flag.ContinueOnError)
	noWorker := fs.Bool("no-worker", false, "run no run worker in this process: runs wait for a separate `reckon worker` (TEMPORAL_ADDRESS = the embedded server printed at start)")
	s, err := prologue(fs, args)
	if err != nil {
		return err
	}
	cfg := s.cfg
	stack, err := app.StartDev(ctx, cfg, app.DevConfig{Kernel: app.KernelConfig{NoWorker: *noWorker}})
	if err != nil {
		return err
	}
	defer stack.Close()
	if cfg.TokensFile != "" {
		// Only with a file to re-read: dev often runs in a terminal, whose
		// hangup (SIGHUP) should still end it.
		stack.Core.ReloadTokensOn(ctx, syscall.SIGHUP)
	}
	if stack.GeneratedToken != "" {
		fmt.Fprintf(os.Stderr, "reckon dev: no RECKON_TOKENS set; generated operator token (shown once):\n  %s\n", stack.GeneratedToken)
	}
	if err := stack.StartPipeline(stack.Operations); err != nil {
		return err
	}
	// Start-up lines go through the logger (with no level: shown at any
	// RECKON_LOG_LEVEL), so in JSON mode every line
	// of the stream is JSON (the generated token above is the one
	// exception: a secret shown once belongs on the terminal, not in logs).
	log := stack.Core.Log
	log.Log().Str("api_addr", stack.APIAddr).Msgf("reckon dev: API on %s", stack.APIURL())
	if e := stack.Kernel.Conn.Embedded; e != nil {
		more := "more workers"
		if *noWorker {
			more = "no run worker here (--no-worker); runs wait for one"
		}
		log.Log().Str("temporal_address", e.HostPort()).Msgf("reckon dev: embedded Temporal on %s (namespace %s, task queue %s); %s: TEMPORAL_ADDRESS=%s reckon worker",
			e.HostPort(), cfg.TemporalNamespace, cfg.TaskQueue, more, e.HostPort())
	} else if *noWorker {
		log.Log().Msgf("reckon dev: no run worker here (--no-worker); runs wait for `reckon worker` on task queue %s at %s", cfg.TaskQueue, cfg.TemporalAddress)
	}
	<-ctx.Done()
	return nil
}
