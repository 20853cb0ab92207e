package gateway

import (
	"context"
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

	run := runRef{project: g.o.Project, runID: s.runID, source: g.o.Source, kind: kindSession, instance: g.instance}
	if v, ok := req.Params.GetMeta()[RunIDMeta]; ok && v != nil {
		id, _ := v.(string)
		if !runIDRE.MatchString(id) {
			return gatewayError(fmt.Sprintf("mcp-gateway: _meta[%q] must be 1-128 characters of A-Z a-z 0-9 _ - starting with a letter or digit, got %v; nothing was recorded or sent upstream", RunIDMeta, v)), nil
		}
		if id != s.runID {
			run.runID, run.kind, run.instance = id, kindClient, ""
		}
	}
	args := jsonArgs(req.Params.Arguments)
	served := mcptool.Prefix + t.def.Name
	runStarted, err := g.runStartedEvent(run.runID, run.kind, s.client)
	if err != nil {
		return nil, err
	}
	bctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	opID, err := g.st.beginCall(bctx, run, runStarted, func(opID string) (kernel.Event, error) {
		// The tool named as the kernel names MCP tools (mcp__<tool>), so
		// probes and supervisors treat gateway operations like the
		// kernel's, and which upstream server (by name and endpoint
		// identity) and tool the call went to.
		return g.event(run.runID, kernel.TypeToolStarted, opID+"/started", kernel.ToolStarted{
			OperationID: opID, Tool: served, Args: args, Server: t.up.cfg.Name, UpstreamTool: t.def.Name,
			ServerEndpoint: t.up.endpoint,
		})
	})
	cancel()
	switch {
	case errors.Is(err, errRunEnded):
		return gatewayError(fmt.Sprintf("mcp-gateway: run %s of project %s has ended (its end is journaled): nothing was recorded or sent upstream; reconnect for a new session run, or name a new run in _meta[%q]", run.runID, run.project, RunIDMeta)), nil
	case errors.Is(err, errRunSession):
		return gatewayError(fmt.Sprintf("mcp-gateway: run id %s of project %s is another MCP session's run, which only that session writes into: choose another _meta[%q], or none for this session's own run; nothing was recorded or sent upstream", run.runID, run.project, RunIDMeta)), nil
	case errors.Is(err, errRunUsed):
		return gatewayError(fmt.Sprintf("mcp-gateway: run id %s already has events in project %s that this gateway did not write as that run, or is a kernel run: choose another _meta[%q]; nothing was recorded or sent upstream", run.runID, run.project, RunIDMeta)), nil
	case kernel.ErrorCode(err) == kernel.EInvalid:
		// The client's own arguments (a NUL, a lone surrogate, a key twice)
		// cannot be stored: its mistake to fix, not an outage to page on.
		g.log.Warn().Err(err).Str("run_id", run.runID).Str("tool", t.def.Name).Msg("mcp gateway: call refused, its tool.started is not storable")
		return gatewayError("mcp-gateway refused the call: its arguments cannot be recorded (" + oneLine(err) + "); fix them and call again; nothing was recorded or sent upstream"), nil
	case err != nil:
		g.log.Error().Err(err).Str("run_id", run.runID).Str("tool", t.def.Name).Msg("mcp gateway: tool.started not recorded; call refused")
		return gatewayError("mcp-gateway could not record the call durably, so it was not sent upstream: " + oneLine(err)), nil
	}
	if run.kind == kindSession {
		s.mu.Lock()
		s.started = true
		s.mu.Unlock()
	}
	s.opened(run.runID, opID, served)
	key := mcptool.IdempotencyKey(run.project, run.runID, opID)
	log := g.log.With().Str("run_id", run.runID).Str("operation_id", opID).Str("tool", t.def.Name).Logger()

	// Rejected before anything is sent: effect none, as the kernel does.
	decoded, err := mcptool.DecodeArgs(args)
	if err == nil {
		err = mcptool.CheckArgs(t.def, decoded)
	}
	if err != nil {
		g.failed(ctx, s, run, opID, err, "", log)
		return gatewayError("mcp-gateway: " + toolErrText(err) + "; the call was not sent upstream"), nil
	}
	conn, err := s.conn(ctx, t.up)
	if err != nil {
		g.failed(ctx, s, run, opID, err, "", log)
		return gatewayError("mcp-gateway: " + toolErrText(err)), nil
	}

	// The call ends with the client's request, or when the gateway's
	// shutdown grace is over.
	cctx, stop := context.WithCancel(ctx)
	defer stop()
	unhook := context.AfterFunc(g.halt, stop)
	defer unhook()
	res, asks, err := s.callUpstream(cctx, t.up, conn, &mcp.CallToolParams{
		Name:           t.def.Name,
		Arguments:      args,
		Meta:           forwardMeta(req.Params.GetMeta(), run, opID, key),
		InputResponses: req.Params.InputResponses,
		RequestState:   req.Params.RequestState,
	}, key)
	if err != nil {
		note, cut := "", false
		switch {
		case g.halt.Err() != nil:
			note, cut = " (mcp-gateway shut down while the call was in flight)", true
		case ctx.Err() != nil:
			note = " (the client's request was canceled, or its session ended, while the call was in flight)"
		}
		g.failed(ctx, s, run, opID, err, note, log, asks...)
		if cut {
			s.cutOp(run.runID, opID)
		}
		var wire *jsonrpc.Error
		if errors.As(err, &wire) {
			return nil, wire // the upstream's protocol error, unchanged
		}
		return gatewayError(fmt.Sprintf("mcp-gateway: %s%s — the call may have reached the server; operation %s of run %s is recorded for reconciliation", toolErrText(err), note, opID, run.runID)), nil
	}
	if res.IsError {
		g.failed(ctx, s, run, opID, mcptool.ResultError(t.up.cfg.Name, t.def.Name, res), "", log, asks...)
		return res, nil
	}
	ev, err := g.event(run.runID, kernel.TypeToolCompleted, opID+"/completed", kernel.ToolCompleted{OperationID: opID, ResultSummary: mcptool.ResultSummary(res), ClientRequests: asks})
	recorded := err == nil && g.record(ctx, ev, log)
	s.closed(run.runID, opID, recorded)
	return res, nil
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
