// Package mcptool exposes the tools of configured MCP servers to the kernel
// as kernel.Tool values named "mcp__<tool>", on the official Go SDK client.
//
// Every call opens a new connection (a stdio server's process is started for
// the call and stopped after it), which mimics a worker restart between
// calls: nothing but the server's own durable state links two calls. Every
// tools/call carries the operation's idempotency key (IdempotencyKey:
// "<project>/<run_id>/<operation_id>") in
// params._meta["dev.reckon/idempotency-key"] (see the Meta* constants).
//
// Failure classification (tool.failed error_type / effect):
//   - argument_validation / none: args not a JSON object, the tool unknown to
//     the server, or args failing the tool's input schema — all checked
//     before tools/call is sent;
//   - mcp_connect_failed / none: the process did not start, or initialize or
//     tools/list failed — tools/call was never sent, so the tool cannot have
//     acted;
//   - mcp_error_result / uncertain: the server answered with isError;
//   - mcp_timeout / uncertain: the per-call timeout ran out after tools/call
//     was sent;
//   - mcp_call_failed / uncertain: the call broke at or after sending.
package mcptool

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/google/jsonschema-go/jsonschema"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/seed-7bc021c3/reckon/kernel"
	"github.com/seed-7bc021c3/reckon/platform/defaults"
	"github.com/seed-7bc021c3/reckon/platform/fdguard"
)

// The _meta keys every tools/call carries. IdempotencyKeyMeta is the one
// servers should deduplicate on; its value is IdempotencyKey of the
// operation, stable across retries of the same operation and new for a
// re-issue. OperationIDMeta, RunIDMeta and ProjectMeta carry the parts.
const (
	IdempotencyKeyMeta = "dev.reckon/idempotency-key"
	OperationIDMeta    = "dev.reckon/operation-id"
	RunIDMeta          = "dev.reckon/run-id"
	ProjectMeta        = "dev.reckon/project"
	// IdempotencyKeyHeader carries the same key on every HTTP request of a
	// streamable-HTTP call, where HTTP APIs conventionally look for it
	// (IETF draft "The Idempotency-Key HTTP Header Field").
	IdempotencyKeyHeader = "Idempotency-Key"
)

// IdempotencyKey is the key sent for an operation:
// "<project>/<run_id>/<operation_id>". Operation ids ("op-2") are unique only
// within a run, so the bare id would make two runs' first create_issue look
// like one retried call to a server that deduplicates on it; the qualified
// form is unique wherever the operation is. Probes asking a server about an
// operation (lookup_operation) must use the same function.
func IdempotencyKey(project, runID, operationID string) string {
	return project + "/" + runID + "/" + operationID
}

// KeyAmbiguity names the first of the project, run id and operation id
// that contains "/", which IdempotencyKey joins unescaped (a form servers
// have stored): op "x/y" of run "r" and op "y" of run "r/x" send the same
// key. "" when the key names one operation only. The kernel's and the
// MCP gateway's ids never hold "/"; agents' own reports may.
func KeyAmbiguity(project, runID, operationID string) string {
	for _, p := range []struct{ name, val string }{
		{"project", project}, {"run id", runID}, {"operation id", operationID},
	} {
		if strings.Contains(p.val, "/") {
			return p.name
		}
	}
	return ""
}

// Prefix is the kernel tool-name prefix of MCP tools.
const Prefix = kernel.MCPPrefix

// Error types of MCP tool failures (tool.failed.error_type).
const (
	ErrorTypeConnectFailed = "mcp_connect_failed"
	ErrorTypeErrorResult   = "mcp_error_result"
	ErrorTypeCallFailed    = "mcp_call_failed"
	ErrorTypeTimeout       = "mcp_timeout"
)

// DefaultTimeout bounds one call when neither the server entry nor Config
// say otherwise.
const DefaultTimeout = 60 * time.Second

