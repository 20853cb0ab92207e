// Package app assembles reckon's pieces into a running process: the
// PostgreSQL pool and migrations, the journal, the outbox publisher and the
// HTTP API. Subcommands of cmd/reckon build on it; main stays thin.
package app

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/signal"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/mattn/go-isatty"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/rs/zerolog"
	"go.temporal.io/sdk/client"

	"github.com/seed-7bc021c3/reckon/adapter/auth"
	"github.com/seed-7bc021c3/reckon/adapter/console"
	"github.com/seed-7bc021c3/reckon/adapter/httpapi"
	"github.com/seed-7bc021c3/reckon/kernel/journal"
	"github.com/seed-7bc021c3/reckon/kernel/operations"
	"github.com/seed-7bc021c3/reckon/kernel/outbox"
	"github.com/seed-7bc021c3/reckon/kernel/retention"
	"github.com/seed-7bc021c3/reckon/kernel/webhook"
	"github.com/seed-7bc021c3/reckon/migrations"
	"github.com/seed-7bc021c3/reckon/platform/certfile"
	"github.com/seed-7bc021c3/reckon/platform/config"
)

// NewLogger builds the process logger: JSON by default, console on a TTY or
// when RECKON_LOG_FORMAT=console.
func NewLogger(cfg config.Config) zerolog.Logger {
	lvl, err := zerolog.ParseLevel(strings.ToLower(cfg.LogLevel))
	if err != nil {
		lvl = zerolog.InfoLevel
	}
	format := cfg.LogFormat
	if format == "" {
		format = "json"
		if isatty.IsTerminal(os.Stderr.Fd()) {
			format = "console"
		}
	}
	var l zerolog.Logger
	if format == "console" {
		// Colour only on a terminal: escapes in a file or a pipe are noise.
		l = zerolog.New(zerolog.ConsoleWriter{Out: os.Stderr, TimeFormat: time.TimeOnly, NoColor: !isatty.IsTerminal(os.Stderr.Fd())})
	} else {
		l = zerolog.New(os.Stderr)
	}
	return l.Level(lvl).With().Timestamp().Logger()
}

// OpenPool connects to cfg.DatabaseURL. With create set, a missing database
// is created first (what `reckon dev` does on a fresh machine).
func OpenPool(ctx context.Context, dbURL string, create bool) (*pgxpool.Pool, error) {
	pcfg, err := pgxpool.ParseConfig(dbURL)
	if err != nil {
		return nil, &config.Error{Var: "DATABASE_URL", Problem: fmt.Sprintf("is not a PostgreSQL URL: %v", err)}
	}
	if create {
		if err := createDatabase(ctx, dbURL, pcfg.ConnConfig.Database); err != nil {
			return nil, err
		}
	}
	pool, err := pgxpool.NewWithConfig(ctx, pcfg)
	if err != nil {
		return nil, &config.Error{Var: "DATABASE_URL", Problem: fmt.Sprintf("cannot be used: %v", err)}
	}
	pctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := pool.Ping(pctx); err != nil {
		pool.Close()
		return nil, &config.Error{Var: "DATABASE_URL", Problem: fmt.Sprintf("is unreachable (%s): %s — start PostgreSQL (`make db`) or point DATABASE_URL at one", redact(dbURL), oneLine(err))}
	}
	return pool, nil
}

func createDatabase(ctx context.Context, dbURL, name string) error {
	u, err := url.Parse(dbURL)
	if err != nil || name == "" {
		return nil
	}
	admin := *u
	admin.Path = "/postgres"
	cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	conn, err := pgx.Connect(cctx, admin.String())
	if err != nil {
		return &config.Error{Var: "DATABASE_URL", Problem: fmt.Sprintf("is unreachable (%s): %s — start PostgreSQL (`make db`) or point DATABASE_URL at one", redact(dbURL), oneLine(err))}
	}
	defer conn.Close(ctx)
	_, err = conn.Exec(cctx, "CREATE DATABASE "+pgx.Identifier{name}.Sanitize())
	var pgErr *pgconn.PgError
	if err != nil && !(errors.As(err, &pgErr) && pgErr.Code == "42P04") {
		return fmt.Errorf("create database %s: %w", name, err)
	}
	return nil
}

// oneLine folds a multi-line error (pgx lists every address it tried) into
// the one line a configuration error promises.
func oneLine(err error) string {
	return strings.Join(strings.Fields(strings.ReplaceAll(err.Error(), "\n", "; ")), " ")
}

