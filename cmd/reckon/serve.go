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
	"github.com/seed-7bc021c3/reckon/platform/buildinfo"
	"github.com/seed-7bc021c3/reckon/platform/config"
)

// runServe runs the chosen roles against TEMPORAL_ADDRESS and DATABASE_URL.
// Each role scales on its own: several publishers, workers and sweepers may
// run in separate processes (publishers claim with SKIP LOCKED, sweeps lock
// each run).
func runServe(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	r := serveFlags(fs)
	s, err := prologue(fs, args, r.check)
	if err != nil {
		return err
	}
	if err := s.openCore(ctx); err != nil {
		return err
	}
	defer s.close()
	hup, stopHup := context.WithCancel(ctx)
	defer stopHup()
	s.core.ReloadTokensOn(hup, syscall.SIGHUP) // re-reads RECKON_TOKENS_FILE
	if err := r.ready(ctx, s.core); err != nil {
		return err
	}
	sv := &server{core: s.core, cfg: s.cfg, errc: make(chan error, 4)}
	if r.needsTemporal() {
		kernel, err := s.core.StartKernel(ctx, app.KernelConfig{NoWorker: !r.worker})
		if err != nil {
			return fmt.Errorf("kernel: %w", err)
		}
		defer kernel.Close()
		sv.kernel = kernel
		if r.worker {
			sv.roles = append(sv.roles, "worker")
		}
	}
	sv.ctx, sv.cancel = context.WithCancel(ctx)
	defer sv.cancel()
	if err := sv.start(r); err != nil {
		return err
	}
	return sv.wait()
}

// serveRoles are the roles serve runs; all of them when no flag names one.
type serveRoles struct{ api, worker, publisher, pipeline bool }

// serveFlags defines serve's flags on fs.
func serveFlags(fs *flag.FlagSet) *serveRoles {
	r := &serveRoles{}
	fs.BoolVar(&r.api, "api", false, "serve the HTTP API on RECKON_HTTP_ADDR")
	fs.BoolVar(&r.worker, "worker", false, "execute runs from the Temporal task queue")
	fs.BoolVar(&r.publisher, "publisher", false, "drain the outbox into the journal, and deliver RECKON_WEBHOOKS")
	fs.BoolVar(&r.pipeline, "pipeline", false, "run the triage sweep on RECKON_TRIAGE_SCHEDULE and resume the runs that wait for a settlement")
	return r
}

// check settles the roles once the flags are parsed and requires Temporal
// for the roles that use it.
func (r *serveRoles) check(c *config.Config) error {
	if !r.api && !r.worker && !r.publisher && !r.pipeline {
		r.api, r.worker, r.publisher, r.pipeline = true, true, true, true
	}
	if r.needsTemporal() {
		return needTemporal("is required by serve --api/--worker/--pipeline (use `reckon dev` for the embedded server)")(c)
	}
	return nil
}

// needsTemporal: every role but the publisher talks to Temporal.
func (r *serveRoles) needsTemporal() bool { return r.api || r.worker || r.pipeline }

// ready checks what the roles need before Temporal is dialled: for the
// API a token to be called with and, when configured, a TLS pair that
// loads; for the pipeline the workers' workspaces and the MCP servers its
// probes read.
func (r *serveRoles) ready(ctx context.Context, core *app.Core) error {
	if r.api {
		if core.Tokens.Len() == 0 {
			return &config.Error{Var: "RECKON_TOKENS", Problem: "(or RECKON_TOKENS_FILE) must name at least one token for serve --api; nobody could call the API otherwise"}
		}
		if _, err := core.APITLS(); err != nil {
			return err
		}
	}
	if r.pipeline {
		if err := core.CheckProbes(ctx); err != nil {
			return err
		}
	}
	return nil
}

// server is serve's running roles: each runs in wg until ctx ends or one
// of them fails (errc).
type server struct {
	core   *app.Core
	cfg    config.Config
	kernel *app.Kernel
	ops    *operations.Service // one service, so API and sweep share liveness caches
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
	errc   chan error
	roles  []string
}

