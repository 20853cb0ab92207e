// Package gateway is `reckon mcp-gateway`: an MCP server that sits between
// any MCP client (an agent host) and the MCP servers it would otherwise
// call directly, and makes every tools/call a reckon operation without a
// change to the agent.
//
// It serves the union of the tools of the upstream servers (configured as
// RECKON_MCP_SERVERS), under their own names and with their schemas and
// annotations unchanged. For each tools/call, in this order:
//
//  1. the run's next operation id (op-<n>, a per-run counter in
//     gateway_runs) and tool.started {operation_id, tool: "mcp__<tool>",
//     args, server, upstream_tool, server_endpoint} commit in one
//     transaction (the same transactional outbox as the kernel's, under
//     the gateway's source id, actor "agent");
//  2. only then is the call sent upstream, carrying the operation's
//     idempotency key (mcptool.IdempotencyKey: <project>/<run_id>/<op>) in
//     _meta["dev.reckon/idempotency-key"], and as the Idempotency-Key header
//     to streamable-HTTP upstreams;
//  3. tool.completed, or tool.failed classified exactly as the kernel
//     classifies MCP outcomes (mcptool): arguments failing the tool's input
//     schema or an upstream that could not be reached → effect none; a call
//     sent and then lost, timed out or answered with an error → uncertain.
//
// The client gets the upstream's result unchanged (isError results
// included); only failures the gateway itself detects are answered with an
// isError result of its own, naming what was and was not sent.
//
// Besides tools/call, the gateway relays what the upstreams and the client
// say to each other (relay.go): notifications (log messages, progress,
// list_changed, resource updates, cancellation), the upstreams' requests
// to the client (sampling, elicitation, roots — within the call, which
// stays one operation), and the upstreams' resources, prompts and
// completions, unrecorded (features.go).
//
// Runs: an MCP session is a run (run.started when it is initialised,
// run.completed when it ends with every call answered, run.failed when a
// call was cut by its end). A client may name its run instead by passing
// _meta["dev.reckon/run-id"] on its calls, so a host that restarts keeps
// its run; the gateway never ends such a run. Each gateway process holds a
// lease (gateway_instances); when an instance dies, any other instance ends
// the session runs it held with run.failed once the lease runs out, so
// their unanswered calls show in the crash window, where the triage sweep
// probes them through the same upstream servers.
package gateway

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/rs/zerolog"

	"github.com/seed-7bc021c3/reckon/kernel"
	"github.com/seed-7bc021c3/reckon/platform/defaults"
	"github.com/seed-7bc021c3/reckon/tool/mcptool"
)

// Defaults of Config.
const (
	DefaultProject       = "default"
	DefaultSource        = "mcp-gateway"
	DefaultLease         = 30 * time.Second
	DefaultShutdownGrace = 10 * time.Second
	DefaultSessionIdle   = 30 * time.Minute
	// DefaultMaxSessions is Config.MaxSessions' default.
	DefaultMaxSessions = 256
	// DefaultConnIdle bounds an idle kept-alive connection: without a
	// bound net/http keeps one open forever (ReadHeaderTimeout runs only
	// once a request's first bytes arrive), and anyone who can reach the
	// port, token or not, could hold a file descriptor per connection
	// until the process has none left. A session's open event stream is a
	// request in progress, not an idle connection.
	DefaultConnIdle = 2 * time.Minute
	// DefaultBodyTimeout bounds how long a request's body may take to
	// arrive, as the API's (httpapi.BodyReadTimeout): a client that
	// trickles its body is cut off instead of holding a connection open.
	DefaultBodyTimeout = 30 * time.Second
	// DefaultMaxConnsPerClient is Config.MaxConnsPerClient's default.
	DefaultMaxConnsPerClient = 32
)

// RunIDMeta is the _meta key under which a client names the run of a call
// (the key the kernel's MCP client also sends): "dev.reckon/run-id".
const RunIDMeta = mcptool.RunIDMeta

// HTTPPath is where the streamable HTTP endpoint is served.
const HTTPPath = "/mcp"

// Actor is the actor of every gateway event: the gateway reports on the
// agent's behalf; it is not the kernel.
const Actor = "agent"

const (
	kindSession = "session"
	kindClient  = "client"
)

