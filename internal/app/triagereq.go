package app

import (
	"context"
	"sync"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/rs/zerolog"

	"github.com/seed-7bc021c3/reckon/kernel"
	"github.com/seed-7bc021c3/reckon/kernel/operations"
	"github.com/seed-7bc021c3/reckon/pipeline/triage"
	"github.com/seed-7bc021c3/reckon/platform/pglisten"
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
	pglisten.Listen(ctx, pool, operations.TriageChannel, "not listening for triage requests; the scheduled sweep covers them meanwhile", log, func(payload string) {
		if k, ok := kernel.ParseRunKey(payload); ok {
			sweep(k)
		}
	}, nil)
}