// Config tune a ToolSet.
type Config struct {
	// Timeout is the default per-call timeout (DefaultTimeout when zero).
	Timeout time.Duration
	// DiscoveryTimeout bounds tools/list discovery in Lookup (10s when zero).
	DiscoveryTimeout time.Duration
	// Env is the base environment of stdio servers (BaseEnv(os.Environ())
	// when nil).
	Env []string
	// TerminateGrace is how long a stdio server may take to exit after its
	// stdin is closed before it is signalled (1s when zero).
	TerminateGrace time.Duration
	// Observe, when set, sees every message the server sends as it is read
	// (Observer).
	Observe Observer
}

func (o Config) withDefaults() Config {
	o.Timeout = defaults.Positive(o.Timeout, DefaultTimeout)
	o.DiscoveryTimeout = defaults.Positive(o.DiscoveryTimeout, 10*time.Second)
	o.TerminateGrace = defaults.Positive(o.TerminateGrace, time.Second)
	return o
}

// ToolSet resolves "mcp__<tool>" and "mcp__<server>__<tool>" names to
// tools of the configured servers. It is safe for concurrent use.
type ToolSet struct {
	servers []*server
	opts    Config
}

// server is one configured server and its discovered tool list.
type server struct {
	cfg  ServerConfig
	opts *Config
	// endpoint is cfg.Endpoint(), computed once.
	endpoint string

	mu    sync.Mutex
	tools map[string]*mcp.Tool // nil until discovered or configured
}

// New returns a tool set over servers (already checked by ParseConfig, or
// checked here).
func New(servers []ServerConfig, opts Config) (*ToolSet, error) {
	if err := Check(servers); err != nil {
		return nil, fmt.Errorf("mcp servers%v", err)
	}
	ts := &ToolSet{opts: opts.withDefaults()}
	for _, c := range servers {
		s := &server{cfg: c, opts: &ts.opts, endpoint: c.Endpoint()}
		if len(c.Tools) > 0 {
			s.tools = map[string]*mcp.Tool{}
			for _, t := range c.Tools {
				s.tools[t] = nil // name known, schema learnt per call
			}
		}
		ts.servers = append(ts.servers, s)
	}
	return ts, nil
}

// FromConfig parses RECKON_MCP_SERVERS (config.Config.MCPServers) with the
// probe contracts of RECKON_PROBE_CONTRACTS (contracts, a path; may be
// empty) and returns the tool set; an empty value gives an empty set.
func FromConfig(value, contracts string, opts Config) (*ToolSet, error) {
	servers, err := LoadServers(value, contracts)
	if err != nil {
		return nil, err
	}
	return New(servers, opts)
}

// LoadServers parses RECKON_MCP_SERVERS and merges the probe contracts of
// the RECKON_PROBE_CONTRACTS file at contracts (ApplyContractsFile).
func LoadServers(value, contracts string) ([]ServerConfig, error) {
	servers, err := ParseConfig(value)
	if err != nil {
		return nil, err
	}
	return ApplyContractsFile(servers, contracts)
}

// Lookup returns the tool for a kernel tool name: "mcp__<server>__<tool>"
// addresses one server; "mcp__<tool>" takes the first server (in
// configuration order) offering <tool>. A server whose tool list is not yet
// known is asked for it (tools/list, bounded by DiscoveryTimeout); a server
// that cannot be reached is skipped, so the name is then unknown and the
// kernel rejects the call with effect=none. Call Lookup from activities, not
// from workflow code: it may do I/O.
func (ts *ToolSet) Lookup(name string) (kernel.Tool, bool) {
	rest, ok := strings.CutPrefix(name, Prefix)
	if !ok || rest == "" {
		return nil, false
	}
	if srvName, tool, ok := strings.Cut(rest, "__"); ok {
		for _, s := range ts.servers {
			if s.cfg.Name == srvName && tool != "" && s.has(tool) {
				return &Tool{name: name, tool: tool, srv: s}, true
			}
		}
	}
	for _, s := range ts.servers {
		if s.has(rest) {
			return &Tool{name: name, tool: rest, srv: s}, true
		}
	}
	return nil, false
}