// Config configure a Gateway.
type Config struct {
	// Project of every run (RECKON_GATEWAY_PROJECT); DefaultProject when empty.
	Project string
	// Source is the source_id of the gateway's events (RECKON_GATEWAY_SOURCE);
	// DefaultSource when empty. kernel, supervisor and operator… are refused.
	Source string
	// Servers are the upstream MCP servers.
	Servers []mcptool.ServerConfig
	// MCP tunes the upstream client (per-call timeout, stdio environment).
	MCP mcptool.Config
	// Lease is how long after its last heartbeat an instance counts as dead
	// (DefaultLease when zero); heartbeats come every Lease/3.
	Lease time.Duration
	// ShutdownGrace is how long calls in flight may finish when the
	// gateway stops (DefaultShutdownGrace when zero).
	ShutdownGrace time.Duration
	// SessionIdle closes HTTP sessions without a request for that long
	// (DefaultSessionIdle when zero).
	SessionIdle time.Duration
	// ConnIdle closes a kept-alive HTTP connection that waits that long
	// for its next request (DefaultConnIdle when zero).
	ConnIdle time.Duration
	// MaxSessions bounds the MCP sessions served over HTTP at once
	// (DefaultMaxSessions when zero): each records a run and may start a
	// process per stdio upstream, so a client opening sessions in a loop
	// would otherwise fill the journal and the process table.
	MaxSessions int
	// BodyTimeout bounds the arrival of an HTTP request's body
	// (DefaultBodyTimeout when zero).
	BodyTimeout time.Duration
	// MaxConnsPerClient caps the HTTP connections one client address holds
	// open at once (RECKON_GATEWAY_MAX_CONNS_PER_CLIENT; zero:
	// DefaultMaxConnsPerClient, negative: no cap).
	MaxConnsPerClient int
	// TokenSources are the sources the API's tokens may write (their
	// names and granted sources, from RECKON_TOKENS and
	// RECKON_TOKENS_FILE when the gateway's environment has them): Source
	// may not be one of them.
	TokenSources []string
	// Guard is the retry guard asked before every tools/call of a tool it
	// applies to (guard.go); nil sends every call unguarded.
	Guard Guard
	// GuardExempt names tools (as their upstream names them) the guard
	// never holds (RECKON_GUARD_EXEMPT).
	GuardExempt []string
	// Triage asks for a triage of one run now: a held call's earlier
	// operation's run (nil: the scheduled sweep takes it).
	Triage func(ctx context.Context, project, runID string)
	// Token, when set, is the bearer token HTTP clients must send.
	Token string
	Log   zerolog.Logger
	// Now is the clock of event timestamps (time.Now when nil).
	Now func() time.Time
}

var (
	projectRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$`)
	// Run ids are the kernel's alphabet without ".", the child-run separator.
	runIDRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_-]{0,127}$`)
)

