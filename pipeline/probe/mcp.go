package probe

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/seed-7bc021c3/reckon/kernel"
	"github.com/seed-7bc021c3/reckon/kernel/priorstate"
	"github.com/seed-7bc021c3/reckon/pipeline"
	"github.com/seed-7bc021c3/reckon/platform/fdguard"
	"github.com/seed-7bc021c3/reckon/tool/mcptool"
)

// MCPName names the MCP lookup probe in evidence.
const MCPName = "mcp.lookup_operation"

// Lookup statuses answered by lookup_operation.
const (
	LookupCompleted = "completed"
	LookupNeverSeen = "never_seen"
)

// ErrUnreachable marks a server the probe could not reach at all (no
// connection, or a call that did not come back): its evidence is
// unavailable now, which is no finding about the call.
var ErrUnreachable = errors.New("server unreachable")

// LookupAnswer is a server's answer about one idempotency key.
type LookupAnswer struct {
	// Server names the MCP server that answered.
	Server string `json:"server"`
	// Status is completed or never_seen.
	Status string `json:"status"`
	// Result is the server's whole structured answer, kept as provenance.
	Result json.RawMessage `json:"result,omitempty"`
}

// Looker asks the MCP server that serves tool what happened to key.
// supported is false when no configured server offers both the tool and
// lookup_operation.
type Looker interface {
	LookupOperation(ctx context.Context, run Run, tool, key string) (ans LookupAnswer, supported bool, err error)
}

// EndpointTeller is a Looker that tells the endpoint identity
// (mcptool.ServerConfig.Endpoint) of its server of a name: configured is
// false when it has none of that name. The MCP probe compares it with the
// endpoint the call's tool.started records before asking (MCP says why).
type EndpointTeller interface {
	Endpoint(server string) (endpoint string, configured bool)
}

// ScopedLooker is a Looker that can keep its connections for a scope (one
// wall's operations): l answers lookups within it, done releases them.
type ScopedLooker interface {
	Looker
	Scoped() (l Looker, done func())
}

// MCP asks the downstream MCP server what happened to the operation's
// idempotency key (mcptool.IdempotencyKey: project/run_id/operation_id, as
// the kernel sends it in _meta). "completed" proves the effect landed;
// "never_seen" proves it did not only once the call can no longer arrive
// (not in flight, older than Grace) and only for a call reckon made
// (reckonCalled), which carried the key. An id holding "/" is not looked
// up: its key could be another operation's. A server whose endpoint
// identity is not the call's server_endpoint is not asked: the same name
// may go to another store here. Why: docs/internals.md#mcp-probes.
// TestMCPLookup, TestMCPLookupSkipsAServerConfiguredElsewhere.
type MCP struct {
	Looker Looker
	// Grace is the minimum age of the operation before never_seen counts
	// as none; default 5m (above the MCP call timeout of 60s).
	Grace time.Duration
	// Priors reads the prior states the kernel recorded before adapted
	// write calls (priorstate.Store); without it the state probe never
	// proves occurred.
	Priors PriorStates
	// Owners tells the MCP gateway's runs (operations.Owners does). Without
	// it, never_seen proves nothing but for the kernel's own calls.
	Owners kernel.RunOwners
	// recorder, set by ForWall, keeps the wall's run's answer from Owners:
	// every operation of a wall is of one run, so it is asked once.
	recorder *wallRecorder
}

// wallRecorder is one wall's memo of whether its run is the gateway's.
type wallRecorder struct{ known, gateway bool }

// PriorStates reads recorded prior states (priorstate.Store does).
type PriorStates interface {
	Get(ctx context.Context, project, runID, opID string) (priorstate.Prior, bool, error)
}

// Name implements Probe.
func (p MCP) Name() string { return MCPName }

// ForWall implements WallScoped: with a ScopedLooker, the wall's operations
// share its connections.
func (p MCP) ForWall(Run) (Probe, func()) {
	p.recorder = &wallRecorder{}
	sl, ok := p.Looker.(ScopedLooker)
	if !ok {
		return p, func() {}
	}
	l, done := sl.Scoped()
	p.Looker = l
	return p, done
}

