package app

import (
	"context"
	"fmt"
	"sync"

	"github.com/seed-7bc021c3/reckon/adapter/auth"
	"github.com/seed-7bc021c3/reckon/adapter/httpapi"
	"github.com/seed-7bc021c3/reckon/kernel/operations"
	"github.com/seed-7bc021c3/reckon/kernel/outbox"
	"github.com/seed-7bc021c3/reckon/platform/config"
)

// DevConfig configures StartDev.
type DevConfig struct {
	// Outbox tunes the stack's outbox publisher.
	Outbox outbox.Config
	// Kernel tunes Temporal and the run worker.
	Kernel KernelConfig
}

// Stack is a running dev stack: API, outbox publisher, Temporal (embedded unless
// TEMPORAL_ADDRESS is set) with the run worker, and (as later pieces land)
// the triage pipeline, in one process.
type Stack struct {
	*Core
	API            *httpapi.Server
	APIAddr        string
	GeneratedToken string // set when no token was configured
	// Kernel is Temporal, the run worker and the run starter.
	Kernel *Kernel
	// Operations is the operations service mounted on the API, with
	// Temporal liveness for kernel runs.
	Operations *operations.Service

	ctx     context.Context
	cancel  context.CancelFunc
	wg      sync.WaitGroup
	closers []func()
}

// StartDev creates the database if missing, migrates, connects to Temporal
// (starting the embedded server unless TEMPORAL_ADDRESS is set), starts the
// run worker, the API (runs, operations and verdicts mounted), the
// outbox publisher and, with RECKON_WEBHOOKS, the webhook deliverer.
// Without configured tokens it generates an operator token.
func StartDev(ctx context.Context, cfg config.Config, o DevConfig) (*Stack, error) {
	core, err := NewCore(ctx, cfg, true)
	if err != nil {
		return nil, err
	}
	s := &Stack{Core: core}
	if core.Tokens.Len() == 0 {
		s.GeneratedToken = auth.NewSecret()
		core.AddToken("dev", auth.RoleOperator, s.GeneratedToken)
	}
	runCtx, cancel := context.WithCancel(context.Background())
	s.ctx, s.cancel = runCtx, cancel

	k, err := core.StartKernel(ctx, o.Kernel)
	if err != nil {
		cancel()
		core.Close()
		return nil, fmt.Errorf("kernel: %w", err)
	}
	s.Kernel = k
	s.OnClose(k.Close)
	s.Operations = core.OperationsService(k.Conn.Client)
	if s.API, err = core.NewAPI(k, s.Operations); err != nil {
		s.Close()
		return nil, fmt.Errorf("api: %w", err)
	}

	bound := make(chan string, 1)
	errc := make(chan error, 1)
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		errc <- s.API.Listen(runCtx, cfg.HTTPAddr, bound)
	}()
	select {
	case s.APIAddr = <-bound:
	case err := <-errc:
		s.Close()
		return nil, fmt.Errorf("api: %w", err)
	}

	pub := core.NewPublisher(o.Outbox)
	s.Go(func(ctx context.Context) { _ = pub.Run(ctx) })
	if d := core.NewDeliverer(); d != nil {
		s.Go(func(ctx context.Context) { _ = d.Run(ctx) })
	}
	return s, nil
}

// APIURL is the API's base URL: its scheme (https with
// RECKON_TLS_CERT_FILE) and APIAddr.
func (s *Stack) APIURL() string { return s.API.Scheme() + "://" + s.APIAddr }

// OnClose registers f to run when the stack closes, before the pool closes.
func (s *Stack) OnClose(f func()) { s.closers = append(s.closers, f) }

// Go runs f in the stack's lifetime: its context ends at Close, which
// waits for f to return.
func (s *Stack) Go(f func(ctx context.Context)) {
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		f(s.ctx)
	}()
}

// Close stops everything the stack started and releases the pool.
func (s *Stack) Close() {
	if s.cancel != nil {
		s.cancel()
	}
	s.wg.Wait()
	for i := len(s.closers) - 1; i >= 0; i-- {
		s.closers[i]()
	}
	s.Core.Close()
}