func (o Config) withDefaults() Config {
	if o.Project == "" {
		o.Project = DefaultProject
	}
	if o.Source == "" {
		o.Source = DefaultSource
	}
	o.Lease = defaults.Positive(o.Lease, DefaultLease)
	o.ShutdownGrace = defaults.Positive(o.ShutdownGrace, DefaultShutdownGrace)
	o.SessionIdle = defaults.Positive(o.SessionIdle, DefaultSessionIdle)
	o.ConnIdle = defaults.Positive(o.ConnIdle, DefaultConnIdle)
	o.MaxSessions = defaults.Positive(o.MaxSessions, DefaultMaxSessions)
	o.BodyTimeout = defaults.Positive(o.BodyTimeout, DefaultBodyTimeout)
	if o.MaxConnsPerClient == 0 {
		o.MaxConnsPerClient = DefaultMaxConnsPerClient
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	return o
}

// Validate checks the options; errors name the setting (variable and flag)
// and what is wrong, in one line.
func (o Config) Validate() error {
	o = o.withDefaults()
	if !projectRE.MatchString(o.Project) || strings.Contains(o.Project, "..") {
		return fmt.Errorf("configuration: RECKON_GATEWAY_PROJECT (--project) must be 1-128 characters of A-Z a-z 0-9 . _ - starting with a letter or digit, got %q", o.Project)
	}
	if err := CheckSource(o.Source); err != nil {
		return err
	}
	if len(o.Servers) == 0 {
		return errors.New("configuration: RECKON_MCP_SERVERS (--servers) names no upstream MCP server; the gateway would serve no tools")
	}
	if err := mcptool.Check(o.Servers); err != nil {
		return fmt.Errorf("configuration: RECKON_MCP_SERVERS%v", err)
	}
	for i, s := range o.Servers {
		if p := s.RunScoped(); len(p) > 0 {
			return fmt.Errorf("configuration: RECKON_MCP_SERVERS[%d] (%q) uses %s: the gateway keeps one upstream session per MCP session, across runs and without a workspace; only {project} is filled (give the gateway its own --servers)", i, s.Name, strings.Join(p, " and "))
		}
	}
	return nil
}

// CheckSource refuses source ids the trust-boundary rules never grant:
// kernel, supervisor and operator… (the gateway is not the kernel and
// speaks for agents, not people).
func CheckSource(src string) error {
	switch {
	case src == "":
		return errors.New("configuration: RECKON_GATEWAY_SOURCE (--source) must not be empty")
	case src == kernel.SourceKernel || src == kernel.ActorSupervisor || strings.HasPrefix(src, "operator"):
		return fmt.Errorf("configuration: RECKON_GATEWAY_SOURCE (--source) %q is reserved (kernel, supervisor and operator… are never an agent's source); use e.g. %q", src, DefaultSource)
	case len(src) > 128 || strings.ContainsAny(src, " \t\n/"):
		return fmt.Errorf("configuration: RECKON_GATEWAY_SOURCE (--source) must be at most 128 characters without spaces or \"/\", got %q", src)
	}
	return nil
}

// upstream is one configured server.
type upstream struct {
	cfg mcptool.ServerConfig
	// endpoint is cfg.Endpoint(), computed once, for each call's
	// tool.started (server_endpoint).
	endpoint     string
	instructions string
}

// tool is one served tool.
type tool struct {
	up  *upstream
	def *mcp.Tool
}

// Gateway is the MCP gateway: build it with New, serve it with ServeStdio
// or Handler, stop it with Close.
type Gateway struct {
	o        Config
	st       store
	log      zerolog.Logger
	instance string
	server   *mcp.Server
	ups      []*upstream

	// fmu guards the served set: tools by name, and the upstream serving
	// each prompt, resource URI and resource template (features.go).
	fmu       sync.Mutex
	tools     map[string]*tool
	prompts   map[string]*upstream
	resources map[string]*upstream
	templates map[string]*upstream

	mu       sync.Mutex
	sessions map[*mcp.ServerSession]*session
	spares   map[string]*spare // discovery sessions, adopted by the first MCP session
	closing  bool
	inflight int
	idle     chan struct{}  // closed when closing and inflight reaches 0
	watchers sync.WaitGroup // one per session, until its run's end is recorded
	closers  sync.WaitGroup // discovery sessions a session did not adopt, closing
	closed   sync.WaitGroup // held by the first Close until it is done
	// halt is canceled when the shutdown grace is over: calls still in
	// flight are canceled then.
	halt    context.Context
	haltNow context.CancelFunc

	stopLease func()
	leaseDone chan struct{}
}

// spare is a discovery session kept for the first MCP session, so a stdio
// gateway starts each upstream process once, not twice.
type spare struct {
	conn  *mcptool.Conn
	relay *relay
}

// New connects to every upstream server, lists its tools (refusing
// collisions, schemas the protocol forbids, and tools named in a server's
// "tools" list it does not offer), registers the instance's lease and
// starts renewing it. Close releases it all.
func New(ctx context.Context, pool *pgxpool.Pool, o Config) (*Gateway, error) {
	if err := o.Validate(); err != nil {
		return nil, err
	}
	o = o.withDefaults()
	g := &Gateway{
		o: o, st: store{pool: pool}, log: o.Log, instance: newID("gwi"),
		tools: map[string]*tool{}, prompts: map[string]*upstream{}, resources: map[string]*upstream{}, templates: map[string]*upstream{},
		sessions: map[*mcp.ServerSession]*session{}, spares: map[string]*spare{},
	}
	g.halt, g.haltNow = context.WithCancel(context.Background())
	found, err := g.discover(ctx)
	if err != nil {
		g.closeSpares()
		return nil, err
	}
	opts := &mcp.ServerOptions{
		Instructions:       g.instructions(),
		InitializedHandler: g.initialized,
		// The client of an MCP session that is a run speaks a revision with
		// sessions and server-to-client requests (2025-11-25 and before):
		// the stateful streamable HTTP transport serves no other, and over
		// stdio the same holds, so what the gateway relays reaches every
		// client the same way.
		SupportedProtocolVersions: sessionProtocols(),
	}
	g.relayOptions(opts)
	g.serverOptions(opts, found.caps)
	g.server = mcp.NewServer(&mcp.Implementation{Name: "reckon-mcp-gateway", Title: "reckon MCP gateway", Version: "1"}, opts)
	g.server.AddReceivingMiddleware(g.onSetLevel)
	for _, n := range g.Tools() {
		if err := g.addTool(g.tools[n]); err != nil {
			g.closeSpares()
			return nil, err
		}
	}
	for i, up := range g.ups {
		g.serveFeatures(up, found.features[i])
	}
	if err := g.checkSource(ctx); err != nil {
		g.closeSpares()
		return nil, err
	}
	if err := g.st.registerInstance(ctx, g.instance, o.Source, o.Lease); err != nil {
		g.closeSpares()
		return nil, err
	}
	lctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	g.stopLease, g.leaseDone = cancel, make(chan struct{})
	go g.leaseLoop(lctx)
	g.log.Info().Str("instance", g.instance).Str("project", o.Project).Str("source", o.Source).
		Int("tools", len(g.tools)).Int("servers", len(g.ups)).Msg("mcp gateway ready")
	return g, nil
}

// Instance is this process's instance id (its lease row).
func (g *Gateway) Instance() string { return g.instance }

// Tools lists the served tool names, sorted.
func (g *Gateway) Tools() []string {
	g.fmu.Lock()
	defer g.fmu.Unlock()
	out := make([]string, 0, len(g.tools))
	for n := range g.tools {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

// discovered is what start-up found beyond the tools: each upstream's
// capabilities and features (prompts, resources), in g.ups order.
type discovered struct {
	caps     []*mcp.ServerCapabilities
	features []features
}

// discover lists every upstream's tools, prompts and resources, in
// parallel, and builds the served set.
func (g *Gateway) discover(ctx context.Context) (discovered, error) {
	type found struct {
		conn  *mcptool.Conn
		relay *relay
		tools map[string]*mcp.Tool
		feat  features
		err   error
	}
	res := make([]found, len(g.o.Servers))
	var wg sync.WaitGroup
	for i, cfg := range g.o.Servers {
		up := &upstream{cfg: cfg, endpoint: cfg.Endpoint()}
		g.ups = append(g.ups, up)
		wg.Add(1)
		go func() {
			defer wg.Done()
			conn, r, err := g.dial(ctx, up, nil)
			if err != nil {
				res[i].err = err
				return
			}
			res[i].conn, res[i].relay = conn, r
			if res[i].tools, res[i].err = conn.Tools(ctx); res[i].err == nil {
				res[i].feat, res[i].err = listFeatures(ctx, conn.Session())
			}
		}()
	}
	wg.Wait()
	var errs []error
	for i, r := range res {
		if r.conn != nil {
			g.spares[g.ups[i].cfg.Name] = &spare{conn: r.conn, relay: r.relay}
		}
		if r.err != nil {
			errs = append(errs, fmt.Errorf("upstream %q: %s", g.ups[i].cfg.Name, toolErrText(r.err)))
		}
	}
	if len(errs) > 0 {
		return discovered{}, fmt.Errorf("mcp gateway start-up: %w", errors.Join(errs...))
	}
	var d discovered
	for i, up := range g.ups {
		ir := res[i].conn.InitializeResult()
		if ir != nil {
			up.instructions = ir.Instructions
			d.caps = append(d.caps, ir.Capabilities)
		}
		if err := g.claimTools(up, res[i].tools); err != nil {
			return discovered{}, err
		}
		if err := g.claimFeatures(up, res[i].feat); err != nil {
			return discovered{}, err
		}
		d.features = append(d.features, res[i].feat)
	}
	return d, nil
}

// claimTools records up's tools (those of its "tools" list, when set) as
// served, refusing a name another upstream serves.
func (g *Gateway) claimTools(up *upstream, tools map[string]*mcp.Tool) error {
	names := make([]string, 0, len(tools))
	for n := range tools {
		names = append(names, n)
	}
	sort.Strings(names)
	if len(up.cfg.Tools) > 0 {
		for _, want := range up.cfg.Tools {
			if _, ok := tools[want]; !ok {
				return fmt.Errorf("mcp gateway start-up: upstream %q has no tool %q (its \"tools\" list names it; the server offers: %s)", up.cfg.Name, want, strings.Join(names, ", "))
			}
		}
		names = slices.Clone(up.cfg.Tools)
	}
	for _, n := range names {
		if other, dup := g.tools[n]; dup {
			return fmt.Errorf("mcp gateway start-up: tool %q is offered by upstream %q and by upstream %q; served names must be unique (limit one server with its \"tools\" list)", n, other.up.cfg.Name, up.cfg.Name)
		}
		g.tools[n] = &tool{up: up, def: tools[n]}
	}
	return nil
}

// sessionProtocols are the protocol revisions the gateway serves: those of
// the SDK before 2026-07-28.
func sessionProtocols() []string {
	var out []string
	for _, v := range mcp.SupportedProtocolVersions() {
		if v < newProtocol {
			out = append(out, v)
		}
	}
	return out
}

// addTool serves t under its upstream name with its definition unchanged.
// The SDK panics on definitions it cannot serve; that is a start-up error
// naming the upstream and the tool.
func (g *Gateway) addTool(t *tool) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("mcp gateway start-up: upstream %q tool %q cannot be served: %v", t.up.cfg.Name, t.def.Name, p)
		}
	}()
	g.server.AddTool(t.def, func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return g.call(ctx, req, t)
	})
	return nil
}