// Probe implements Probe.
func (p MCP) Probe(ctx context.Context, run Run, op pipeline.WallOperation) (pipeline.Evidence, bool) {
	if !strings.HasPrefix(op.Tool, "mcp__") || p.Looker == nil {
		return pipeline.Evidence{}, false
	}
	at := run.now()
	// The key the kernel sent: qualified by project and run, since
	// operation ids repeat across runs.
	key := mcptool.IdempotencyKey(run.Project, run.RunID, op.OperationID)
	if part := mcptool.KeyAmbiguity(run.Project, run.RunID, op.OperationID); part != "" {
		// The key is not asked about: another operation's may read the
		// same (op "x/y" of run "r" and op "y" of run "r/x" both send
		// "p/r/x/y"), and its completed would credit this one. The
		// kernel's and the gateway's ids hold no "/", so only operations
		// agents report of their own can meet this.
		return evidence(MCPName, pipeline.FindingInconclusive,
			fmt.Sprintf("not looked up: the %s contains \"/\", so the idempotency key %s could equally be another operation's, and a server's answer for it proves nothing of this one", part, kernel.Printable(key)),
			at, map[string]any{"tool": op.Tool, "key": key}), true
	}
	if ev, mismatch := p.endpointMismatch(op, key, at); mismatch {
		return ev, true
	}
	ans, supported, err := p.Looker.LookupOperation(ctx, run, op.MCPTarget(), key)
	if !supported && err == nil {
		if sr, ok := p.Looker.(StateReader); ok {
			return p.probeState(ctx, sr, run, op, at)
		}
		return pipeline.Evidence{}, false
	}
	prov := map[string]any{"tool": op.Tool, "key": key, "answer": ans}
	switch {
	case errors.Is(err, ErrUnreachable):
		return evidence(MCPName, pipeline.FindingUnavailable, fmt.Sprintf("lookup_operation could not be asked now: %v", err), at, prov), true
	case err != nil:
		return evidence(MCPName, pipeline.FindingInconclusive, fmt.Sprintf("lookup_operation failed: %v", err), at, prov), true
	}
	switch ans.Status {
	case LookupCompleted:
		ev := evidence(MCPName, pipeline.FindingOccurred,
			fmt.Sprintf("server %s has key %s with a stored result: the call was applied", ans.Server, key), at, prov)
		return withPreconditions(ev, pipeline.Preconditions{Store: &pipeline.Store{Server: ans.Server, CallUnique: "the call's idempotency key " + key}}), true
	case LookupNeverSeen:
		return p.neverSeen(ctx, run, op, key, ans, at, prov)
	}
	return evidence(MCPName, pipeline.FindingInconclusive, fmt.Sprintf("lookup_operation answered an unknown status %q", ans.Status), at, prov), true
}

// neverSeen is what a server's never_seen proves of op: none only for a
// call reckon made (which carried the key), once it can no longer arrive
// (not in flight, and Grace past its start on the database's clock).
func (p MCP) neverSeen(ctx context.Context, run Run, op pipeline.WallOperation, key string, ans LookupAnswer, at time.Time, prov map[string]any) (pipeline.Evidence, bool) {
	made, err := p.reckonCalled(ctx, run, op)
	if err != nil {
		return evidence(MCPName, pipeline.FindingUnavailable, fmt.Sprintf("server %s has never seen key %s, and whether reckon made the call could not be read now: %v", ans.Server, key, err), at, prov), true
	}
	if !made {
		return evidence(MCPName, pipeline.FindingInconclusive,
			fmt.Sprintf("server %s has never seen key %s, but reckon did not make this call: source %q reported it in a run neither the kernel nor the MCP gateway records, and its own client need not have sent the key", ans.Server, key, op.StartedKey.SourceID), at, prov), true
	}
	grace := graceOr(p.Grace)
	if op.State == "stale_in_flight" {
		return evidence(MCPName, pipeline.FindingInconclusive,
			fmt.Sprintf("server %s has never seen key %s, but the call may still be in flight (its run is still running)", ans.Server, key), at, prov), true
	}
	el, passed, why, due := run.waited(op.JournaledAt, grace)
	if !passed {
		ev := evidence(MCPName, pipeline.FindingInconclusive,
			fmt.Sprintf("server %s has never seen key %s, but the call may still be in flight (grace %s): %s", ans.Server, key, grace, why), at, prov)
		// Only time stands between this answer and a proof.
		ev.RecheckAfter = due
		return ev, true
	}
	ev := evidence(MCPName, pipeline.FindingNone,
		fmt.Sprintf("server %s has never seen key %s and the call can no longer arrive (%s since the journal took its tool.started, database clock): the call was not applied", ans.Server, key, el.At.Sub(el.Since).Round(time.Second)), at, prov)
	return withPreconditions(ev, pipeline.Preconditions{Elapsed: &el}), true
}

