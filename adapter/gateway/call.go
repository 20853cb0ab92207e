package gateway

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/rs/zerolog"

	"github.com/seed-7bc021c3/reckon/kernel"
	"github.com/seed-7bc021c3/reckon/tool/mcptool"
)

// runRef names the run a call belongs to.
type runRef struct {
	project, runID, source, kind, instance string
}

// call is the handler of every served tool: see the package comment for
// the order of events.
func (g *Gateway) call(ctx context.Context, req *mcp.CallToolRequest, t *tool) (*mcp.CallToolResult, error) {
	if req.Session == nil || req.Params == nil {
		return gatewayError("mcp-gateway: the call has no session; nothing was recorded or sent upstream"), nil
	}
	if !g.enter() {
		return gatewayError("mcp-gateway is shutting down: the call was not recorded and not sent upstream"), nil
	}
	defer g.leave()
	s := g.sessionFor(req.Session)
	if s == nil || !s.enter() {
		return gatewayError("mcp-gateway: the MCP session has ended: the call was not recorded and not sent upstream"), nil
	}
	defer s.leave()

	c := &gatewayCall{req: req, t: t, s: s, args: jsonArgs(req.Params.Arguments), served: mcptool.Prefix + t.def.Name}
	if refused := g.runOf(c); refused != nil {
		return refused, nil
	}
	if stopped, err := g.guard(ctx, c); stopped != nil || err != nil {
		return stopped, err
	}
	if refused, err := g.begin(ctx, c); refused != nil || err != nil {
		return refused, err
	}
	c.key = mcptool.IdempotencyKey(c.run.project, c.run.runID, c.opID)
	c.log = g.log.With().Str("run_id", c.run.runID).Str("operation_id", c.opID).Str("tool", t.def.Name).Logger()

	// Rejected before anything is sent: effect none, as the kernel does.
	decoded, err := mcptool.DecodeArgs(c.args)
	if err == nil {
		err = mcptool.CheckArgs(t.def, decoded)
	}
	if err != nil {
		g.failed(ctx, s, c.run, c.opID, err, "", c.log)
		return gatewayError("mcp-gateway: " + toolErrText(err) + "; the call was not sent upstream"), nil
	}
	conn, err := s.conn(ctx, t.up)
	if err != nil {
		g.failed(ctx, s, c.run, c.opID, err, "", c.log)
		return gatewayError("mcp-gateway: " + toolErrText(err)), nil
	}
	return g.forward(ctx, c, conn)
}

// gatewayCall is one call on its way through call's steps.
type gatewayCall struct {
	req    *mcp.CallToolRequest
	t      *tool
	s      *session
	run    runRef
	args   json.RawMessage
	served string // the tool's name as served: mcp__<tool>
	opID   string
	key    string // the idempotency key sent upstream
	log    zerolog.Logger
}

// runOf sets the run the call belongs to: the session's own, or the one
// the client names in _meta. A malformed name refuses the call.
func (g *Gateway) runOf(c *gatewayCall) *mcp.CallToolResult {
	c.run = runRef{project: g.o.Project, runID: c.s.runID, source: g.o.Source, kind: kindSession, instance: g.instance}
	v, ok := c.req.Params.GetMeta()[RunIDMeta]
	if !ok || v == nil {
		return nil
	}
	id, _ := v.(string)
	if !runIDRE.MatchString(id) {
		return gatewayError(fmt.Sprintf("mcp-gateway: _meta[%q] must be 1-128 characters of A-Z a-z 0-9 _ - starting with a letter or digit, got %v; nothing was recorded or sent upstream", RunIDMeta, v))
	}
	if id != c.s.runID {
		c.run.runID, c.run.kind, c.run.instance = id, kindClient, ""
	}
	return nil
}

// begin records the call's tool.started (and its run's run.started, the
// first time) before anything is sent upstream, and opens the operation
// in the session. A call that cannot be recorded is refused.
func (g *Gateway) begin(ctx context.Context, c *gatewayCall) (*mcp.CallToolResult, error) {
	runStarted, err := g.runStartedEvent(c.run.runID, c.run.kind, c.s.client)
	if err != nil {
		return nil, err
	}
	bctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	c.opID, err = g.st.beginCall(bctx, c.run, runStarted, func(opID string) (kernel.Event, error) {
		// The tool named as the kernel names MCP tools (mcp__<tool>), so
		// probes and supervisors treat gateway operations like the
		// kernel's, and which upstream server (by name and endpoint
		// identity) and tool the call went to.
		return g.event(c.run.runID, kernel.TypeToolStarted, opID+"/started", kernel.ToolStarted{
			OperationID: opID, Tool: c.served, Args: c.args, Server: c.t.up.cfg.Name, UpstreamTool: c.t.def.Name,
			ServerEndpoint: c.t.up.endpoint,
		})
	})
	cancel()
	if err != nil {
		return g.beginRefused(c, err), nil
	}
	if c.run.kind == kindSession {
		c.s.mu.Lock()
		c.s.started = true
		c.s.mu.Unlock()
	}
	c.s.opened(c.run.runID, c.opID, c.served)
	return nil, nil
}

