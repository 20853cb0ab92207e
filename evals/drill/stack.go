package drill

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/rs/zerolog"

	"github.com/seed-7bc021c3/reckon/internal/app"
	"github.com/seed-7bc021c3/reckon/internal/fakeopenai"
	"github.com/seed-7bc021c3/reckon/internal/mcpserver"
	"github.com/seed-7bc021c3/reckon/kernel/operations"
	"github.com/seed-7bc021c3/reckon/kernel/outbox"
	"github.com/seed-7bc021c3/reckon/kernel/runner"
	"github.com/seed-7bc021c3/reckon/platform/config"
	"github.com/seed-7bc021c3/reckon/platform/temporalx"
	"github.com/seed-7bc021c3/reckon/tool/mcptool"
	"github.com/seed-7bc021c3/reckon/tool/sandbox"
)

// StackConfig configures the live stack drills run on.
type StackConfig struct {
	// Config is the process configuration; DatabaseURL should name a
	// database (or schema) of the drill's own, and DataDir holds the
	// workspaces and the test MCP server's store. RECKON_MCP_SERVERS is
	// replaced by the drill's two servers.
	Config config.Config
	// FilesystemServer is the path of @modelcontextprotocol/server-filesystem's
	// dist/index.js; empty leaves the filesystem kinds unavailable.
	FilesystemServer string
	// MemoryServer is the path of @modelcontextprotocol/server-memory's
	// dist/index.js; empty leaves the memory kinds unavailable. It serves
	// two stores: server "memory"'s, <DataDir>/mcp-memory/<project>.jsonl,
	// which only the project's runs write (declared exclusive), and server
	// "shared"'s, <DataDir>/mcp-memory/shared.jsonl, which other agents
	// write too (not declared exclusive).
	MemoryServer string
	// Tau2, when set, adds the tau2 retail server over its data
	// (server "retail", one database per run, declared exclusive, with the
	// tau2-retail probe contracts).
	Tau2 *Tau2Suite
	// NPMDir, when set, is testdata/npm with mcp-sqlite and
	// @cyanheads/git-mcp-server installed (FindNPMDir): the stack serves
	// them as servers "sqlite" and "git" (docs/evals.md#real-mcp-servers).
	NPMDir string
	// Node is the node binary for the npm servers (default "node").
	Node string
	Log  zerolog.Logger
}

// Stack is the embedded stack: PostgreSQL through the app core, an
// embedded (or external) real Temporal server, the outbox publisher, the
// sandboxed run_command, reckon's test MCP server over streamable HTTP and
// the third-party filesystem MCP server over stdio, the operations service
// and the pipeline's sweeper with its probes.
type Stack struct {
	Core     *app.Core
	Temporal *temporalx.Conn
	Tools    runner.ToolSet
	Ops      *operations.Service
	// Filesystem and Memory are true when the filesystem and memory MCP
	// servers are configured.
	Filesystem, Memory bool

	// issueStore is the test MCP server's store, which an agent_run drill
	// writes with a client of the agent's own.
	issueStore *mcpserver.Store
	// model is the scripted model (internal/fakeopenai) of the
	// kernel_agent_* drills' agent runs, each scripted under a model name
	// of its own.
	model *fakeopenai.AgentModel
	// tau2 and tau2Dir are the tau2 suite and the folder of its runs'
	// databases, when the stack serves it.
	tau2    *Tau2Suite
	tau2Dir string
	http    []*http.Server
	cancel  context.CancelFunc
	wg      sync.WaitGroup

	// npmDir and sqliteDir serve the real-server suites (servers.go).
	npmDir, sqliteDir string
}