// endpointMismatch is the inconclusive evidence for an operation whose
// tool.started records its server's endpoint identity when the server of
// that name here has another (or the Looker cannot tell its own): it is
// not asked. ok is false when it may be asked: the event records no
// endpoint (recorded before server_endpoint), no server, or the same
// endpoint; or no server of that name is configured here, which
// LookupOperation reports as it always has.
func (p MCP) endpointMismatch(op pipeline.WallOperation, key string, at time.Time) (pipeline.Evidence, bool) {
	if op.Server == "" || op.ServerEndpoint == "" {
		return pipeline.Evidence{}, false
	}
	prov := map[string]any{"tool": op.Tool, "key": key, "server": op.Server, "server_endpoint": op.ServerEndpoint}
	// Event data, possibly an agent's: shown escaped and bounded.
	went := kernel.Printable(kernel.Abbreviate(op.ServerEndpoint, 64))
	et, ok := p.Looker.(EndpointTeller)
	if !ok {
		return evidence(MCPName, pipeline.FindingInconclusive,
			fmt.Sprintf("server %q not asked: the call went to its endpoint %s, and this probe cannot tell which endpoint its own %q is", op.Server, went, op.Server),
			at, prov), true
	}
	here, configured := et.Endpoint(op.Server)
	if !configured || here == op.ServerEndpoint {
		return pipeline.Evidence{}, false
	}
	prov["configured_endpoint"] = here
	return evidence(MCPName, pipeline.FindingInconclusive,
		fmt.Sprintf("server %q is configured here as endpoint %s, the call went to endpoint %s: not asked, as its answer (never_seen or completed) would be about another store; configure %q in the probes' RECKON_MCP_SERVERS with the url, or command and args, it has where the call was made",
			op.Server, here, went, op.Server),
		at, prov), true
}

// reckonCalled says whether reckon itself made op's call and so sent its
// key: the kernel (a tool.started under its source, which only it writes)
// or the MCP gateway (a run it records, whose events only it writes). An
// agent reporting its own call through POST /v1/events made it with a
// client of its own: the server's never having seen reckon's key for it
// says nothing of whether the call landed. "completed" needs no such
// test: the key names this very operation (Probe does not ask about a key
// that could name another, mcptool.KeyAmbiguity), so a server holding it with
// a result applied a call made for it.
func (p MCP) reckonCalled(ctx context.Context, run Run, op pipeline.WallOperation) (bool, error) {
	if op.StartedKey.SourceID == kernel.SourceKernel {
		return true, nil
	}
	if p.Owners == nil {
		return false, nil
	}
	if m := p.recorder; m != nil && m.known {
		return m.gateway, nil
	}
	rk := kernel.RunKey{Project: run.Project, RunID: run.RunID}
	w, err := p.Owners.RunWriters(ctx, []kernel.RunKey{rk})
	if err != nil {
		return false, err
	}
	gateway := w[rk].Recorder == kernel.RecorderGateway
	if m := p.recorder; m != nil {
		m.known, m.gateway = true, gateway
	}
	return gateway, nil
}

// MCPClient is the Looker over the configured MCP servers
// (RECKON_MCP_SERVERS): for tool mcp__<server>__<tool> it asks that
// server; for mcp__<tool> every configured server offering the tool
// (LookupOperation says why).
type MCPClient struct {
	Servers []mcptool.ServerConfig
	// Workspaces gives {workspace} in a server's configuration its value:
	// the run's workspace from the kernel's own state (empty for a run the
	// kernel does not own), never a path from event data.
	Workspaces Workspaces
	// Timeout bounds one lookup; default 30s.
	Timeout time.Duration
}

// Endpoint implements EndpointTeller: the endpoint identity of the
// configured server named server.
func (c MCPClient) Endpoint(server string) (string, bool) {
	for _, sc := range c.Servers {
		if sc.Name == server {
			return sc.Endpoint(), true
		}
	}
	return "", false
}

// LookupOperation implements Looker with connections of its own, closed
// before it returns. The sweep uses Scoped instead, which keeps them for a
// whole wall.
func (c MCPClient) LookupOperation(ctx context.Context, run Run, tool, key string) (LookupAnswer, bool, error) {
	l, done := c.Scoped()
	defer done()
	return l.LookupOperation(ctx, run, tool, key)
}

