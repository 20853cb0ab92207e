package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"syscall"
	"time"

	"github.com/seed-7bc021c3/reckon/adapter/gateway"
	"github.com/seed-7bc021c3/reckon/kernel/operations"
	"github.com/seed-7bc021c3/reckon/kernel/outbox"
)

// runMCPGateway is `reckon mcp-gateway` (see gateway.ParseCommand and
// docs/mcp-gateway.md). In stdio mode stdout belongs to the MCP session:
// everything else goes to stderr.
func runMCPGateway(ctx context.Context, args []string) error {
	c, err := gateway.ParseCommand(args, os.Getenv, os.Stderr)
	if gateway.IsHelp(err) {
		return nil
	}
	var ue *gateway.UsageError
	if errors.As(err, &ue) {
		return &usageError{err: ue.Err}
	}
	if err != nil {
		return err
	}
	s, err := prologue(nil, nil) // gateway.ParseCommand parsed the flags
	if err != nil {
		return err
	}
	if err := s.openCore(ctx); err != nil {
		return err
	}
	defer s.close()
	core := s.core
	core.KeepOnSignal(ctx, "reckon mcp-gateway", syscall.SIGHUP)
	c.Log = core.Log.With().Str("component", "mcp-gateway").Logger()
	// The API's tokens, when this environment names them: the gateway's
	// source may not be one an agent writes under.
	c.TokenSources = core.Tokens.Sources()
	// The retry guard over the journal the gateway writes (docs/mcp-gateway.md#the-retry-guard);
	// a held call asks the pipeline's triage listener for its earlier
	// operation's run.
	c.Guard = operations.New(core.Pool, operations.Config{Window: core.Cfg.OperationsWindow})
	c.GuardExempt = core.Cfg.GuardExempt
	c.Triage = func(ctx context.Context, project, runID string) {
		if err := operations.RequestTriage(ctx, core.Pool, project, runID); err != nil {
			core.Log.Warn().Err(err).Msg("mcp gateway: triage not requested; the scheduled sweep takes the run")
		}
	}
	g, err := gateway.New(ctx, core.Pool, c.Config)
	if err != nil {
		return err
	}

	pubCtx, stopPub := context.WithCancel(context.WithoutCancel(ctx))
	pubDone := make(chan struct{})
	if c.Publisher {
		go func() {
			defer close(pubDone)
			_ = core.NewPublisher(outbox.Config{}).Run(pubCtx)
		}()
	} else {
		close(pubDone)
	}

	if c.HTTPAddr == "" {
		err = g.ServeStdio(ctx, os.Stdin, os.Stdout)
	} else {
		ln, lerr := net.Listen("tcp", c.HTTPAddr)
		if lerr != nil {
			g.Close()
			err = fmt.Errorf("--http: %w", lerr)
		} else {
			fmt.Fprintf(os.Stderr, "reckon mcp-gateway: listening on http://%s%s (project %s, %d tools)\n", ln.Addr(), gateway.HTTPPath, c.Project, len(g.Tools()))
			err = g.ServeHTTP(ctx, ln)
		}
	}

	stopPub()
	<-pubDone
	if c.Publisher {
		// The runs' ends were just enqueued: deliver them before exiting.
		dctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		if derr := core.NewPublisher(outbox.Config{}).Drain(dctx); derr != nil {
			core.Log.Warn().Err(derr).Msg("mcp gateway: events left in the outbox for the next publisher")
		}
		cancel()
	}
	return err
}