// beginRefused is what the client is told when its call's tool.started
// was not recorded (err): the call was not sent upstream.
func (g *Gateway) beginRefused(c *gatewayCall, err error) *mcp.CallToolResult {
	run := c.run
	switch {
	case errors.Is(err, errRunEnded):
		return gatewayError(fmt.Sprintf("mcp-gateway: run %s of project %s has ended (its end is journaled): nothing was recorded or sent upstream; reconnect for a new session run, or name a new run in _meta[%q]", run.runID, run.project, RunIDMeta))
	case errors.Is(err, errRunSession):
		return gatewayError(fmt.Sprintf("mcp-gateway: run id %s of project %s is another MCP session's run, which only that session writes into: choose another _meta[%q], or none for this session's own run; nothing was recorded or sent upstream", run.runID, run.project, RunIDMeta))
	case errors.Is(err, errRunUsed):
		return gatewayError(fmt.Sprintf("mcp-gateway: run id %s already has events in project %s that this gateway did not write as that run, or is a kernel run: choose another _meta[%q]; nothing was recorded or sent upstream", run.runID, run.project, RunIDMeta))
	case kernel.ErrorCode(err) == kernel.EInvalid:
		// The client's own arguments (a NUL, a lone surrogate, a key twice)
		// cannot be stored: its mistake to fix, not an outage to page on.
		g.log.Warn().Err(err).Str("run_id", run.runID).Str("tool", c.t.def.Name).Msg("mcp gateway: call refused, its tool.started is not storable")
		return gatewayError("mcp-gateway refused the call: its arguments cannot be recorded (" + oneLine(err) + "); fix them and call again; nothing was recorded or sent upstream")
	default:
		g.log.Error().Err(err).Str("run_id", run.runID).Str("tool", c.t.def.Name).Msg("mcp gateway: tool.started not recorded; call refused")
		return gatewayError("mcp-gateway could not record the call durably, so it was not sent upstream: " + oneLine(err))
	}
}

// forward sends the recorded call upstream and records its end: tool.failed
// for a failed call or an error result, tool.completed otherwise.
func (g *Gateway) forward(ctx context.Context, c *gatewayCall, conn *mcptool.Conn) (*mcp.CallToolResult, error) {
	// The call ends with the client's request, or when the gateway's
	// shutdown grace is over.
	cctx, stop := context.WithCancel(ctx)
	defer stop()
	unhook := context.AfterFunc(g.halt, stop)
	defer unhook()
	res, asks, err := c.s.callUpstream(cctx, c.t.up, conn, &mcp.CallToolParams{
		Name:           c.t.def.Name,
		Arguments:      c.args,
		Meta:           forwardMeta(c.req.Params.GetMeta(), c.run, c.opID, c.key),
		InputResponses: c.req.Params.InputResponses,
		RequestState:   c.req.Params.RequestState,
	}, c.key)
	if err != nil {
		return g.callFailed(ctx, c, err, asks)
	}
	if res.IsError {
		g.failed(ctx, c.s, c.run, c.opID, mcptool.ResultError(c.t.up.cfg.Name, c.t.def.Name, res), "", c.log, asks...)
		return res, nil
	}
	ev, err := g.event(c.run.runID, kernel.TypeToolCompleted, c.opID+"/completed", kernel.ToolCompleted{OperationID: c.opID, ResultSummary: mcptool.ResultSummary(res), ClientRequests: asks})
	recorded := err == nil && g.record(ctx, ev, c.log)
	c.s.closed(c.run.runID, c.opID, recorded)
	return res, nil
}

