package mcptool

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Conn is a long-lived session with one MCP server, for a caller that
// makes many calls over it (the MCP gateway holds one per upstream server
// and agent session, as an MCP host would). The kernel's tools do not use
// it: they open a new connection for every call.
//
// Its calls are classified exactly as the kernel's: a failure of Dial is
// mcp_connect_failed with effect none (tools/call never sent); every
// failure of Call is uncertain (mcp_timeout or mcp_call_failed); an error
// result is the caller's to classify with ResultError.
type Conn struct {
	c    *conn
	done chan struct{}
}

// RunScoped reports which per-run placeholders ({workspace}, {run_id}) the
// configuration uses. A session that outlives one run cannot fill them, so
// Dial replaces them by empty strings; callers refuse such entries first.
func (c ServerConfig) RunScoped() []string {
	var out []string
	for _, p := range []string{"{workspace}", "{run_id}"} {
		found := strings.Contains(c.URL, p) || strings.Contains(c.Dir, p)
		for _, a := range c.Command {
			found = found || strings.Contains(a, p)
		}
		for _, v := range c.Env {
			found = found || strings.Contains(v, p)
		}
		for _, v := range c.Headers {
			found = found || strings.Contains(v, p)
		}
		if found {
			out = append(out, p)
		}
	}
	return out
}

// Dial opens a session with the server cfg, {project} in its configuration
// replaced by project. copts (may be nil) sets client handlers, e.g. for
// progress notifications. The connect is bounded by the server's timeout,
// as a kernel call's is: a caller's ctx (an MCP client's request) may have
// no deadline, and a server that never answers initialize would hold it
// forever.
func Dial(ctx context.Context, cfg ServerConfig, opts Config, project string, copts *mcp.ClientOptions) (*Conn, error) {
	return DialClient(ctx, cfg, opts, project, NewClient(copts))
}

// DialClient is Dial over client (built with NewClient), for a caller that
// adds middleware to the client first.
func DialClient(ctx context.Context, cfg ServerConfig, opts Config, project string, client *mcp.Client) (*Conn, error) {
	if err := Check([]ServerConfig{cfg}); err != nil {
		return nil, fmt.Errorf("mcp server%v", err)
	}
	o := opts.withDefaults()
	s := &server{cfg: cfg, opts: &o}
	cctx, cancel := context.WithTimeout(ctx, cfg.timeout(o.Timeout))
	defer cancel()
	c, err := s.connectClient(cctx, "", project, "", "", client)
	if err != nil {
		return nil, err
	}
	done := make(chan struct{})
	go func() {
		_ = c.session.Wait()
		close(done)
	}()
	return &Conn{c: c, done: done}, nil
}

// Tools lists the server's tools by name. A failure is mcp_connect_failed
// (effect none).
func (c *Conn) Tools(ctx context.Context) (map[string]*mcp.Tool, error) {
	return c.c.listTools(ctx)
}

// Call sends tools/call with params, bounded by the server's timeout. key,
// when not empty, is also sent as the Idempotency-Key header on every HTTP
// request of the call (streamable HTTP servers); the caller puts it in
// params.Meta under IdempotencyKeyMeta. Every error is a *kernel.ToolError
// with effect uncertain: the request may have reached the server.
func (c *Conn) Call(ctx context.Context, params *mcp.CallToolParams, key string) (*mcp.CallToolResult, error) {
	timeout := c.c.srv.cfg.timeout(c.c.srv.opts.Timeout)
	cctx, cancel := context.WithTimeout(withKey(ctx, key), timeout)
	defer cancel()
	return c.c.call(ctx, cctx, timeout, params)
}

// InitializeResult is the server's answer to initialize (its name,
// version, capabilities and instructions).
func (c *Conn) InitializeResult() *mcp.InitializeResult { return c.c.session.InitializeResult() }

// Session is the MCP session, for requests other than tools/call
// (resources, prompts, completions, logging level), which reckon does not
// record.
func (c *Conn) Session() *mcp.ClientSession { return c.c.session }

// Done is closed when the session has ended (the server exited, the
// connection broke, or Close).
func (c *Conn) Done() <-chan struct{} { return c.done }

// Close ends the session; a stdio server gets TerminateGrace to exit after
// its stdin closes, then SIGTERM, then SIGKILL.
func (c *Conn) Close() { c.c.close() }

// StderrTail is the end of a stdio server's stderr (empty for HTTP), for
// error messages.
func (c *Conn) StderrTail() string { return c.c.stderrTail() }

// DecodeArgs returns tool-call arguments as a JSON object (empty for none);
// anything else is a kernel.Rejected error (argument_validation, effect
// none).
func DecodeArgs(raw json.RawMessage) (map[string]any, error) { return decodeArgs(raw) }

// CheckArgs validates args against def's input schema as the kernel does
// before it sends tools/call: a violation is kernel.Rejected
// (argument_validation, effect none); a schema this validator does not
// understand is left to the server.
func CheckArgs(def *mcp.Tool, args map[string]any) error {
	if def == nil {
		return nil
	}
	return checkSchema(def.Name, def, args)
}
