package app

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/rs/zerolog"

	"github.com/seed-7bc021c3/reckon/kernel"
	"github.com/seed-7bc021c3/reckon/kernel/operations"
	"github.com/seed-7bc021c3/reckon/pipeline/triage"
)

// maxRequestedTriages bounds the triages of runs asked for on
// operations.TriageChannel that run at once; a request beyond it, or for
// a run already being triaged on request, is dropped (the scheduled sweep
// takes the run).
const maxRequestedTriages = 2

// listenTriageRequests triages the runs asked for on
// operations.TriageChannel (the MCP gateway's held calls) with sw, on the
// sweep's path and per-run lock, until ctx ends; after a lost connection
// it listens again.
func listenTriageRequests(ctx context.Context, pool *pgxpool.Pool, sw *triage.Sweeper, log zerolog.Logger) {
	var (
		mu      sync.Mutex
		running = map[kernel.RunKey]bool{}
		wg      sync.WaitGroup
	)
	defer wg.Wait()
	sweep := func(k kernel.RunKey) {
		mu.Lock()
		if running[k] || len(running) >= maxRequestedTriages {
			mu.Unlock()
			return
		}
		running[k] = true
		mu.Unlock()
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, err := sw.Sweep(ctx, triage.SweepParams{Project: k.Project, RunID: k.RunID}); err != nil && ctx.Err() == nil {
				log.Warn().Err(err).Str("project", k.Project).Str("run_id", k.RunID).Msg("requested triage failed; the scheduled sweep takes the run")
			}
			mu.Lock()
			delete(running, k)
			mu.Unlock()
		}()
	}
	backoff := time.Second
	for ctx.Err() == nil {
		err := listenOnce(ctx, pool, operations.TriageChannel, sweep)
		if ctx.Err() != nil {
			return
		}
		log.Warn().Err(err).Dur("retry_in", backoff).Msg("not listening for triage requests; the scheduled sweep covers them meanwhile")
		select {
		case <-ctx.Done():
			return
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, time.Minute)
	}
}

// listenOnce holds one connection listening on channel, passing each
// {project, run_id} payload to got, until it fails or ctx ends.
func listenOnce(ctx context.Context, pool *pgxpool.Pool, channel string, got func(kernel.RunKey)) error {
	conn, err := pgx.ConnectConfig(ctx, pool.Config().ConnConfig.Copy())
	if err != nil {
		return fmt.Errorf("connect: %w", err)
	}
	defer conn.Close(context.WithoutCancel(ctx))
	if _, err := conn.Exec(ctx, "LISTEN "+pgx.Identifier{channel}.Sanitize()); err != nil {
		return fmt.Errorf("listen on %s: %w", channel, err)
	}
	for {
		n, err := conn.WaitForNotification(ctx)
		if err != nil {
			return fmt.Errorf("wait for a notification on %s: %w", channel, err)
		}
		var k kernel.RunKey
		if json.Unmarshal([]byte(n.Payload), &k) == nil && k.Project != "" && k.RunID != "" {
			got(k)
		}
	}
}
