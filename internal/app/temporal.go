package app

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"go.temporal.io/sdk/worker"

	"github.com/seed-7bc021c3/reckon/kernel/fault"
	"github.com/seed-7bc021c3/reckon/kernel/runner"
	"github.com/seed-7bc021c3/reckon/platform/config"
	"github.com/seed-7bc021c3/reckon/platform/temporalx"
	"github.com/seed-7bc021c3/reckon/tool/mcptool"
	"github.com/seed-7bc021c3/reckon/tool/sandbox"
)

// KernelConfig configures the kernel: Temporal connection and run worker.
type KernelConfig struct {
	// Fault overrides KERNEL_FAULT_AFTER_EFFECT / KERNEL_FAULT_BEFORE_EFFECT
	// when set (demo sets it in-process).
	Fault *fault.Config
	// InMemory keeps an embedded Temporal server's state in memory instead
	// of <RECKON_DATA_DIR>/temporal.db.
	InMemory bool
	// NoWorker connects without running a worker (an API-only process).
	NoWorker bool
}

// Kernel is the running kernel of a process: the Temporal connection (and
// embedded server), the run worker and the run starter.
type Kernel struct {
	Conn    *temporalx.Conn
	Worker  worker.Worker // nil with NoWorker
	Starter *runner.Starter
}

// Close stops the worker, then the client and any embedded server.
func (k *Kernel) Close() {
	if k.Worker != nil {
		k.Worker.Stop()
	}
	k.Conn.Close()
}

// KernelTools is the tool set of runs: run_command in the sandbox
// (unconfined only with RECKON_SANDBOX_UNCONFINED=1), then the MCP servers
// of RECKON_MCP_SERVERS.
func (c *Core) KernelTools() (runner.ToolSet, error) {
	mcp, err := mcptool.FromConfig(c.Cfg.MCPServers, c.Cfg.ProbeContracts, mcptool.Config{})
	if err != nil {
		return nil, err // already names RECKON_MCP_SERVERS and the field
	}
	return runner.Chain{runner.NewTools(sandbox.NewRunCommand(c.SandboxConfig())), mcp}, nil
}

// SandboxConfig is run_command's configuration from the environment
// (RECKON_SANDBOX_*).
func (c *Core) SandboxConfig() sandbox.Config {
	return sandbox.Config{
		Unconfined:  c.Cfg.SandboxUnconfined,
		MaxProcs:    c.Cfg.SandboxMaxProcs,
		MaxMemory:   c.Cfg.SandboxMaxMemory,
		MaxFileSize: c.Cfg.SandboxMaxFileSize,
		UID:         c.Cfg.SandboxUID,
		GID:         c.Cfg.SandboxGID,
		// config.Load made DataDir absolute.
		WorkspacesRoot: filepath.Join(c.Cfg.DataDir, "workspaces"),
		Reaped:         c.logReaped,
		Warn:           c.logSandboxWeakened,
	}
}

// logSandboxWeakened logs what leaves run_command's commands less bounded
// than configured (no cgroup for them on this host, one not removed).
func (c *Core) logSandboxWeakened(err error) {
	c.Log.Warn().Err(err).Msg("run_command's sandbox bounds commands less than configured")
}

// logReaped logs the sandboxes a dead worker left running, killed under
// dir (the workspaces at a worker's start, one workspace before its next
// command), or a failure to look for them.
func (c *Core) logReaped(dir string, killed int, err error) {
	c.Log.Warn().Err(err).Int("killed", killed).Str("dir", dir).Msg("killed sandboxes a dead worker left running")
}