// instructions passes the upstreams' instructions on, each under its
// server's name.
func (g *Gateway) instructions() string {
	var parts []string
	for _, up := range g.ups {
		if s := strings.TrimSpace(up.instructions); s != "" {
			parts = append(parts, "["+up.cfg.Name+"] "+s)
		}
	}
	return strings.Join(parts, "\n\n")
}

// takeSpare hands the discovery session of server name to the first MCP
// session that needs it.
func (g *Gateway) takeSpare(name string) *spare {
	g.mu.Lock()
	defer g.mu.Unlock()
	sp := g.spares[name]
	delete(g.spares, name)
	return sp
}

func (g *Gateway) closeSpares() {
	g.mu.Lock()
	spares := g.spares
	g.spares = map[string]*spare{}
	g.mu.Unlock()
	conns := make([]*mcptool.Conn, 0, len(spares))
	for _, sp := range spares {
		conns = append(conns, sp.conn)
	}
	closeAll(conns)
}

// newID returns prefix-<UTC time>-<8 hex>, in the run-id alphabet.
func newID(prefix string) string {
	var b [4]byte
	_, _ = rand.Read(b[:])
	return prefix + "-" + time.Now().UTC().Format("20060102T150405") + "-" + hex.EncodeToString(b[:])
}

// event builds one gateway event; its id is <project>/<run_id>/<suffix>
// (project included: run ids are unique per project only).
func (g *Gateway) event(runID, typ, suffix string, data any) (kernel.Event, error) {
	return kernel.NewEvent(g.o.Source, kernel.EventID(g.o.Project, runID, suffix), g.o.Project, runID, typ, Actor, g.o.Now(), data)
}