func redact(s string) string {
	u, err := url.Parse(s)
	if err != nil {
		return "?"
	}
	return u.Redacted()
}

// Core is the part of the stack every role shares: configuration, logger,
// pool, journal, metrics registry and tokens.
type Core struct {
	Cfg      config.Config
	Log      zerolog.Logger
	Pool     *pgxpool.Pool
	Journal  *journal.Store
	Registry *prometheus.Registry
	Tokens   *auth.Tokens
	// OutboxMetrics is shared by every publisher of the process; it is
	// registered (with the backlog gauges) by the first NewPublisher, so
	// a process that publishes nothing shows no outbox series.
	OutboxMetrics *outbox.Metrics
	// OperationsMetrics is shared by every operations service the process
	// builds (the API's and the sweep's), so their figures land in one
	// series; registered by the first OperationsService.
	OperationsMetrics *operations.Metrics

	outboxOnce, opsOnce sync.Once
	// tlsOnce loads the API's TLS pair once (APITLS).
	tlsOnce sync.Once
	tlsCfg  *tls.Config
	tlsErr  error
	// reloadMu serializes ReloadTokens; added are the tokens AddToken
	// registered, kept across reloads.
	reloadMu sync.Mutex
	added    []func(*auth.Tokens)
}

// AddToken registers a token the configuration does not name (dev's
// generated one); ReloadTokens keeps it.
func (c *Core) AddToken(name, role, secret string) {
	c.reloadMu.Lock()
	defer c.reloadMu.Unlock()
	c.added = append(c.added, func(t *auth.Tokens) { t.Add(name, role, secret) })
	c.Tokens.Add(name, role, secret)
}

// ReloadTokens reads RECKON_TOKENS_FILE again and swaps the token set the
// API authenticates against, whole: a token removed or commented out is
// refused from the next request on, a new one accepted, a new role applies.
// RECKON_TOKENS is the value the process started with (its environment
// cannot change). A file that cannot be read or parsed changes nothing: the
// error (naming the line) is logged and returned, and the old set serves on.
// The log says how many tokens were loaded, never a secret.
func (c *Core) ReloadTokens() error {
	c.reloadMu.Lock()
	defer c.reloadMu.Unlock()
	if c.Cfg.TokensFile == "" {
		c.Log.Info().Int("tokens", c.Tokens.Len()).Msg("tokens not reloaded: RECKON_TOKENS_FILE is unset and RECKON_TOKENS cannot change in a running process")
		return nil
	}
	next, err := auth.Load(c.Cfg.Tokens, c.Cfg.TokensFile)
	if err == nil && next.FromFile() == 0 && !next.EmptyOnPurpose() {
		// A truncated file (or one left with comments only) would lock
		// out every caller it served: refused like a parse error
		// (TestReloadRefusesAnEmptyTokensFile).
		err = fmt.Errorf("configuration: RECKON_TOKENS_FILE names no token; a file that is empty on purpose says so with a line %q", auth.AllowEmptyDirective)
	}
	if err != nil {
		c.Log.Error().Err(err).Int("tokens", c.Tokens.Len()).Msg("tokens not reloaded; the tokens loaded before are still in force")
		return err
	}
	for _, add := range c.added {
		add(next)
	}
	c.Tokens.Replace(next)
	if next.Len() == 0 {
		c.Log.Warn().Msg("tokens reloaded: none is configured now, so the API refuses every request")
		return nil
	}
	c.Log.Info().Int("tokens", next.Len()).Msgf("tokens reloaded from RECKON_TOKENS and RECKON_TOKENS_FILE: %d", next.Len())
	return nil
}

// ReloadTokensOn calls ReloadTokens on each of the signals (SIGHUP for
// `reckon serve` and `reckon dev`) until ctx ends. Once it returns, the
// signals are being caught: one sent then no longer ends the process.
func (c *Core) ReloadTokensOn(ctx context.Context, sig ...os.Signal) {
	onSignal(ctx, func() { _ = c.ReloadTokens() }, sig...)
}