// start starts the roles r names, then the metrics endpoint when one is
// configured.
func (sv *server) start(r *serveRoles) error {
	if r.api {
		if err := sv.startAPI(); err != nil {
			return err
		}
	}
	if r.publisher {
		sv.startPublisher()
	}
	if r.pipeline {
		if err := sv.startPipeline(); err != nil {
			return err
		}
	}
	if sv.cfg.MetricsAddr != "" {
		addr, err := sv.listen(func(bound chan<- string) error {
			return sv.core.ServeMetrics(sv.ctx, sv.cfg.MetricsAddr, sv.kernel, bound)
		})
		if err != nil {
			return err
		}
		sv.roles = append(sv.roles, "metrics on http://"+addr+"/metrics")
	}
	return nil
}

// startAPI serves the HTTP API and returns once it listens.
func (sv *server) startAPI() error {
	sv.ops = sv.core.OperationsService(sv.kernel.Conn.Client)
	srv, err := sv.core.NewAPI(sv.kernel, sv.ops)
	if err != nil {
		return fmt.Errorf("api: %w", err)
	}
	addr, err := sv.listen(func(bound chan<- string) error {
		if err := srv.Listen(sv.ctx, sv.cfg.HTTPAddr, bound); err != nil {
			return fmt.Errorf("api: %w", err)
		}
		return nil
	})
	if err != nil {
		return err
	}
	sv.roles = append(sv.roles, "api on "+srv.Scheme()+"://"+addr)
	return nil
}

// startPublisher drains the outbox until serve ends.
func (sv *server) startPublisher() {
	p := sv.core.NewPublisher(outbox.Config{})
	sv.wg.Add(1)
	go func() {
		defer sv.wg.Done()
		_ = p.Run(sv.ctx)
	}()
	sv.roles = append(sv.roles, "publisher")
	if d := sv.core.NewDeliverer(); d != nil {
		sv.wg.Add(1)
		go func() {
			defer sv.wg.Done()
			_ = d.Run(sv.ctx)
		}()
		sv.roles = append(sv.roles, fmt.Sprintf("webhooks (%d endpoints)", len(sv.cfg.Webhooks)))
	}
}

// startPipeline runs the triage sweep on its schedule, and the resumer of
// the runs that wait for a settlement: the pipeline role has both what a
// run that begins to wait asks for (the sweeper, whose triage of that run
// takes the same lock as the scheduled sweep) and the Temporal client
// that signals it.
func (sv *server) startPipeline() error {
	if sv.ops == nil {
		sv.ops = sv.core.OperationsService(sv.kernel.Conn.Client)
	}
	sw, err := sv.core.NewSweeper(sv.ops, sv.core.SweepShard(sv.ops))
	if err != nil {
		return err
	}
	res := sv.core.NewResumer(sv.kernel.Conn.Client, sw)
	sv.wg.Add(2)
	go func() {
		defer sv.wg.Done()
		if err := sw.RunSchedule(sv.ctx, sv.cfg.TriageSchedule, triage.SweepParams{}); err != nil && !errors.Is(err, context.Canceled) {
			sv.errc <- fmt.Errorf("pipeline: %w", err)
		}
	}()
	go func() {
		defer sv.wg.Done()
		_ = res.Run(sv.ctx)
	}()
	sv.roles = append(sv.roles, "pipeline ("+sv.cfg.TriageSchedule+", resuming waiting runs)")
	return nil
}

// listen runs serve, a listener that sends its address on bound once it
// listens, and returns that address; when serve fails first, it stops the
// roles started so far and returns the failure.
func (sv *server) listen(serve func(bound chan<- string) error) (string, error) {
	bound := make(chan string, 1)
	sv.wg.Add(1)
	go func() {
		defer sv.wg.Done()
		if err := serve(bound); err != nil {
			sv.errc <- err
		}
	}()
	select {
	case addr := <-bound:
		return addr, nil
	case err := <-sv.errc:
		sv.cancel()
		sv.wg.Wait()
		return "", err
	}
}

// wait logs the roles, then waits until serve's context ends or a role
// fails, and stops them all.
func (sv *server) wait() error {
	sv.core.Log.Log().Strs("roles", sv.roles).Str("version", buildinfo.Read().String()).Msgf("reckon serve: %s", strings.Join(sv.roles, ", "))
	var err error
	select {
	case <-sv.ctx.Done():
	case err = <-sv.errc:
	}
	sv.cancel()
	sv.wg.Wait()
	return err
}