// Scoped implements ScopedLooker: the returned Looker connects to each
// server at most once (the first time an operation needs it) and asks every
// later lookup over the same session, so a wall of N operations costs one
// connection per server — for a stdio server, one process — instead of N.
// A server that could not be reached is not dialled again within the scope:
// its failure is every later lookup's answer. done closes the sessions.
func (c MCPClient) Scoped() (l Looker, done func()) {
	s := &mcpSessions{c: c, open: map[string]*mcpSession{}}
	return s, s.close
}

// mcpSessions is one scope's connections, by server name. The sweep probes
// a wall's operations one after another, so it is not safe for concurrent
// use and needs no lock.
type mcpSessions struct {
	c    MCPClient
	open map[string]*mcpSession
}

type mcpSession struct {
	cs       *mcp.ClientSession
	tools    map[string]bool
	readOnly map[string]bool // tools annotated readOnlyHint
	err      error           // why the server could not be used in this scope
}

// Endpoint implements EndpointTeller over the scope's configuration.
func (s *mcpSessions) Endpoint(server string) (string, bool) { return s.c.Endpoint(server) }

func (s *mcpSessions) close() {
	for _, ss := range s.open {
		if ss.cs != nil {
			_ = ss.cs.Close()
		}
	}
	s.open = map[string]*mcpSession{}
}

// target splits tool mcp__<tool> (or mcp__<server>__<tool>) into the
// server it names ("" for any) and the server's tool name, with the
// per-request timeout.
func (s *mcpSessions) target(tool string) (server, name string, timeout time.Duration) {
	name = strings.TrimPrefix(tool, "mcp__")
	if i := strings.Index(name, "__"); i >= 0 {
		server, name = name[:i], name[i+2:]
	}
	timeout = s.c.Timeout
	if timeout <= 0 {
		timeout = 30 * time.Second
	}
	return server, name, timeout
}

// LookupOperation implements Looker over the scope's sessions. A tool
// that names its server (mcp__<server>__<tool>: the gateway's calls, and
// the kernel's calls from the version that records the server) is looked
// up there alone. A bare mcp__<tool> names no server: the kernel's worker
// called the first server of its configuration offering the tool that it
// could reach at the time, which need not be the first the probe reaches
// now. Every configured server offering the tool is then asked: one that
// completed the key proves the call, but never_seen stands only when
// every one of them answered it; a server that could not be asked (down,
// or offering the tool without lookup_operation) leaves the answer an
// error, which the probe reports inconclusive.
func (s *mcpSessions) LookupOperation(ctx context.Context, run Run, tool, key string) (LookupAnswer, bool, error) {
	named, name, timeout, offers, errs := s.offering(ctx, run, tool)
	var unaskable, unseen []string
	var first LookupAnswer
	for _, o := range offers {
		if !o.ss.tools["lookup_operation"] {
			unaskable = append(unaskable, o.sc.Name)
			continue
		}
		lctx, cancel := context.WithTimeout(ctx, timeout)
		ans, err := lookup(lctx, o.ss.cs, o.sc.Name, key)
		cancel()
		if err != nil {
			errs = append(errs, fmt.Errorf("server %s: %w", o.sc.Name, err))
			continue
		}
		if named || ans.Status != LookupNeverSeen {
			return ans, true, nil
		}
		if len(unseen) == 0 {
			first = ans
		}
		unseen = append(unseen, o.sc.Name)
	}
	switch {
	case len(errs) > 0:
		return LookupAnswer{}, true, errors.Join(errs...)
	case len(unseen) == 0:
		return LookupAnswer{}, false, nil
	case len(unaskable) > 0:
		return LookupAnswer{}, true, fmt.Errorf("server %s never saw the key, but %s also offer %s without lookup_operation, and the call names no server: it may have gone there",
			strings.Join(unseen, ", "), strings.Join(unaskable, ", "), name)
	}
	first.Server = strings.Join(unseen, ", ")
	return first, true, nil
}

// offer is a configured server that offers a tool, with the scope's
// session with it.
type offer struct {
	sc mcptool.ServerConfig
	ss *mcpSession
}

// offering connects to the servers that may offer tool — the one
// mcp__<server>__<tool> names (named), or every configured one for a bare
// mcp__<tool> — and returns those that offer it, in configuration order,
// with the server's name for the tool, the per-request timeout, and the
// errors of the servers that could not be reached.
func (s *mcpSessions) offering(ctx context.Context, run Run, tool string) (named bool, name string, timeout time.Duration, offers []offer, errs []error) {
	server, name, timeout := s.target(tool)
	for _, sc := range s.c.Servers {
		if server != "" && sc.Name != server || len(sc.Tools) > 0 && !contains(sc.Tools, name) {
			continue
		}
		ss := s.session(ctx, sc, run, timeout)
		if ss.err != nil {
			errs = append(errs, fmt.Errorf("server %s: %w", sc.Name, ss.err))
			continue
		}
		if ss.tools[name] {
			offers = append(offers, offer{sc: sc, ss: ss})
		}
	}
	return server != "", name, timeout, offers, errs
}