// KeepOnSignal makes each of the signals a logged no-op for a
// long-running command that has nothing to reload (what names it:
// `reckon worker`, `reckon mcp-gateway`), until ctx ends. SIGHUP's
// default action ends a process: an operator reloading the API's tokens
// with `pkill -HUP reckon` would kill every worker in the middle of its
// calls (each then uncertain) and every gateway with its sessions.
func (c *Core) KeepOnSignal(ctx context.Context, what string, sig ...os.Signal) {
	onSignal(ctx, func() {
		c.Log.Info().Msgf("%s has nothing to reload on this signal (reckon serve and reckon dev reload RECKON_TOKENS_FILE); ignored", what)
	}, sig...)
}

// onSignal calls f on each of the signals until ctx ends; once it
// returns, the signals are being caught.
func onSignal(ctx context.Context, f func(), sig ...os.Signal) {
	ch := make(chan os.Signal, 1)
	signal.Notify(ch, sig...)
	go func() {
		defer signal.Stop(ch)
		for {
			select {
			case <-ctx.Done():
				return
			case <-ch:
				f()
			}
		}
	}()
}

// NewCore connects and migrates. createDB creates a missing database (dev).
func NewCore(ctx context.Context, cfg config.Config, createDB bool) (*Core, error) {
	log := NewLogger(cfg)
	for _, w := range cfg.Warnings() {
		log.Warn().Msg(w)
	}
	tokens, err := auth.Load(cfg.Tokens, cfg.TokensFile)
	if err != nil {
		return nil, err
	}
	pool, err := OpenPool(ctx, cfg.DatabaseURL, createDB)
	if err != nil {
		return nil, err
	}
	if _, err := migrations.Apply(ctx, pool); err != nil {
		pool.Close()
		return nil, err
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return &Core{
		Cfg: cfg, Log: log, Pool: pool, Registry: reg, Tokens: tokens,
		Journal:           journal.New(pool, reg),
		OutboxMetrics:     outbox.NewMetrics(nil, nil),
		OperationsMetrics: operations.NewMetrics(nil),
	}, nil
}

// Close releases the pool.
func (c *Core) Close() { c.Pool.Close() }

// NewAPI builds the HTTP API of a process, the same for `dev` and
// `serve --api`: ingest into the core's journal (kernel runs refused, per
// operations.Owners), runs through k's starter, the operations listing,
// reconcile, history, queue, projects and verdicts through ops, and the
// operator console at / (a page over the same API).
// A nil k serves no runs (a process without Temporal). POST /v1/triage
// sweeps with a sweeper of its own over ops (the same per-run locks as the
// pipeline's).
func (c *Core) NewAPI(k *Kernel, ops *operations.Service) (*httpapi.Server, error) {
	var runs httpapi.RunService
	if k != nil {
		runs = k.Starter
	}
	tlsCfg, err := c.APITLS()
	if err != nil {
		return nil, err
	}
	sw, err := c.NewSweeper(ops)
	if err != nil {
		return nil, err
	}
	return httpapi.New(httpapi.Config{
		Tokens: c.Tokens, Log: c.Log, Registry: c.Registry,
		Health:  func(ctx context.Context) error { return c.Pool.Ping(ctx) },
		Ready:   c.ReadyChecks(k),
		Journal: c.Journal,
		Owners:  operations.Owners{Pool: c.Pool},
		// The listing's window: an agent's tool.started dated before it
		// would never be listed (httpapi.Config.OperationsWindow).
		OperationsWindow:  c.Cfg.OperationsWindow,
		Runs:              runs,
		Operations:        ops,
		Verdicts:          ops,
		Watch:             ops,
		Triage:            Triager{Sweeper: sw},
		Console:           console.Handler(),
		TLS:               tlsCfg,
		MaxConnsPerClient: c.Cfg.HTTPMaxConnsPerClient,
	}), nil
}

// APITLS is the API's TLS configuration: nil without RECKON_TLS_CERT_FILE
// (plain HTTP), else the pair in those files, read at the first call (a
// pair that does not load stops start-up; `reckon serve --api` asks before
// it connects to anything else) and again whenever the files are
// replaced. Read here rather than with the rest of the configuration: only
// a process serving the API needs to read the key.
func (c *Core) APITLS() (*tls.Config, error) {
	c.tlsOnce.Do(func() { c.tlsCfg, c.tlsErr = c.loadAPITLS() })
	return c.tlsCfg, c.tlsErr
}

func (c *Core) loadAPITLS() (*tls.Config, error) {
	if c.Cfg.TLSCertFile == "" {
		return nil, nil
	}
	log := c.Log.With().Str("component", "tls").Logger()
	pair, err := certfile.Load(c.Cfg.TLSCertFile, c.Cfg.TLSKeyFile, certfile.Options{OnReload: func(err error) {
		if err != nil {
			log.Error().Err(err).Msg("TLS certificate files changed but do not load; the certificate in service is kept")
			return
		}
		log.Info().Msg("TLS certificate reloaded from RECKON_TLS_CERT_FILE and RECKON_TLS_KEY_FILE")
	}})
	if err != nil {
		return nil, fmt.Errorf("RECKON_TLS_CERT_FILE / RECKON_TLS_KEY_FILE: %w", err)
	}
	leaf := pair.Leaf()
	log.Info().Str("subject", leaf.Subject.String()).Time("not_after", leaf.NotAfter).Msg("the API serves HTTPS")
	return pair.TLSConfig(), nil
}

// NewPublisher returns an in-process publisher from the outbox to the
// journal, with the journal's open-hint repair, the journal's partitions
// (created ahead on every pass, dropped past RECKON_JOURNAL_RETENTION), the
// evidence retention (RECKON_EVIDENCE_RETENTION) and the prune of
// delivered webhooks in its maintenance loop, which runs every
// outbox.Config.PruneEvery (a minute by default).
func (c *Core) NewPublisher(cfg outbox.Config) *outbox.Publisher {
	c.outboxOnce.Do(func() { c.OutboxMetrics.MustRegister(c.Registry, c.Pool) })
	return outbox.NewPublisher(c.Pool, c.Journal, cfg, c.OutboxMetrics, c.Log.With().Str("component", "publisher").Logger()).
		WithMaintenance("journal maintenance", "journal open hints repaired", c.Journal.RepairOpenHints).
		WithMaintenance("journal retention", "journal events past RECKON_JOURNAL_RETENTION dropped (with their key rows past the key horizon)",
			(&retention.Journal{Pool: c.Pool, Retention: c.Cfg.JournalRetention, ExportDir: c.Cfg.JournalExportDir,
				Window: c.Cfg.OperationsWindow, Log: c.Log.With().Str("component", "journal retention").Logger()}).Maintain).
		WithMaintenance("evidence retention", "evidence older than RECKON_EVIDENCE_RETENTION pruned",
			retention.Evidence{Pool: c.Pool, Retention: c.Cfg.EvidenceRetention}.Prune).
		WithMaintenance("webhook prune", "delivered webhook notifications pruned",
			func(ctx context.Context) (int64, error) { return webhook.Prune(ctx, c.Pool) })
}

// ReadyChecks are what GET /readyz checks in a process: PostgreSQL, and
// the Temporal frontend when k (the process's kernel; nil for a
// publisher-only process, which needs no Temporal) is set.
func (c *Core) ReadyChecks(k *Kernel) []httpapi.ReadyCheck {
	checks := []httpapi.ReadyCheck{{Name: "postgresql", Check: func(ctx context.Context) error {
		_, err := c.Pool.Exec(ctx, "SELECT 1")
		return err
	}}}
	if k != nil {
		tc := k.Conn.Client
		checks = append(checks, httpapi.ReadyCheck{Name: "temporal", Check: func(ctx context.Context) error {
			_, err := tc.CheckHealth(ctx, &client.CheckHealthRequest{})
			return err
		}})
	}
	return checks
}

// ServeMetrics serves the process's registry at /metrics on addr
// (RECKON_METRICS_ADDR; 127.0.0.1:0 picks a port, sent on bound) until ctx
// ends: each role of `reckon serve` exposes the series it moves, and
// answers /healthz and /readyz as the API does (ReadyChecks over k).
func (c *Core) ServeMetrics(ctx context.Context, addr string, k *Kernel, bound chan<- string) error {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("listen on %s (RECKON_METRICS_ADDR): %w", addr, err)
	}
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", promhttp.HandlerFor(c.Registry, promhttp.HandlerOpts{}))
	httpapi.ProbeRoutes(mux, c.Pool.Ping, c.ReadyChecks(k), c.Log.With().Str("component", "metrics").Logger())
	// The API's bounds: a scrape is one small answer, nothing streams.
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: httpapi.ReadHeaderTimeout,
		WriteTimeout: httpapi.WriteTimeout, IdleTimeout: httpapi.IdleTimeout}
	if bound != nil {
		bound <- ln.Addr().String()
	}
	go func() {
		<-ctx.Done()
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(sctx)
	}()
	if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("metrics on %s: %w", addr, err)
	}
	return nil
}
