package app

import (
	"context"
	"crypto/rand"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"go.temporal.io/sdk/client"

	"github.com/seed-7bc021c3/reckon/adapter/httpapi"
	"github.com/seed-7bc021c3/reckon/kernel"
	"github.com/seed-7bc021c3/reckon/kernel/manifest"
	"github.com/seed-7bc021c3/reckon/kernel/operations"
	"github.com/seed-7bc021c3/reckon/kernel/priorstate"
	"github.com/seed-7bc021c3/reckon/kernel/runner"
	"github.com/seed-7bc021c3/reckon/pipeline"
	"github.com/seed-7bc021c3/reckon/pipeline/probe"
	"github.com/seed-7bc021c3/reckon/pipeline/supervisor"
	"github.com/seed-7bc021c3/reckon/pipeline/triage"
	"github.com/seed-7bc021c3/reckon/platform/config"
	"github.com/seed-7bc021c3/reckon/tool/mcptool"
)

// NewSupervisor returns the supervisor the configuration selects: the
// OpenAI-compatible model when RECKON_SUPERVISOR_BASE_URL and
// RECKON_SUPERVISOR_MODEL are set, the built-in evidence-based one
// otherwise. m, when not nil, receives model latency and invalid outputs.
func NewSupervisor(cfg config.Config, m *triage.Metrics) (pipeline.Supervisor, error) {
	if cfg.SupervisorBaseURL == "" || cfg.SupervisorModel == "" {
		return supervisor.Builtin{}, nil
	}
	oc := supervisor.OpenAIConfig{BaseURL: cfg.SupervisorBaseURL, APIKey: cfg.SupervisorAPIKey, Model: cfg.SupervisorModel}
	if m != nil {
		oc.Observe = m.ObserveModelCall
		oc.OnInvalid = func(error) { m.InvalidOutput(supervisor.OpenAIName) }
	}
	return supervisor.NewOpenAI(oc)
}

// NewProbes returns the probes the configuration allows: the workspace
// postcondition probe over the kernel runs' workspaces beneath
// <RECKON_DATA_DIR>/workspaces, the child-run
// replay over the journal, and the MCP lookup_operation probe over
// RECKON_MCP_SERVERS when servers are configured.
func (c *Core) NewProbes() (probe.Set, error) {
	// config.Load made DataDir absolute.
	root := filepath.Join(c.Cfg.DataDir, "workspaces")
	owners := operations.Owners{Pool: c.Pool}
	manifests := manifest.Store{Pool: c.Pool}
	set := probe.Set{probe.Workspace{Root: root, Owners: owners, Manifests: manifests}, probe.Child{Journal: c.Journal},
		probe.Diff{Root: root, Owners: owners, Manifests: manifests, Limits: c.ManifestLimits()}}
	servers, err := mcptool.LoadServers(c.Cfg.MCPServers, c.Cfg.ProbeContracts)
	if err != nil {
		return nil, err
	}
	if len(servers) > 0 {
		set = append(set, probe.MCP{Looker: probe.MCPClient{Servers: servers, Workspaces: probe.Workspaces{Root: root, Owners: owners}},
			Priors: priorstate.Store{Pool: c.Pool}, Owners: owners})
	}
	return set, nil
}

// CheckProbes is a triage process's start-up check of the evidence its
// probes read, so that a wrong setup stops it with one line naming the
// variable instead of every probe finding nothing:
//
//   - RECKON_DATA_DIR must hold the workers' workspaces: the workspace of
//     the newest manifest a worker recorded in RECKON_OPERATIONS_WINDOW
//     (a workspace that existed when it was taken, and that reckon never
//     deletes) must be a directory this process can read. A process given
//     another data directory than the workers' (unset: ./.reckon) fails
//     here. Without any manifest there is nothing to see yet.
//   - every server of RECKON_MCP_SERVERS must answer tools/list.
//
// TestTriageRefusesWrongDataDir, TestTriageRefusesUnreachableMCPServer.
func (c *Core) CheckProbes(ctx context.Context) error {
	if err := c.checkWorkspaces(ctx); err != nil {
		return err
	}
	servers, err := mcptool.LoadServers(c.Cfg.MCPServers, c.Cfg.ProbeContracts)
	if err != nil {
		return err
	}
	if err := mcptool.Reach(ctx, servers, mcptool.Config{}); err != nil {
		return &config.Error{Var: "RECKON_MCP_SERVERS", Problem: oneLine(err) + "; the MCP probe asks these servers (probe contracts: docs/probe-contracts.md)"}
	}
	return nil
}