// StateAnswer is what a server's state says about a write call: what
// its probe contracts read (mcptool.ServerConfig.ContractsFor), or that
// the tool is read-only per annotations the configuration trusts.
type StateAnswer struct {
	Server string `json:"server"`
	// Contracts names the server's contracts for evidence: a set that
	// ships, or "declared".
	Contracts string        `json:"contracts,omitempty"`
	State     mcptool.State `json:"state"`
	// ReadOnly: the server, configured with trust_annotations, marks the
	// tool readOnlyHint.
	ReadOnly bool `json:"read_only,omitempty"`
	// Exclusive: the server's configuration declares its store exclusive
	// to this project (mcptool.ServerConfig.Exclusive).
	Exclusive bool `json:"exclusive,omitempty"`
	// resolved are the server's contracts: which later calls are reads,
	// which writes have recorded prior states.
	resolved *mcptool.Resolved
}

// StateReader reads a server's state for a call of tool with args: a
// Looker that supports it lets the MCP probe settle servers without
// lookup_operation. supported is false when no configured server offers
// the tool with an adapter or trusted annotations.
type StateReader interface {
	ReadState(ctx context.Context, run Run, tool string, args json.RawMessage) (ans StateAnswer, supported bool, err error)
}

// ReadState implements StateReader over the scope's sessions; like
// LookupOperation it connects only to servers that may offer the tool.
// A bare mcp__<tool> names no server, and the state of one server proves
// nothing of a call another could have taken (LookupOperation says why):
// the tool must be offered by exactly one configured server, every other
// one reachable enough to say it does not offer it.
func (s *mcpSessions) ReadState(ctx context.Context, run Run, tool string, args json.RawMessage) (StateAnswer, bool, error) {
	_, name, timeout, offers, errs := s.offering(ctx, run, tool)
	switch {
	case len(errs) > 0:
		return StateAnswer{}, true, errors.Join(errs...)
	case len(offers) == 0:
		return StateAnswer{}, false, nil
	case len(offers) > 1:
		names := make([]string, len(offers))
		for i, o := range offers {
			names[i] = o.sc.Name
		}
		return StateAnswer{}, true, fmt.Errorf("servers %s all offer %s and the call names no server: the kernel's worker called the first of them it could reach, so no one server's state proves the call",
			strings.Join(names, ", "), name)
	}
	sc, ss := offers[0].sc, offers[0].ss
	r, ok, err := sc.ContractsFor(ss.tools)
	if err != nil {
		return StateAnswer{}, true, fmt.Errorf("server %s: %w", sc.Name, err)
	}
	if ok && r.Checks(name) {
		facts, err := r.Facts(name, args)
		if err != nil {
			return StateAnswer{}, true, fmt.Errorf("server %s: %w", sc.Name, err)
		}
		rctx, cancel := context.WithTimeout(ctx, timeout)
		st, err := mcptool.ReadFacts(rctx, ss.cs, facts)
		cancel()
		if err != nil {
			return StateAnswer{}, true, fmt.Errorf("server %s: %w", sc.Name, err)
		}
		return StateAnswer{Server: sc.Name, Contracts: contractsName(sc), State: st, Exclusive: sc.Exclusive, resolved: r}, true, nil
	}
	if sc.TrustAnnotations && ss.readOnly[name] {
		return StateAnswer{Server: sc.Name, ReadOnly: true}, true, nil
	}
	return StateAnswer{}, false, nil
}

// contractsName names sc's contracts for evidence.
func contractsName(sc mcptool.ServerConfig) string {
	switch {
	case sc.Probes == nil:
		return "server-memory"
	case sc.Probes.Builtin != "" && len(sc.Probes.Contracts) == 0:
		return sc.Probes.Builtin
	}
	return "declared"
}