// checkSandbox is a worker's start-up check of run_command's sandbox in
// <dataDir>/workspaces: a data directory the sandbox's user cannot reach
// (below a mode-0700 directory, with the worker running as root) stops
// start-up with one line naming RECKON_DATA_DIR, and a sandbox that
// cannot start (bubblewrap missing, namespaces refused: a container
// without what docs/production.md lists) one naming
// RECKON_SANDBOX_UNCONFINED. A check that only ran out of time (a loaded
// machine) is logged, as it says nothing about the configuration.
// TestWorkerRefusesUntraversableDataDir.
func (c *Core) checkSandbox(dataDir string) error {
	ws := filepath.Join(dataDir, "workspaces")
	if err := os.MkdirAll(ws, 0o755); err != nil {
		return &config.Error{Var: "RECKON_DATA_DIR", Problem: fmt.Sprintf("(%s): cannot create the workspaces directory: %s", dataDir, oneLine(err))}
	}
	if err := sandbox.Reachable(c.SandboxConfig(), ws); err != nil {
		return &config.Error{Var: "RECKON_DATA_DIR", Problem: fmt.Sprintf("(%s): %s", dataDir, oneLine(err))}
	}
	// A dead predecessor's sandboxes go before this worker takes work
	// (sandbox.ReapOrphans says how they are left).
	if n, err := sandbox.ReapOrphans(ws); n > 0 || err != nil {
		c.logReaped(ws, n, err)
	}
	err := sandbox.Check(c.SandboxConfig(), ws)
	switch {
	case err == nil:
		return nil
	case errors.Is(err, sandbox.ErrCheckTimedOut):
		c.Log.Error().Err(err).Msg("run_command's sandbox could not be checked at start-up; commands will tell")
		return nil
	default:
		return &config.Error{Var: "RECKON_SANDBOX_UNCONFINED", Problem: fmt.Sprintf("is unset and run_command's sandbox cannot start on this worker: %s; "+
			"give the worker what bubblewrap needs (docs/production.md, \"The sandbox in a container\"), or set RECKON_SANDBOX_UNCONFINED=1 to run commands without it", oneLine(err))}
	}
}

// connectTemporal connects to TEMPORAL_ADDRESS, or starts the embedded
// server (SQLite under RECKON_DATA_DIR, or in memory).
func (c *Core) connectTemporal(ctx context.Context, inMemory bool) (*temporalx.Conn, error) {
	o := temporalx.Config{Address: c.Cfg.TemporalAddress, Namespace: c.Cfg.TemporalNamespace, Log: c.Log}
	if !inMemory {
		o.DataDir = c.Cfg.DataDir
	}
	return temporalx.Connect(ctx, o)
}

// StartKernel connects to Temporal and starts the run worker on
// RECKON_TASK_QUEUE.
func (c *Core) StartKernel(ctx context.Context, o KernelConfig) (*Kernel, error) {
	tools, err := c.KernelTools()
	if err != nil {
		return nil, err
	}
	fc := fault.Config{AfterEffect: c.Cfg.FaultAfterEffect, BeforeEffect: c.Cfg.FaultBeforeEffect}
	if o.Fault != nil {
		fc = *o.Fault
	}
	dataDir := c.Cfg.DataDir // absolute: config.Load made it so
	if !o.NoWorker && !c.Cfg.SandboxUnconfined {
		// Before Temporal is dialled: a worker that cannot run its sandbox
		// stops here rather than failing every run_command (effect none).
		if err := c.checkSandbox(dataDir); err != nil {
			return nil, err
		}
	}
	conn, err := c.connectTemporal(ctx, o.InMemory)
	if err != nil {
		return nil, err
	}
	k := &Kernel{
		Conn: conn,
		Starter: &runner.Starter{
			Pool: c.Pool, Journal: c.Journal, Client: conn.Client, TaskQueue: c.Cfg.TaskQueue,
			DataDir: dataDir, Tools: tools,
			Timeouts:   runner.Timeouts{ToolHeartbeat: c.Cfg.ToolHeartbeatTimeout, Await: c.Cfg.AwaitTimeout},
			AgentModel: c.Cfg.AgentModel,
		},
	}
	if fc.Enabled() {
		c.Log.Warn().Str("after_effect", fc.AfterEffect).Str("before_effect", fc.BeforeEffect).Msg("fault injection is on: matching tool calls will fail crash-style")
	}
	if !o.NoWorker {
		k.Worker = runner.NewWorker(conn.Client, c.Cfg.TaskQueue, &runner.Activities{
			Pool: c.Pool, Journal: c.Journal, Tools: tools,
			Fault:      fault.New(c.Pool, fc),
			Unconfined: c.Cfg.SandboxUnconfined,
			Manifest:   c.ManifestLimits(),
			Model:      c.agentModel(),
			Log:        c.Log.With().Str("component", "worker").Logger(),
		})
		if err := k.Worker.Start(); err != nil {
			conn.Close()
			return nil, fmt.Errorf("start run worker on task queue %s: %w", c.Cfg.TaskQueue, err)
		}
	}
	return k, nil
}

// agentModel is the worker's model endpoint of agent runs, nil when
// RECKON_AGENT_BASE_URL is unset.
func (c *Core) agentModel() *runner.AgentModel {
	if c.Cfg.AgentBaseURL == "" {
		return nil
	}
	return &runner.AgentModel{BaseURL: c.Cfg.AgentBaseURL, APIKey: c.Cfg.AgentAPIKey}
}
