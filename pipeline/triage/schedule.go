package triage

import (
	"context"
	"fmt"

	"github.com/robfig/cron/v3"
	"github.com/rs/zerolog"
)

// RunSchedule sweeps on the cron spec (RECKON_TRIAGE_SCHEDULE, e.g.
// "@every 5m" or "*/5 * * * *") until ctx ends. A sweep still running when
// the next is due is not overlapped: the due one is skipped. Sweep errors
// are logged; the schedule goes on. The on-call gauges of what waits for
// people are refreshed after every sweep and once at the start
// (RefreshBacklog). With a Shard, the process sweeps only its share of
// the projects, and renews its leases while it runs.
func (s *Sweeper) RunSchedule(ctx context.Context, spec string, p SweepParams) error {
	sched, err := cron.ParseStandard(spec)
	if err != nil {
		return fmt.Errorf("RECKON_TRIAGE_SCHEDULE %q: %w", spec, err)
	}
	log := s.cfg.Log // the caller names the component (app: "triage")
	c := cron.New(cron.WithChain(cron.SkipIfStillRunning(cronLogger{log})), cron.WithLogger(cronLogger{log}))
	refresh := func() {
		if err := s.RefreshBacklog(ctx); err != nil && ctx.Err() == nil {
			log.Warn().Err(err).Msg("on-call gauges not refreshed; they keep their last values")
		}
	}
	if s.cfg.Shard != nil {
		// Claimed before the first sweep, renewed until ctx ends.
		if _, err := s.Claim(ctx); err != nil {
			log.Warn().Err(err).Msg("sweep leases not claimed; the next renewal tries again")
		}
		p.Sharded = true
		done := make(chan struct{})
		defer func() { <-done }()
		go func() { defer close(done); s.renewLeases(ctx) }()
	}
	c.Schedule(sched, cron.FuncJob(func() {
		if _, err := s.Sweep(ctx, p); err != nil && ctx.Err() == nil {
			log.Error().Err(err).Msg("triage sweep failed")
		}
		refresh()
	}))
	log.Info().Str("schedule", spec).Str("supervisor", s.cfg.Supervisor.Name()).Msg("triage schedule started")
	refresh()
	c.Start()
	<-ctx.Done()
	// Wait for a running sweep to notice ctx and return.
	<-c.Stop().Done()
	return nil
}

// cronLogger routes cron's own messages to zerolog (debug for routine
// messages, error for panics and skips).
type cronLogger struct{ l zerolog.Logger }

func (c cronLogger) Info(msg string, kv ...any) {
	c.l.Debug().Fields(kv).Msg("cron: " + msg)
}

func (c cronLogger) Error(err error, msg string, kv ...any) {
	c.l.Error().Err(err).Fields(kv).Msg("cron: " + msg)
}