// session returns the scope's session with sc, connecting and listing its
// tools the first time.
func (s *mcpSessions) session(ctx context.Context, sc mcptool.ServerConfig, run Run, timeout time.Duration) *mcpSession {
	if ss, ok := s.open[sc.Name]; ok {
		return ss
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	ss := &mcpSession{}
	ws := s.c.Workspaces.Dir(ctx, run.Project, run.RunID)
	ss.cs, ss.tools, ss.readOnly, ss.err = connect(ctx, transportFor(sc, run, ws))
	if ss.err != nil {
		ss.err = fmt.Errorf("%w: %w", ErrUnreachable, ss.err)
	}
	s.open[sc.Name] = ss
	return ss
}

// transportFor builds the transport to sc, with {workspace}, {project} and
// {run_id} in its command, environment, directory, URL and headers
// replaced by the run's (ws is its workspace, empty when it has none).
func transportFor(sc mcptool.ServerConfig, run Run, ws string) mcp.Transport {
	rep := strings.NewReplacer("{workspace}", ws, "{project}", run.Project, "{run_id}", run.RunID)
	if len(sc.Command) > 0 {
		argv := make([]string, len(sc.Command))
		for i, a := range sc.Command {
			argv[i] = rep.Replace(a)
		}
		cmd := exec.Command(argv[0], argv[1:]...)
		cmd.Env = mcptool.BaseEnv(os.Environ())
		for k, v := range sc.Env {
			cmd.Env = append(cmd.Env, k+"="+rep.Replace(v))
		}
		cmd.Dir = rep.Replace(sc.Dir)
		cmd.WaitDelay = 2 * time.Second
		return &mcp.CommandTransport{Command: cmd, TerminateDuration: 2 * time.Second}
	}
	h := http.Header{}
	for k, v := range sc.Headers {
		h.Set(k, rep.Replace(v))
	}
	return &mcp.StreamableClientTransport{
		Endpoint:             rep.Replace(sc.URL),
		HTTPClient:           mcptool.HTTPClient(h),
		MaxRetries:           -1,
		DisableStandaloneSSE: true,
	}
}

// connect opens a session over transport and lists the server's tools
// (and which of them it annotates readOnlyHint).
func connect(ctx context.Context, transport mcp.Transport) (*mcp.ClientSession, map[string]bool, map[string]bool, error) {
	if _, stdio := transport.(*mcp.CommandTransport); stdio {
		// A stdio server gets its pipes, not what this process inherited.
		if err := fdguard.InheritNothing(); err != nil {
			return nil, nil, nil, fmt.Errorf("connect: %w", err)
		}
	}
	client := mcp.NewClient(&mcp.Implementation{Name: "reckon-probe", Version: "1"}, nil)
	cs, err := client.Connect(ctx, transport, nil)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("connect: %w", err)
	}
	tools, readOnly := map[string]bool{}, map[string]bool{}
	for t, err := range cs.Tools(ctx, nil) {
		if err != nil {
			_ = cs.Close()
			return nil, nil, nil, fmt.Errorf("tools/list: %w", err)
		}
		tools[t.Name] = true
		if t.Annotations != nil && t.Annotations.ReadOnlyHint {
			readOnly[t.Name] = true
		}
	}
	return cs, tools, readOnly, nil
}

// lookup calls lookup_operation for key on an open session.
func lookup(ctx context.Context, cs *mcp.ClientSession, serverName, key string) (LookupAnswer, error) {
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "lookup_operation", Arguments: map[string]any{"key": key}})
	if err != nil {
		// The call did not come back: no answer, rather than one.
		return LookupAnswer{}, fmt.Errorf("lookup_operation: %w: %w", ErrUnreachable, err)
	}
	if res.IsError {
		return LookupAnswer{}, fmt.Errorf("lookup_operation answered an error: %s", mcptool.ContentText(res.Content))
	}
	raw, err := json.Marshal(res.StructuredContent)
	if err != nil || res.StructuredContent == nil {
		raw = []byte(mcptool.ContentText(res.Content))
	}
	var ans struct {
		Key    *string `json:"key"`
		Status string  `json:"status"`
	}
	if err := json.Unmarshal(raw, &ans); err != nil {
		return LookupAnswer{}, fmt.Errorf("lookup_operation answer is not JSON: %v", err)
	}
	if ans.Key != nil && *ans.Key != key {
		// An answer about another key (a server matching keys loosely, by
		// prefix say) proves nothing about this one, completed or not.
		return LookupAnswer{}, fmt.Errorf("lookup_operation answered about key %s, not the key asked about, %s", kernel.Printable(*ans.Key), kernel.Printable(key))
	}
	return LookupAnswer{Server: serverName, Status: ans.Status, Result: raw}, nil
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}
