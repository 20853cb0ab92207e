package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"strings"
	"sync"
	"syscall"

	"github.com/seed-7bc021c3/reckon/internal/app"
	"github.com/seed-7bc021c3/reckon/kernel/operations"
	"github.com/seed-7bc021c3/reckon/kernel/outbox"
	"github.com/seed-7bc021c3/reckon/pipeline/triage"
	"github.com/seed-7bc021c3/reckon/platform/config"
)

// runServe runs the chosen roles against TEMPORAL_ADDRESS and DATABASE_URL.
// Each role scales on its own: several publishers, workers and sweepers may
// run in separate processes (publishers claim with SKIP LOCKED, sweeps lock
// each run).
func runServe(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	api := fs.Bool("api", false, "serve the HTTP API on RECKON_HTTP_ADDR")
	wrk := fs.Bool("worker", false, "execute runs from the Temporal task queue")
	pub := fs.Bool("publisher", false, "drain the outbox into the journal, and deliver RECKON_WEBHOOKS")
	pipe := fs.Bool("pipeline", false, "run the triage sweep on RECKON_TRIAGE_SCHEDULE")
	roleChecks := func(c *config.Config) error {
		if !*api && !*wrk && !*pub && !*pipe {
			*api, *wrk, *pub, *pipe = true, true, true, true
		}
		if *api || *wrk || *pipe {
			return needTemporal("is required by serve --api/--worker/--pipeline (use `reckon dev` for the embedded server)")(c)
		}
		return nil
	}
	s, err := prologue(fs, args, roleChecks)
	if err != nil {
		return err
	}
	if err := s.openCore(ctx); err != nil {
		return err
	}
	defer s.close()
	cfg, core := s.cfg, s.core
	hup, stopHup := context.WithCancel(ctx)
	defer stopHup()
	core.ReloadTokensOn(hup, syscall.SIGHUP) // re-reads RECKON_TOKENS_FILE
	needsTemporal := *api || *wrk || *pipe
	if *api && core.Tokens.Len() == 0 {
		return &config.Error{Var: "RECKON_TOKENS", Problem: "(or RECKON_TOKENS_FILE) must name at least one token for serve --api; nobody could call the API otherwise"}
	}
	if *api {
		// A TLS pair that does not load stops start-up here, before
		// Temporal is dialled.
		if _, err := core.APITLS(); err != nil {
			return err
		}
	}

	var roles []string
	var kernel *app.Kernel
	var ops *operations.Service // one service, so API and sweep share liveness caches
	if needsTemporal {
		kernel, err = core.StartKernel(ctx, app.KernelConfig{NoWorker: !*wrk})
		if err != nil {
			return fmt.Errorf("kernel: %w", err)
		}
		defer kernel.Close()
		if *wrk {
			roles = append(roles, "worker")
		}
	}

	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var wg sync.WaitGroup
	errc := make(chan error, 4)
	if *api {
		ops = core.OperationsService(kernel.Conn.Client)
		srv, err := core.NewAPI(kernel, ops)
		if err != nil {
			return fmt.Errorf("api: %w", err)
		}
		bound := make(chan string, 1)
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := srv.Listen(ctx, cfg.HTTPAddr, bound); err != nil {
				errc <- fmt.Errorf("api: %w", err)
			}
		}()
		select {
		case addr := <-bound:
			roles = append(roles, "api on "+srv.Scheme()+"://"+addr)
		case err := <-errc:
			cancel()
			wg.Wait()
			return err
		}
	}
	if *pub {
		p := core.NewPublisher(outbox.Config{})
		wg.Add(1)
		go func() {
			defer wg.Done()
			_ = p.Run(ctx)
		}()
		roles = append(roles, "publisher")
		if d := core.NewDeliverer(); d != nil {
			wg.Add(1)
			go func() {
				defer wg.Done()
				_ = d.Run(ctx)
			}()
			roles = append(roles, fmt.Sprintf("webhooks (%d endpoints)", len(cfg.Webhooks)))
		}
	}
	if *pipe {
		if ops == nil {
			ops = core.OperationsService(kernel.Conn.Client)
		}
		sw, err := core.NewSweeper(ops)
		if err != nil {
			return err
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := sw.RunSchedule(ctx, cfg.TriageSchedule, triage.SweepParams{}); err != nil && !errors.Is(err, context.Canceled) {
				errc <- fmt.Errorf("pipeline: %w", err)
			}
		}()
		roles = append(roles, "pipeline ("+cfg.TriageSchedule+")")
	}
	if cfg.MetricsAddr != "" {
		bound := make(chan string, 1)
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := core.ServeMetrics(ctx, cfg.MetricsAddr, bound); err != nil {
				errc <- err
			}
		}()
		select {
		case addr := <-bound:
			roles = append(roles, "metrics on http://"+addr+"/metrics")
		case err := <-errc:
			cancel()
			wg.Wait()
			return err
		}
	}
	core.Log.Log().Strs("roles", roles).Msgf("reckon serve: %s", strings.Join(roles, ", "))
	select {
	case <-ctx.Done():
	case err = <-errc:
	}
	cancel()
	wg.Wait()
	return err
}
