package main

import (
	"context"
	"flag"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/seed-7bc021c3/reckon/internal/app"
	"github.com/seed-7bc021c3/reckon/platform/config"
)

// session is what a subcommand's prologue gives it: its flags parsed, the
// configuration from the environment, and what it opened of the database
// (openPool, openCore). close releases that.
//
// Every subcommand starts the same way: define flags on a FlagSet, call
// prologue, open what it needs. A CLI library (cobra, ff) would replace
// the FlagSet and the dispatch in main.go; prologue and session stay.
type session struct {
	cfg  config.Config
	core *app.Core
	pool *pgxpool.Pool
}

// prologue parses args into fs (positional arguments are refused; a nil
// fs is a command that parsed its own), loads the configuration and
// applies checks to it (in order; the first error stops start-up),
// without opening anything.
func prologue(fs *flag.FlagSet, args []string, checks ...func(*config.Config) error) (*session, error) {
	if fs != nil {
		if err := parseFlags(fs, args); err != nil {
			return nil, err
		}
	}
	cfg, err := config.Load()
	if err != nil {
		return nil, err
	}
	for _, check := range checks {
		if err := check(&cfg); err != nil {
			return nil, err
		}
	}
	return &session{cfg: cfg}, nil
}

// openPool connects to DATABASE_URL (creating the database when create
// is set) without migrating.
func (s *session) openPool(ctx context.Context, create bool) error {
	pool, err := app.OpenPool(ctx, s.cfg.DatabaseURL, create)
	if err != nil {
		return err
	}
	s.pool = pool
	return nil
}

// openCore connects, migrates and builds the core every role shares.
func (s *session) openCore(ctx context.Context) error {
	core, err := app.NewCore(ctx, s.cfg, false)
	if err != nil {
		return err
	}
	s.core, s.pool = core, core.Pool
	return nil
}

// close releases what the session opened.
func (s *session) close() {
	switch {
	case s.core != nil:
		s.core.Close()
	case s.pool != nil:
		s.pool.Close()
	}
}

// needTemporal is a check: the command needs an external Temporal
// (TEMPORAL_ADDRESS); why says what for.
func needTemporal(why string) func(*config.Config) error {
	return func(c *config.Config) error {
		if c.TemporalAddress == "" {
			return &config.Error{Var: "TEMPORAL_ADDRESS", Problem: why}
		}
		return nil
	}
}