// checkWorkspaces is CheckProbes' check of RECKON_DATA_DIR.
func (c *Core) checkWorkspaces(ctx context.Context) error {
	k, at, ok, err := manifest.Store{Pool: c.Pool}.Newest(ctx, time.Now().Add(-c.Cfg.OperationsWindow))
	if err != nil || !ok {
		return err
	}
	ws := filepath.Join(c.Cfg.DataDir, "workspaces", k.Project, k.RunID)
	if _, err := os.ReadDir(ws); err != nil {
		return &config.Error{Var: "RECKON_DATA_DIR", Problem: fmt.Sprintf("(%s) does not hold the workers' workspaces: "+
			"a worker recorded run %s of project %s in its workspace at %s, but reading it here failed (%s); "+
			"give this process the workers' RECKON_DATA_DIR (the same directory or shared volume), readable by it",
			c.Cfg.DataDir, kernel.Printable(k.RunID), kernel.Printable(k.Project), at.UTC().Format(time.RFC3339), oneLine(err))}
	}
	return nil
}

// ManifestLimits are the workspace manifests' caps
// (RECKON_MANIFEST_MAX_FILES, RECKON_MANIFEST_BUDGET).
func (c *Core) ManifestLimits() manifest.Limits {
	return manifest.Limits{MaxFiles: c.Cfg.ManifestMaxFiles, Budget: c.Cfg.ManifestBudget}
}

// NewSweeper builds the triage sweeper from the configuration (supervisor,
// probes) over ops, with its metrics on c.Registry (shared by every sweeper
// of the process). tune, when given, adjusts the sweep configuration
// (budget, concurrency) before use.
func (c *Core) NewSweeper(ops triage.Operations, tune ...func(*triage.Config)) (*triage.Sweeper, error) {
	m := triage.NewMetrics(c.Registry)
	sup, err := NewSupervisor(c.Cfg, m)
	if err != nil {
		return nil, err
	}
	probes, err := c.NewProbes()
	if err != nil {
		return nil, err
	}
	sc := triage.Config{
		Supervisor: sup, Probes: probes, Metrics: m, SettlePolicy: c.Cfg.SupervisorSettle,
		Log: c.Log.With().Str("component", "triage").Logger(),
	}
	for _, f := range tune {
		f(&sc)
	}
	return triage.New(ops, sc), nil
}

// SweepShard has a scheduled sweeper share the projects with the other
// pipeline processes on the database, by the sweep leases
// (RECKON_SWEEP_LEASE, triage.Shard), when ops holds them (the operations
// service does); it names this process by host, pid and a random suffix.
func (c *Core) SweepShard(ops triage.Operations) func(*triage.Config) {
	return func(sc *triage.Config) {
		leases, ok := ops.(triage.Leases)
		if !ok {
			return
		}
		lease := c.Cfg.SweepLease
		if lease <= 0 {
			lease = config.DefaultSweepLease
		}
		host, _ := os.Hostname()
		sc.Shard = &triage.Shard{Leases: leases, Lease: lease,
			Holder: fmt.Sprintf("%s/%d/%s", host, os.Getpid(), rand.Text()[:8])}
	}
}