// has reports whether the server offers tool, discovering its list once.
func (s *server) has(tool string) bool {
	ctx, cancel := context.WithTimeout(context.Background(), s.opts.DiscoveryTimeout)
	defer cancel()
	if err := s.discover(ctx); err != nil {
		return false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	_, ok := s.tools[tool]
	return ok
}

// discover runs tools/list unless the list is known, and caches the
// result. Placeholders are filled with a scratch workspace: tool names do
// not depend on the run.
func (s *server) discover(ctx context.Context) error {
	s.mu.Lock()
	known := s.tools != nil
	s.mu.Unlock()
	if known {
		return nil
	}
	ws := ""
	if s.cfg.usesWorkspace() {
		dir, err := os.MkdirTemp("", "reckon-mcp-discover-")
		if err != nil {
			return fmt.Errorf("mcp server %q: scratch workspace for discovery: %w", s.cfg.Name, err)
		}
		defer os.RemoveAll(dir)
		ws = dir
	}
	cs, err := s.connect(ctx, ws, "", "", "", nil)
	if err != nil {
		return err
	}
	defer cs.close()
	tools, err := cs.listTools(ctx)
	if err != nil {
		return err
	}
	s.mu.Lock()
	s.tools = tools
	s.mu.Unlock()
	return nil
}

// Reach connects to each of servers and lists its tools (tools/list,
// bounded by opts.DiscoveryTimeout), as discovery does, without keeping
// anything: a triage process checks at start-up that the servers its MCP
// probe asks are there. The error names the first server that is not, by
// its index and name in RECKON_MCP_SERVERS.
func Reach(ctx context.Context, servers []ServerConfig, opts Config) error {
	o := opts.withDefaults()
	for i, c := range servers {
		s := &server{cfg: c, opts: &o, endpoint: c.Endpoint()}
		dctx, cancel := context.WithTimeout(ctx, o.DiscoveryTimeout)
		err := s.discover(dctx)
		cancel()
		if err != nil {
			return fmt.Errorf("[%d] (%q) cannot be reached: %w", i, c.Name, err)
		}
		s.mu.Lock()
		tools := s.tools
		s.mu.Unlock()
		if err := checkContracts(c, tools); err != nil {
			return fmt.Errorf("[%d] (%q) %w", i, c.Name, err)
		}
	}
	return nil
}

// Tool is one MCP tool of one server, as a kernel.Tool.
type Tool struct {
	name string // kernel name, e.g. mcp__create_issue
	tool string // the server's tool name
	srv  *server
}

var _ kernel.Tool = (*Tool)(nil)

// Name is the kernel tool name.
func (t *Tool) Name() string { return t.name }

// Upstream implements kernel.Upstream: the configured server's name and
// its own name for the tool.
func (t *Tool) Upstream() (server, tool string) { return t.srv.cfg.Name, t.tool }

// ServerEndpoint implements kernel.Endpointed: the configured server's
// endpoint identity (ServerConfig.Endpoint).
func (t *Tool) ServerEndpoint() string { return t.srv.endpoint }

// WritesWorkspace implements kernel.WorkspaceTool: a server whose
// configuration is given the run's workspace ({workspace}, as
// server-filesystem's root) is taken to write there, so the kernel records
// workspace manifests around its calls.
func (t *Tool) WritesWorkspace() bool { return t.srv.cfg.usesWorkspace() }

// Describe implements kernel.Described: the server's description and
// input schema of the tool as discovered (Lookup lists the server's
// tools), an open object schema when only the name is configured.
func (t *Tool) Describe() kernel.ToolSpec {
	t.srv.mu.Lock()
	def := t.srv.tools[t.tool]
	t.srv.mu.Unlock()
	spec := kernel.ToolSpec{Parameters: json.RawMessage(`{"type":"object"}`)}
	if def == nil {
		return spec
	}
	spec.Description = def.Description
	if def.InputSchema != nil {
		if b, err := json.Marshal(def.InputSchema); err == nil {
			spec.Parameters = b
		}
	}
	return spec
}

// Validate checks what it can without I/O: args are a JSON object, the run's
// workspace is known when the server configuration needs it, and — when the
// tool's input schema is already known — the schema. Failures are
// kernel.Rejected (effect=none).
func (t *Tool) Validate(call kernel.ToolCall) error {
	args, err := decodeArgs(call.Args)
	if err != nil {
		return err
	}
	if t.srv.cfg.usesWorkspace() && call.Workspace == "" {
		return kernel.Rejected("mcp server %q needs the run's workspace ({workspace} in its configuration), and the call has none", t.srv.cfg.Name)
	}
	t.srv.mu.Lock()
	def := t.srv.tools[t.tool]
	t.srv.mu.Unlock()
	if def != nil {
		return checkSchema(t.tool, def, args)
	}
	return nil
}

// Execute connects to the server, checks the tool and its arguments against
// the server's current tool list, and calls it with the operation id in
// _meta. See the package comment for how failures are classified.
func (t *Tool) Execute(ctx context.Context, call kernel.ToolCall) (kernel.ToolResult, error) {
	if err := t.Validate(call); err != nil {
		return kernel.ToolResult{}, err
	}
	args, _ := decodeArgs(call.Args) // checked by Validate
	timeout := t.srv.cfg.timeout(t.srv.opts.Timeout)
	cctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()

	key := IdempotencyKey(call.Project, call.RunID, call.OperationID)
	cs, err := t.srv.connect(cctx, call.Workspace, call.Project, call.RunID, key, nil)
	if err != nil {
		return kernel.ToolResult{}, err
	}
	defer cs.close()
	tools, err := cs.listTools(cctx)
	if err != nil {
		return kernel.ToolResult{}, err
	}
	def, ok := tools[t.tool]
	if !ok {
		names := make([]string, 0, len(tools))
		for n := range tools {
			names = append(names, n)
		}
		slices.Sort(names)
		return kernel.ToolResult{}, kernel.Rejected("mcp server %q has no tool %q (it offers: %s)", t.srv.cfg.Name, t.tool, strings.Join(names, ", "))
	}
	if err := checkSchema(t.tool, def, args); err != nil {
		return kernel.ToolResult{}, err
	}
	t.srv.mu.Lock()
	if t.srv.tools == nil {
		t.srv.tools = map[string]*mcp.Tool{}
	}
	t.srv.tools[t.tool] = def
	t.srv.mu.Unlock()

	// From here on the request may reach the server: every failure is
	// uncertain, because nothing proves the tool did not act.
	res, err := cs.call(ctx, cctx, timeout, &mcp.CallToolParams{
		Name:      t.tool,
		Arguments: args,
		Meta: mcp.Meta{
			IdempotencyKeyMeta: key,
			OperationIDMeta:    call.OperationID,
			RunIDMeta:          call.RunID,
			ProjectMeta:        call.Project,
		},
	})
	if err != nil {
		return kernel.ToolResult{}, err
	}
	if res.IsError {
		return kernel.ToolResult{}, ResultError(t.srv.cfg.Name, t.tool, res)
	}
	var out json.RawMessage
	if res.StructuredContent != nil {
		out, err = json.Marshal(res.StructuredContent)
	} else {
		out, err = json.Marshal(map[string]any{"content": res.Content})
	}
	if err != nil {
		// The tool has acted; only our encoding of its answer failed.
		return kernel.ToolResult{}, &kernel.ToolError{ErrorType: ErrorTypeCallFailed, Effect: kernel.EffectUncertain,
			Err: fmt.Errorf("mcp server %q tool %q: encoding its result: %w", t.srv.cfg.Name, t.tool, err)}
	}
	return kernel.ToolResult{Summary: ResultSummary(res), Output: out}, nil
}

// call sends tools/call on the connection. Every failure is uncertain: the
// request may have reached the server. cctx is ctx bounded by timeout; a
// deadline of cctx while ctx lives is mcp_timeout, anything else
// mcp_call_failed.
func (c *conn) call(ctx, cctx context.Context, timeout time.Duration, params *mcp.CallToolParams) (*mcp.CallToolResult, error) {
	res, err := c.session.CallTool(cctx, params)
	if err == nil {
		return res, nil
	}
	if errors.Is(cctx.Err(), context.DeadlineExceeded) && ctx.Err() == nil {
		return nil, &kernel.ToolError{ErrorType: ErrorTypeTimeout, Effect: kernel.EffectUncertain,
			Err: fmt.Errorf("mcp server %q tool %q: no answer within %s after tools/call was sent%s", c.srv.cfg.Name, params.Name, timeout, c.stderrTail())}
	}
	return nil, &kernel.ToolError{ErrorType: ErrorTypeCallFailed, Effect: kernel.EffectUncertain,
		Err: fmt.Errorf("mcp server %q tool %q: tools/call failed: %w%s", c.srv.cfg.Name, params.Name, err, c.stderrTail())}
}

// ResultError classifies an error result (isError) of server's tool as the
// kernel does: mcp_error_result, effect uncertain — the tool ran and
// reported a failure, which proves nothing about what it did first.
func ResultError(server, tool string, res *mcp.CallToolResult) *kernel.ToolError {
	return &kernel.ToolError{ErrorType: ErrorTypeErrorResult, Effect: kernel.EffectUncertain,
		Err: fmt.Errorf("mcp server %q tool %q returned an error result: %s", server, tool, kernel.Abbreviate(kernel.Storable(ContentText(res.Content)), 2000))}
}

// ResultSummary is tool.completed's result_summary for a successful result:
// its text content, or its structured content as JSON, bounded, with what
// reckon does not store (a NUL, invalid UTF-8) replaced (kernel.Storable):
// the server chooses its answer, and the event must be journaled.
func ResultSummary(res *mcp.CallToolResult) string {
	summary := ContentText(res.Content)
	if summary == "" {
		var b []byte
		if res.StructuredContent != nil {
			b, _ = json.Marshal(res.StructuredContent)
		} else {
			b, _ = json.Marshal(map[string]any{"content": res.Content})
		}
		summary = string(b)
	}
	return kernel.Abbreviate(kernel.Storable(summary), 500)
}

// decodeArgs returns the call's arguments as a JSON object (empty for none).
func decodeArgs(raw json.RawMessage) (map[string]any, error) {
	if len(bytes.TrimSpace(raw)) == 0 || string(bytes.TrimSpace(raw)) == "null" {
		return map[string]any{}, nil
	}
	var args map[string]any
	if err := json.Unmarshal(raw, &args); err != nil || args == nil {
		return nil, kernel.Rejected("args: must be a JSON object (MCP tool arguments), got %s", kernel.Abbreviate(string(raw), 200))
	}
	return args, nil
}

// checkSchema validates args against the tool's input schema when the
// schema is one this validator understands (draft-07 or 2020-12); other
// schemas are left to the server, which validates too.
func checkSchema(tool string, def *mcp.Tool, args map[string]any) error {
	if def == nil || def.InputSchema == nil {
		return nil
	}
	b, err := json.Marshal(def.InputSchema)
	if err != nil {
		return nil
	}
	var sch jsonschema.Schema
	if err := json.Unmarshal(b, &sch); err != nil {
		return nil
	}
	switch strings.TrimSuffix(sch.Schema, "#") {
	case "", "http://json-schema.org/draft-07/schema", "https://json-schema.org/draft-07/schema", "https://json-schema.org/draft/2020-12/schema":
	default:
		return nil
	}
	rs, err := sch.Resolve(nil)
	if err != nil {
		return nil
	}
	// Round-trip so numbers and nesting have the types the validator expects.
	var inst any
	ab, _ := json.Marshal(args)
	_ = json.Unmarshal(ab, &inst)
	if err := rs.Validate(inst); err != nil {
		return kernel.Rejected("args: do not match the input schema of MCP tool %q: %v", tool, err)
	}
	return nil
}

// ContentText joins the text parts of a tool result's content, one per
// line: the human-readable answer, for error messages and summaries of
// any MCP client (probes and tests included).
func ContentText(cs []mcp.Content) string {
	var parts []string
	for _, c := range cs {
		if t, ok := c.(*mcp.TextContent); ok {
			parts = append(parts, t.Text)
		}
	}
	return strings.Join(parts, "\n")
}

// inheritedEnv are the variables of reckon's environment a stdio server
// inherits (BaseEnv), with every LC_* locale variable: what a program needs
// to find its interpreter, home and locale, as the MCP SDKs' own default
// environment (HOME, LOGNAME, PATH, SHELL, TERM, USER). RECKON_DATA_DIR is
// no secret and is where `reckon mcp-test-server` keeps its store by
// default, where the probes' lookups must find it too.
var inheritedEnv = map[string]bool{
	"HOME": true, "LOGNAME": true, "PATH": true, "SHELL": true, "TERM": true, "USER": true,
	"LANG": true, "LANGUAGE": true, "TZ": true, "TMPDIR": true, "RECKON_DATA_DIR": true,
}

// BaseEnv is the part of environ a stdio server inherits: the worker's
// environment holds DATABASE_URL, RECKON_TOKENS, the supervisor's API key
// and whatever else its host gives it, and a server is third-party code,
// often one that runs what an agent asks (a shell, an interpreter) or
// drops privileges first, which a secret in its environment would
// outlive. A server that needs more names it in its entry's env. The
// kernel's calls, the gateway's and the probes' lookups all start servers
// with it.
func BaseEnv(environ []string) []string {
	var out []string
	for _, kv := range environ {
		k, _, _ := strings.Cut(kv, "=")
		if inheritedEnv[k] || strings.HasPrefix(k, "LC_") {
			out = append(out, kv)
		}
	}
	return out
}

// conn is one connection to a server, for one call.
type conn struct {
	srv     *server
	session *mcp.ClientSession
	stderr  *tailBuffer
}

// connect opens a new session; copts (may be nil) sets the client's
// handlers. Every failure here is mcp_connect_failed with effect=none:
// tools/call has not been sent on this connection, so the server cannot
// have executed it.
func (s *server) connect(ctx context.Context, workspace, project, runID, key string, copts *mcp.ClientOptions) (*conn, error) {
	return s.connectClient(ctx, workspace, project, runID, key, NewClient(copts))
}

// NewClient is the MCP client reckon connects as ("reckon"); copts (may be
// nil) sets its handlers. DialClient takes one a caller has added
// middleware to.
func NewClient(copts *mcp.ClientOptions) *mcp.Client {
	return mcp.NewClient(&mcp.Implementation{Name: "reckon", Version: "1"}, copts)
}

// connectClient is connect over client.
func (s *server) connectClient(ctx context.Context, workspace, project, runID, key string, client *mcp.Client) (*conn, error) {
	fail := func(err error, tail string) error {
		if errors.Is(ctx.Err(), context.DeadlineExceeded) {
			err = fmt.Errorf("timed out: %w", err)
		}
		return &kernel.ToolError{ErrorType: ErrorTypeConnectFailed, Effect: kernel.EffectNone,
			Err: fmt.Errorf("mcp server %q: connecting (tools/call not sent): %w%s", s.cfg.Name, err, tail)}
	}
	rep := placeholders(workspace, project, runID)
	c := &conn{srv: s}
	var transport mcp.Transport
	if len(s.cfg.Command) > 0 {
		argv := make([]string, len(s.cfg.Command))
		for i, a := range s.cfg.Command {
			argv[i] = rep.Replace(a)
		}
		cmd := exec.Command(argv[0], argv[1:]...)
		env := s.opts.Env
		if env == nil {
			env = BaseEnv(os.Environ())
		}
		env = slices.Clone(env)
		for k, v := range s.cfg.Env {
			env = append(env, k+"="+rep.Replace(v))
		}
		cmd.Env = env
		cmd.Dir = rep.Replace(s.cfg.Dir)
		c.stderr = &tailBuffer{max: 4096}
		cmd.Stderr = c.stderr
		// A server whose children keep the pipes open must not hold Close
		// forever.
		cmd.WaitDelay = s.opts.TerminateGrace
		transport = &mcp.CommandTransport{Command: cmd, TerminateDuration: s.opts.TerminateGrace}
		if s.opts.Observe != nil {
			transport = observed{Transport: transport, obs: s.opts.Observe}
		}
	} else {
		headers := http.Header{}
		for k, v := range s.cfg.Headers {
			headers.Set(k, rep.Replace(v))
		}
		if key != "" {
			headers.Set(IdempotencyKeyHeader, key)
		}
		hc := HTTPClient(headers)
		if s.opts.Observe != nil {
			hc.Transport = observeSSE(hc.Transport, s.opts.Observe)
		}
		transport = &mcp.StreamableClientTransport{
			Endpoint:   rep.Replace(s.cfg.URL),
			HTTPClient: hc,
			// No transparent reconnects: a broken call is reported, and
			// the kernel decides what a retry is.
			MaxRetries:           -1,
			DisableStandaloneSSE: true,
		}
	}
	if len(s.cfg.Command) > 0 {
		// A stdio server gets its pipes, not what the worker inherited.
		if err := fdguard.InheritNothing(); err != nil {
			return nil, fail(err, "")
		}
	}
	session, err := client.Connect(ctx, transport, nil)
	if err != nil {
		return nil, fail(err, c.stderrTail())
	}
	c.session = session
	return c, nil
}

// listTools returns the server's tools by name. A failure is
// mcp_connect_failed (effect=none): tools/call has not been sent yet.
func (c *conn) listTools(ctx context.Context) (map[string]*mcp.Tool, error) {
	tools := map[string]*mcp.Tool{}
	for t, err := range c.session.Tools(ctx, nil) {
		if err != nil {
			msg := err
			if errors.Is(ctx.Err(), context.DeadlineExceeded) {
				msg = fmt.Errorf("timed out: %w", err)
			}
			return nil, &kernel.ToolError{ErrorType: ErrorTypeConnectFailed, Effect: kernel.EffectNone,
				Err: fmt.Errorf("mcp server %q: tools/list (tools/call not sent): %w%s", c.srv.cfg.Name, msg, c.stderrTail())}
		}
		tools[t.Name] = t
	}
	return tools, nil
}

// close ends the session; a stdio server gets TerminateGrace to exit after
// its stdin closes, then SIGTERM, then SIGKILL.
func (c *conn) close() {
	if c.session != nil {
		_ = c.session.Close()
	}
}

// stderrTail is the end of a stdio server's stderr, for error messages.
func (c *conn) stderrTail() string {
	if c.stderr == nil {
		return ""
	}
	s := strings.TrimSpace(c.stderr.String())
	if s == "" {
		return ""
	}
	return " (server stderr: " + kernel.Abbreviate(s, 1000) + ")"
}

// tailBuffer keeps the last max bytes written to it.
type tailBuffer struct {
	mu  sync.Mutex
	buf []byte
	max int
}

func (b *tailBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.buf = append(b.buf, p...)
	if len(b.buf) > b.max {
		b.buf = b.buf[len(b.buf)-b.max:]
	}
	return len(p), nil
}

func (b *tailBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return strings.ToValidUTF8(string(b.buf), "")
}

// headerTransport adds fixed headers to every request, and the
// Idempotency-Key of the call a request belongs to (withKey), for sessions
// that carry several operations.
// HTTPClient is the client of an MCP server over streamable HTTP: it sends
// headers (and a call's idempotency key, when its context carries one) on
// every request, and reads JSON answers up to MaxJSONResponseBytes
// (LimitResponses). The kernel's and the gateway's calls and the probes'
// lookups all go through it.
func HTTPClient(headers http.Header) *http.Client {
	return &http.Client{Transport: &headerTransport{base: LimitResponses(nil), headers: headers}}
}

type headerTransport struct {
	base    http.RoundTripper
	headers http.Header
}

func (h *headerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	for k, v := range h.headers {
		r.Header[k] = v
	}
	if k, ok := r.Context().Value(keyCtx{}).(string); ok && k != "" {
		r.Header.Set(IdempotencyKeyHeader, k)
	}
	return h.base.RoundTrip(r)
}

// keyCtx carries a call's idempotency key to headerTransport: the SDK
// sends each request with the context of the call that made it.
type keyCtx struct{}

func withKey(ctx context.Context, key string) context.Context {
	return context.WithValue(ctx, keyCtx{}, key)
}