// callFailed records the end of a call that failed upstream (err): the
// call may have reached the server, so its effect is what err's
// classification says, and the client gets the upstream's protocol error
// unchanged, or the gateway's account of the failure. asks are the
// requests the upstream made of the client during the call.
func (g *Gateway) callFailed(ctx context.Context, c *gatewayCall, err error, asks []string) (*mcp.CallToolResult, error) {
	note, cut := "", false
	switch {
	case g.halt.Err() != nil:
		note, cut = " (mcp-gateway shut down while the call was in flight)", true
	case ctx.Err() != nil:
		note = " (the client's request was canceled, or its session ended, while the call was in flight)"
	}
	g.failed(ctx, c.s, c.run, c.opID, err, note, c.log, asks...)
	if cut {
		c.s.cutOp(c.run.runID, c.opID)
	}
	var wire *jsonrpc.Error
	if errors.As(err, &wire) {
		return nil, wire // the upstream's protocol error, unchanged
	}
	return gatewayError(fmt.Sprintf("mcp-gateway: %s%s — the call may have reached the server; operation %s of run %s is recorded for reconciliation", toolErrText(err), note, c.opID, c.run.runID)), nil
}

// failed records tool.failed with err's classification (note appended to
// its message) and what was asked of the client during the call, and
// notes the operation's end.
func (g *Gateway) failed(ctx context.Context, s *session, run runRef, opID string, err error, note string, log zerolog.Logger, asks ...string) {
	errType, effect := kernel.Classify(err)
	ev, berr := g.event(run.runID, kernel.TypeToolFailed, opID+"/failed", kernel.ToolFailed{
		// The text may be an upstream's (its stderr, its error's message),
		// and one NUL in it would make the event unstorable: the record
		// refused, the operation left open although the call had ended.
		OperationID: opID, ErrorType: errType, Error: kernel.Abbreviate(kernel.Storable(toolErrText(err)+note), 2000), Effect: effect,
		ClientRequests: asks,
	})
	if berr == nil {
		g.record(ctx, ev, log)
	}
	s.closed(run.runID, opID, false)
}

// record writes a terminal event, retrying for a while: tool.started is
// durable, so a terminal event that cannot be written leaves the operation
// open (the listing and the sweep take it from there), never lost.
func (g *Gateway) record(ctx context.Context, ev kernel.Event, log zerolog.Logger) bool {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 20*time.Second)
	defer cancel()
	wait := 100 * time.Millisecond
	for {
		err := g.st.enqueueTerminal(ctx, ev)
		if err == nil {
			return true
		}
		if kernel.ErrorCode(err) == kernel.EInvalid || kernel.ErrorCode(err) == kernel.EConflict {
			log.Error().Err(err).Str("event", ev.EventID).Msg("mcp gateway: terminal event refused; the operation stays open")
			return false
		}
		select {
		case <-ctx.Done():
			log.Error().Err(err).Str("event", ev.EventID).Msg("mcp gateway: terminal event not recorded; the operation stays open for reconciliation")
			return false
		case <-time.After(wait):
		}
		wait = min(2*wait, 2*time.Second)
	}
}

// forwardMeta is the _meta sent upstream: the client's own entries (its
// progress token included, so upstream progress reaches it), without the
// protocol's reserved keys (the upstream client sets its own) and with the
// operation's reckon keys, which always win.
func forwardMeta(in mcp.Meta, run runRef, opID, key string) mcp.Meta {
	out := mcp.Meta{}
	for k, v := range in {
		if !reservedMetaKey(k) {
			out[k] = v
		}
	}
	out[mcptool.IdempotencyKeyMeta] = key
	out[mcptool.OperationIDMeta] = opID
	out[mcptool.RunIDMeta] = run.runID
	out[mcptool.ProjectMeta] = run.project
	return out
}

// reservedMetaKey reports a _meta key whose prefix the MCP specification
// reserves (second label modelcontextprotocol or mcp, e.g.
// io.modelcontextprotocol/…).
func reservedMetaKey(k string) bool {
	prefix, _, ok := strings.Cut(k, "/")
	if !ok {
		return false
	}
	labels := strings.Split(prefix, ".")
	return len(labels) >= 2 && (labels[1] == "modelcontextprotocol" || labels[1] == "mcp")
}

// gatewayError is an isError result the gateway writes itself.
func gatewayError(msg string) *mcp.CallToolResult {
	return &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: msg}}}
}

// toolErrText is a classified error's message without its type prefix.
func toolErrText(err error) string {
	var te *kernel.ToolError
	if errors.As(err, &te) && te.Err != nil {
		return te.Err.Error()
	}
	return err.Error()
}

func oneLine(err error) string {
	return strings.Join(strings.Fields(err.Error()), " ")
}