// OpenStack starts everything a drill needs. Close stops it.
func OpenStack(ctx context.Context, o StackConfig) (*Stack, error) {
	cfg := o.Config
	st := &Stack{}
	if err := sandbox.Available(""); err != nil && !cfg.SandboxUnconfined {
		return nil, fmt.Errorf("drill: run_command needs bubblewrap (%v); install it (scripts/ensure-deps.sh) or set RECKON_SANDBOX_UNCONFINED=1", err)
	}
	st.model = fakeopenai.NewAgentModel()

	store, issues, err := st.serveTestServer(cfg.DataDir, "issues.json", mcpserver.NewServer)
	if err != nil {
		return nil, err
	}
	st.issueStore = store
	_, notes, err := st.serveTestServer(cfg.DataDir, "notes.json", mcpserver.NewPlainServer)
	if err != nil {
		st.Close()
		return nil, err
	}
	servers := []mcptool.ServerConfig{{Name: "issues", URL: issues}, {Name: NotesServer, URL: notes}}
	node := o.Node
	if node == "" {
		node = "node"
	}
	if o.FilesystemServer != "" {
		servers = append(servers, mcptool.ServerConfig{Name: "fs", Command: []string{node, o.FilesystemServer, "{workspace}"}})
		st.Filesystem = true
	}
	if o.MemoryServer != "" {
		dir := filepath.Join(cfg.DataDir, "mcp-memory")
		if err := os.MkdirAll(dir, 0o755); err != nil {
			st.Close()
			return nil, fmt.Errorf("drill: memory server store: %w", err)
		}
		// Only the project's drill runs write the project's store, one run
		// at a time: the operator may declare it exclusive. The shared one
		// is written by other agents too.
		servers = append(servers,
			mcptool.ServerConfig{Name: "memory", Command: []string{node, o.MemoryServer}, Exclusive: true,
				Env: map[string]string{"MEMORY_FILE_PATH": filepath.Join(dir, "{project}.jsonl")}},
			mcptool.ServerConfig{Name: SharedMemoryServer, Command: []string{node, o.MemoryServer},
				Env: map[string]string{"MEMORY_FILE_PATH": filepath.Join(dir, "shared.jsonl")}})
		st.Memory = true
	}
	if o.Tau2 != nil {
		sc, err := st.tau2Server(cfg.DataDir, o.Tau2)
		if err != nil {
			st.Close()
			return nil, err
		}
		servers = append(servers, sc)
	}
	if o.NPMDir != "" {
		npm, err := st.npmServers(cfg.DataDir, o.NPMDir, node)
		if err != nil {
			st.Close()
			return nil, err
		}
		servers = append(servers, npm...)
	}
	raw, err := json.Marshal(servers)
	if err != nil {
		st.Close()
		return nil, fmt.Errorf("drill: mcp servers: %w", err)
	}
	cfg.MCPServers = string(raw)

	core, err := app.NewCore(ctx, cfg, false)
	if err != nil {
		st.Close()
		return nil, err
	}
	st.Core = core
	if err := checkSandbox(core); err != nil {
		st.Close()
		return nil, err
	}
	runCtx, cancel := context.WithCancel(context.Background())
	st.cancel = cancel
	pub := core.NewPublisher(outbox.Config{PollInterval: 20 * time.Millisecond})
	st.wg.Add(1)
	go func() {
		defer st.wg.Done()
		_ = pub.Run(runCtx)
	}()

	tc, err := temporalx.Connect(ctx, temporalx.Config{Address: cfg.TemporalAddress, Namespace: cfg.TemporalNamespace, Log: o.Log})
	if err != nil {
		st.Close()
		return nil, fmt.Errorf("drill: temporal: %w", err)
	}
	st.Temporal = tc
	// The tool set a worker of the process runs, over the servers above.
	if st.Tools, err = core.KernelTools(); err != nil {
		st.Close()
		return nil, err
	}
	st.Ops = core.OperationsService(tc.Client)
	return st, nil
}

// serveTestServer serves reckon's test MCP server (newServer over a store
// in <dataDir>/mcp-test-server/<file>) over streamable HTTP on a port of
// its own, and returns the store and the URL.
func (st *Stack) serveTestServer(dataDir, file string, newServer func(*mcpserver.Store) *mcp.Server) (*mcpserver.Store, string, error) {
	store, err := mcpserver.OpenStore(filepath.Join(dataDir, "mcp-test-server", file))
	if err != nil {
		return nil, "", fmt.Errorf("drill: test MCP server store: %w", err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, "", fmt.Errorf("drill: listen for the test MCP server: %w", err)
	}
	srv := &http.Server{Handler: mcpserver.Handler(newServer(store)), ReadHeaderTimeout: 10 * time.Second}
	st.http = append(st.http, srv)
	st.wg.Add(1)
	go func() {
		defer st.wg.Done()
		_ = srv.Serve(ln)
	}()
	return store, "http://" + ln.Addr().String() + mcpserver.HTTPPath, nil
}

// checkSandbox runs a command in the sandbox of the stack's worker, in its
// data directory, before anything is drilled: a sandbox user that cannot
// reach the directory would fail every command of every run, minutes in.
func checkSandbox(core *app.Core) error {
	if core.Cfg.SandboxUnconfined {
		return nil
	}
	ws := filepath.Join(core.Cfg.DataDir, "workspaces")
	if err := os.MkdirAll(ws, 0o755); err != nil {
		return fmt.Errorf("drill: workspaces directory: %w", err)
	}
	if err := sandbox.Check(core.SandboxConfig(), ws); err != nil {
		return fmt.Errorf("drill: run_command's sandbox cannot run commands in the data directory %s: %w", core.Cfg.DataDir, err)
	}
	return nil
}

// Close stops the stack and releases everything it holds.
func (st *Stack) Close() {
	if st.cancel != nil {
		st.cancel()
	}
	for _, srv := range st.http {
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		_ = srv.Shutdown(sctx)
		cancel()
	}
	st.wg.Wait()
	if st.model != nil {
		st.model.Close()
	}
	if st.Temporal != nil {
		st.Temporal.Close()
	}
	if st.Core != nil {
		st.Core.Close()
	}
}

// FindFilesystemServer looks for server-filesystem's entry point under
// testdata/npm of the repository containing dir (or a parent of it), as
// scripts/ensure-deps.sh installs it; "" when absent.
func FindFilesystemServer(dir string) string { return findNPMServer(dir, "server-filesystem") }

// FindMemoryServer is FindFilesystemServer for server-memory.
func FindMemoryServer(dir string) string { return findNPMServer(dir, "server-memory") }

func findNPMServer(dir, pkg string) string {
	for d := dir; ; d = filepath.Dir(d) {
		p := filepath.Join(d, "testdata", "npm", "node_modules", "@modelcontextprotocol", pkg, "dist", "index.js")
		if _, err := os.Stat(p); err == nil {
			return p
		}
		if parent := filepath.Dir(d); parent == d {
			return ""
		}
	}
}

// errNoWall is returned when the sweep built no wall for a drilled run.
var errNoWall = errors.New("the sweep built no wall for the run (nothing unsettled?)")