func (g *Gateway) runStartedEvent(runID, kind string, client *mcp.Implementation) (kernel.Event, error) {
	summary := "MCP session through reckon mcp-gateway"
	if kind == kindClient {
		summary = "run named by an MCP client through reckon mcp-gateway"
	}
	if client != nil && client.Name != "" {
		summary += " (client " + strings.TrimSpace(client.Name+" "+client.Version) + ")"
	}
	d := kernel.RunStarted{PlanSummary: summary, RunKind: kind, GatewayInstance: g.instance}
	if client != nil {
		raw, err := json.Marshal(client)
		if err != nil {
			return kernel.Event{}, fmt.Errorf("mcp-gateway: mcp client: %w", err)
		}
		d.MCPClient = raw
	}
	return g.event(runID, kernel.TypeRunStarted, "run/started", d)
}

// jsonArgs returns the call's raw arguments, {} when absent.
func jsonArgs(raw json.RawMessage) json.RawMessage {
	if len(strings.TrimSpace(string(raw))) == 0 || string(raw) == "null" {
		return json.RawMessage(`{}`)
	}
	return raw
}

// checkSource refuses a Source an agent writes under: one a configured
// token may write, or one the journal already holds from an agent's runs.
// Registering it would make every later write of that agent refused as the
// gateway's (TestSourceOfAnAgentIsRefused).
func (g *Gateway) checkSource(ctx context.Context) error {
	if slices.Contains(g.o.TokenSources, g.o.Source) {
		return fmt.Errorf("configuration: RECKON_GATEWAY_SOURCE (--source) %q is a source an API token writes (RECKON_TOKENS); the gateway's source must be its own", g.o.Source)
	}
	taken, err := g.st.agentsSource(ctx, g.o.Source)
	if err != nil {
		return err
	}
	if taken {
		return fmt.Errorf("configuration: RECKON_GATEWAY_SOURCE (--source) %q is the source of an agent's runs in the journal; the gateway's source must be its own", g.o.Source)
	}
	return nil
}