// StartPipeline runs the pipeline role in the stack's lifetime over ops
// (nil: journal-liveness operations): the cron-driven triage sweep
// (RECKON_TRIAGE_SCHEDULE), the triage of runs asked for on
// operations.TriageChannel (listenTriageRequests) and, with a kernel, the resumer of waiting
// runs (NewResumer).
func (s *Stack) StartPipeline(ops triage.Operations) error {
	if ops == nil {
		ops = s.OperationsService(nil)
	}
	sw, err := s.NewSweeper(ops, s.SweepShard(ops))
	if err != nil {
		return err
	}
	spec := s.Cfg.TriageSchedule
	s.Go(func(ctx context.Context) {
		if err := sw.RunSchedule(ctx, spec, triage.SweepParams{}); err != nil {
			s.Log.Error().Err(err).Msg("triage schedule stopped")
		}
	})
	log := s.Log.With().Str("component", "triage").Logger()
	s.Go(func(ctx context.Context) { listenTriageRequests(ctx, s.Pool, sw, log) })
	if s.Kernel != nil {
		r := s.NewResumer(s.Kernel.Conn.Client, sw)
		s.Go(func(ctx context.Context) { _ = r.Run(ctx) })
	}
	return nil
}

// NewResumer builds the resumer of waiting runs (runner.Resumer), the
// pipeline role's: it signals the runs on tc whose awaited operation a
// probe or an operator settled, and has sw triage a run that begins to
// wait, on the sweep's path and under its per-run lock.
func (c *Core) NewResumer(tc client.Client, sw *triage.Sweeper) *runner.Resumer {
	log := c.Log.With().Str("component", "resumer").Logger()
	return &runner.Resumer{
		Pool: c.Pool, Client: tc, AwaitTimeout: c.Cfg.AwaitTimeout, Log: log,
		Triage: func(ctx context.Context, project, runID string) {
			if _, err := sw.Sweep(ctx, triage.SweepParams{Project: project, RunID: runID}); err != nil && ctx.Err() == nil {
				log.Warn().Err(err).Str("project", project).Str("run_id", runID).Msg("triage of a waiting run failed; the scheduled sweep takes it")
			}
		},
	}
}

// Triager runs POST /v1/triage's sweep (httpapi.TriageService).
type Triager struct{ Sweeper *triage.Sweeper }

var _ httpapi.TriageService = Triager{}

// TriageNow sweeps the request's scope and answers what the sweep did.
func (t Triager) TriageNow(ctx context.Context, req httpapi.TriageRequest) (httpapi.TriageAnswer, error) {
	rep, err := t.Sweeper.Sweep(ctx, triage.SweepParams{Project: req.Project, RunID: req.RunID})
	if err != nil {
		return httpapi.TriageAnswer{}, err
	}
	return TriageAnswer(rep), nil
}

// TriageAnswer is a sweep's report as POST /v1/triage answers it: its
// walls, and the operations they settled (occurred or none) and left for
// a person (unknown, or in a wall whose verdict asked for attention), as
// the operator's queue counts them.
func TriageAnswer(rep triage.Report) httpapi.TriageAnswer {
	ans := httpapi.TriageAnswer{Walls: []httpapi.TriageWall{}, Settled: []httpapi.TriageOutcome{}, Attention: []httpapi.TriageOutcome{}}
	for _, w := range rep.Walls {
		tw := httpapi.TriageWall{Project: w.Project, RunID: w.RunID, Part: w.Part, Parts: w.Parts,
			Operations: append([]string{}, w.Operations...), Outcome: w.Outcome, Supervisor: w.Supervisor, Error: w.Error}
		if w.Decision != nil {
			tw.NeedsAttention = w.Decision.NeedsAttention
		}
		if w.Verdict != nil {
			k := w.Verdict.Key()
			tw.Verdict = &k
		}
		ans.Walls = append(ans.Walls, tw)
		for _, ev := range w.Reconciled {
			var d kernel.Reconciliation
			if ev.DecodeData(&d) != nil {
				continue
			}
			o := httpapi.TriageOutcome{Project: ev.Project, RunID: ev.RunID, OperationID: d.OperationID,
				Effect: d.Effect, Basis: d.Basis, ProposedEffect: d.ProposedEffect, Reconciliation: ev.Key()}
			if d.Effect != kernel.EffectUnknown {
				ans.Settled = append(ans.Settled, o)
			}
			if d.Effect == kernel.EffectUnknown || tw.NeedsAttention {
				ans.Attention = append(ans.Attention, o)
			}
		}
	}
	return ans
}
