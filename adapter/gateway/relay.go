// The relay passes on what the MCP specification deprecated in revision
// 2026-07-28 but still carries during its deprecation window (sampling,
// roots, logging): a gateway relays what its servers and clients use.
//
//lint:file-ignore SA1019 the gateway relays sampling, roots and logging while servers and clients use them.

package gateway

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/seed-7bc021c3/reckon/kernel"
	"github.com/seed-7bc021c3/reckon/tool/mcptool"
)

// This file is the gateway's relay between one upstream session and the
// MCP session (the client) that owns it: the upstream's notifications go to
// the client, and its requests to the client — sampling, elicitation,
// roots — are asked of the client and answered with the client's answer,
// within the call they belong to. The gateway declares upstream exactly the
// client capabilities (sampling, elicitation, roots) its client declared.
//
// An upstream on protocol revision 2026-07-28 or later asks in the call's
// result instead (multi-round-trip requests): callUpstream asks the client
// and sends the call again with the answers, as one operation under one
// idempotency key. Either way the call's operation stays in flight while
// the client answers, and its terminal event names what was asked
// (client_requests).

// newProtocol is the first protocol revision whose servers ask the client
// through call results, not requests of their own.
const newProtocol = "2026-07-28"

// maxInputRounds bounds the rounds of a multi-round-trip call, as the SDK
// bounds its own.
const maxInputRounds = 10

// relay forwards one upstream session's notifications and requests to the
// MCP session that owns it (set when a session adopts a spare or dials).
type relay struct {
	g    *Gateway
	up   *upstream
	caps *mcp.ClientCapabilities // declared upstream: the client's, relayed
	// client is the upstream session's client, for roots/list_changed.
	client *mcp.Client

	mu    sync.Mutex
	ss    *mcp.ServerSession
	calls map[*callTrack]struct{}

	// read counts the upstream's log and progress notifications read off
	// the wire, relayed those handled: a call's answer is returned only
	// once the notifications read before it are relayed (settle).
	read, relayed atomic.Int64
}

// observe counts the notifications that settle waits for.
func (r *relay) observe(m jsonrpc.Message) {
	if req, ok := m.(*jsonrpc.Request); ok && !req.IsCall() && callScoped(req.Method) {
		r.read.Add(1)
	}
}

// callScoped names the notifications the gateway relays on the stream of
// the call they belong to.
func callScoped(method string) bool {
	return method == "notifications/message" || method == "notifications/progress"
}

// settleBound bounds settle's wait: a notification that the SDK refuses
// (malformed params) is read but never handled.
const settleBound = 2 * time.Second

// settle waits until the notifications the upstream sent before the
// answer just read are relayed: the SDK hands the answer to its caller at
// once but queues notifications for a goroutine, and once the call's
// answer is on its way to the client, its stream is closed.
func (r *relay) settle(ctx context.Context) {
	want := r.read.Load()
	if r.relayed.Load() >= want {
		return
	}
	t := time.NewTicker(time.Millisecond)
	defer t.Stop()
	stop := time.After(settleBound)
	for r.relayed.Load() < want {
		select {
		case <-ctx.Done():
			return
		case <-stop:
			return
		case <-t.C:
		}
	}
}

// callTrack is one tools/call in flight on an upstream session: the
// client's request (whose context routes what the gateway asks the client
// on that request's stream) and what was asked of the client for it.
type callTrack struct {
	ctx   context.Context
	token any // the client's progress token, if any
	mu    sync.Mutex
	asks  []string
}

func (tr *callTrack) note(method string, outcome string) {
	if tr == nil {
		return
	}
	tr.mu.Lock()
	tr.asks = append(tr.asks, method+": "+outcome)
	tr.mu.Unlock()
}

func (tr *callTrack) asked() []string {
	if tr == nil {
		return nil
	}
	tr.mu.Lock()
	defer tr.mu.Unlock()
	return append([]string(nil), tr.asks...)
}

// clientCaps is what the gateway declares upstream for session ss: the
// sampling, elicitation and roots capabilities its client declared, and
// nothing else (nil ss: none, as for the discovery sessions).
func clientCaps(ss *mcp.ServerSession) *mcp.ClientCapabilities {
	caps := &mcp.ClientCapabilities{}
	if ss == nil {
		return caps
	}
	if p := ss.InitializeParams(); p != nil && p.Capabilities != nil {
		c := p.Capabilities
		caps.Sampling, caps.Elicitation, caps.RootsV2 = c.Sampling, c.Elicitation, c.RootsV2
	}
	return caps
}

func noCaps(c *mcp.ClientCapabilities) bool {
	return c.Sampling == nil && c.Elicitation == nil && c.RootsV2 == nil
}

// dial opens an upstream session for session ss (nil: a discovery
// session) whose notifications and requests go through r.
func (g *Gateway) dial(ctx context.Context, up *upstream, ss *mcp.ServerSession) (*mcptool.Conn, *relay, error) {
	r := &relay{g: g, up: up, caps: clientCaps(ss), ss: ss, calls: map[*callTrack]struct{}{}}
	copts := &mcp.ClientOptions{
		Capabilities:                r.caps,
		ProgressNotificationHandler: r.progress,
		LoggingMessageHandler:       r.log,
		ToolListChangedHandler:      func(ctx context.Context, req *mcp.ToolListChangedRequest) { g.refresh(ctx, up, req.Session, listTools) },
		PromptListChangedHandler: func(ctx context.Context, req *mcp.PromptListChangedRequest) {
			g.refresh(ctx, up, req.Session, listPrompts)
		},
		ResourceListChangedHandler: func(ctx context.Context, req *mcp.ResourceListChangedRequest) {
			g.refresh(ctx, up, req.Session, listResources)
		},
		ResourceUpdatedHandler:     r.resourceUpdated,
		ElicitationCompleteHandler: r.elicitationComplete,
		// The gateway asks the client itself (callUpstream), within the
		// call, with roots included.
		MultiRoundTrip: &mcp.MultiRoundTripOptions{Disabled: true},
	}
	if r.caps.Sampling != nil {
		copts.CreateMessageWithToolsHandler = r.sample
	}
	r.client = mcptool.NewClient(copts)
	r.client.AddReceivingMiddleware(r.clientRequests)
	o := g.o.MCP
	o.Observe = r.observe
	conn, err := mcptool.DialClient(ctx, up.cfg, o, g.o.Project, r.client)
	if err != nil {
		return nil, nil, err
	}
	return conn, r, nil
}

func (r *relay) set(ss *mcp.ServerSession) {
	r.mu.Lock()
	r.ss = ss
	r.mu.Unlock()
}

// track notes a call in flight on the upstream session; untrack ends it.
func (r *relay) track(ctx context.Context, token any) *callTrack {
	tr := &callTrack{ctx: ctx, token: token}
	r.mu.Lock()
	r.calls[tr] = struct{}{}
	r.mu.Unlock()
	return tr
}

func (r *relay) untrack(tr *callTrack) {
	r.mu.Lock()
	delete(r.calls, tr)
	r.mu.Unlock()
}

// downstream is where a message from the upstream goes: the owning
// session, and the call it belongs to — the one whose progress token it
// carries, else the only call in flight (an upstream's request carries no
// reference to its call, and with several in flight it is not known) —
// with a context that routes it on that call's stream and ends when
// either side cancels. done releases the context.
func (r *relay) downstream(ctx context.Context, token any) (ss *mcp.ServerSession, tr *callTrack, dctx context.Context, done func()) {
	r.mu.Lock()
	ss = r.ss
	for c := range r.calls {
		switch {
		case token != nil && c.token == token:
			tr = c
		case token == nil && len(r.calls) == 1:
			tr = c
		}
	}
	r.mu.Unlock()
	if tr == nil {
		return ss, nil, ctx, func() {}
	}
	dctx, cancel := context.WithCancel(tr.ctx)
	stop := context.AfterFunc(ctx, cancel)
	return ss, tr, dctx, func() { stop(); cancel() }
}

var errNoClient = errors.New("mcp-gateway: no MCP client session owns this upstream session yet")

func (r *relay) progress(ctx context.Context, req *mcp.ProgressNotificationClientRequest) {
	defer r.relayed.Add(1)
	if req == nil || req.Params == nil {
		return
	}
	ss, _, dctx, done := r.downstream(ctx, req.Params.ProgressToken)
	defer done()
	if ss != nil {
		_ = ss.NotifyProgress(dctx, req.Params)
	}
}

// log passes an upstream's log message on; the client's session drops it
// below the level the client set (none set: nothing is sent).
func (r *relay) log(ctx context.Context, req *mcp.LoggingMessageRequest) {
	defer r.relayed.Add(1)
	if req == nil || req.Params == nil {
		return
	}
	ss, _, dctx, done := r.downstream(ctx, nil)
	defer done()
	if ss != nil {
		_ = ss.Log(dctx, req.Params)
	}
}

func (r *relay) resourceUpdated(ctx context.Context, req *mcp.ResourceUpdatedNotificationRequest) {
	if req != nil && req.Params != nil {
		_ = r.g.server.ResourceUpdated(ctx, req.Params)
	}
}

func (r *relay) elicitationComplete(ctx context.Context, req *mcp.ElicitationCompleteNotificationRequest) {
	ss, _, dctx, done := r.downstream(ctx, nil)
	defer done()
	if ss != nil && req != nil && req.Params != nil {
		_ = ss.NotifyElicitationComplete(dctx, req.Params)
	}
}

func (r *relay) sample(ctx context.Context, req *mcp.CreateMessageWithToolsRequest) (*mcp.CreateMessageWithToolsResult, error) {
	ss, tr, dctx, done := r.downstream(ctx, nil)
	defer done()
	if ss == nil {
		return nil, errNoClient
	}
	res, err := ss.CreateMessageWithTools(dctx, req.Params)
	tr.note("sampling/createMessage", outcome(err, "answered"))
	return res, err
}

func (r *relay) elicit(ctx context.Context, p *mcp.ElicitParams) (*mcp.ElicitResult, error) {
	ss, tr, dctx, done := r.downstream(ctx, nil)
	defer done()
	if ss == nil {
		return nil, errNoClient
	}
	res, err := ss.Elicit(dctx, p)
	action := ""
	if res != nil {
		action = res.Action
	}
	tr.note("elicitation/create", outcome(err, action))
	return res, err
}

// clientRequests answers an upstream's elicitation/create and roots/list
// with the client's answer, when the client declared them. They bypass the
// SDK's client, which would answer roots/list with its own (empty) list
// and check an elicitation's schema against rules of its own before the
// client — whose answer it is — sees it.
func (r *relay) clientRequests(next mcp.MethodHandler) mcp.MethodHandler {
	return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
		switch {
		case method == "roots/list" && r.caps.RootsV2 != nil:
			return r.roots(ctx)
		case method == "elicitation/create" && r.caps.Elicitation != nil:
			p, ok := req.GetParams().(*mcp.ElicitParams)
			if !ok {
				return nil, fmt.Errorf("elicitation/create with params %T", req.GetParams())
			}
			return r.elicit(ctx, p)
		}
		return next(ctx, method, req)
	}
}

func (r *relay) roots(ctx context.Context) (*mcp.ListRootsResult, error) {
	ss, tr, dctx, done := r.downstream(ctx, nil)
	defer done()
	if ss == nil {
		return nil, errNoClient
	}
	res, err := ss.ListRoots(dctx, &mcp.ListRootsParams{})
	tr.note("roots/list", outcome(err, "answered"))
	return res, err
}

// rootsChanged tells the upstream that the client's roots changed. The
// SDK's client notifies when its own root set changes, which the gateway
// never reads (rootsList answers from the client): one placeholder root
// added is the notification.
func (r *relay) rootsChanged() {
	if r.caps.RootsV2 != nil && r.caps.RootsV2.ListChanged {
		r.client.AddRoots(&mcp.Root{URI: "reckon-gateway:roots-relayed", Name: "answered by the MCP client"})
	}
}

func outcome(err error, ok string) string {
	if err != nil {
		return "failed: " + kernel.Abbreviate(kernel.Storable(err.Error()), 200)
	}
	return ok
}

// fulfil asks the client for each input an upstream's call result
// requests, within the call tr tracks.
func (r *relay) fulfil(ctx context.Context, tr *callTrack, reqs mcp.InputRequestMap) (mcp.InputResponseMap, error) {
	out := make(mcp.InputResponseMap, len(reqs))
	for id, ir := range reqs {
		var (
			res mcp.InputResponse
			err error
		)
		switch p := ir.(type) {
		case *mcp.ElicitParams:
			res, err = r.elicitIn(ctx, tr, p)
		case *mcp.CreateMessageWithToolsParams:
			res, err = r.sampleIn(ctx, tr, p)
		case *mcp.CreateMessageParams:
			res, err = r.sampleIn(ctx, tr, toolsParams(p))
		case *mcp.ListRootsParams:
			res, err = r.rootsIn(ctx, tr)
		default:
			err = fmt.Errorf("input request %q of an unknown kind %T", id, ir)
		}
		if err != nil {
			return nil, err
		}
		out[id] = res
	}
	return out, nil
}

// The …In methods ask the client on behalf of a call whose track is known
// (the call's own context routes the request), refusing what the client
// did not declare, as the SDK's client would.
func (r *relay) elicitIn(ctx context.Context, tr *callTrack, p *mcp.ElicitParams) (*mcp.ElicitResult, error) {
	if r.caps.Elicitation == nil {
		return nil, errors.New("the upstream asks for elicitation, which the MCP client did not declare")
	}
	res, err := r.ssOf().Elicit(ctx, p)
	action := ""
	if res != nil {
		action = res.Action
	}
	tr.note("elicitation/create", outcome(err, action))
	return res, err
}

func (r *relay) sampleIn(ctx context.Context, tr *callTrack, p *mcp.CreateMessageWithToolsParams) (*mcp.CreateMessageWithToolsResult, error) {
	if r.caps.Sampling == nil {
		return nil, errors.New("the upstream asks for sampling, which the MCP client did not declare")
	}
	res, err := r.ssOf().CreateMessageWithTools(ctx, p)
	tr.note("sampling/createMessage", outcome(err, "answered"))
	return res, err
}

func (r *relay) rootsIn(ctx context.Context, tr *callTrack) (*mcp.ListRootsResult, error) {
	if r.caps.RootsV2 == nil {
		return nil, errors.New("the upstream asks for roots, which the MCP client did not declare")
	}
	res, err := r.ssOf().ListRoots(ctx, &mcp.ListRootsParams{})
	tr.note("roots/list", outcome(err, "answered"))
	return res, err
}

func (r *relay) ssOf() *mcp.ServerSession {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.ss
}

func toolsParams(p *mcp.CreateMessageParams) *mcp.CreateMessageWithToolsParams {
	msgs := make([]*mcp.SamplingMessageV2, 0, len(p.Messages))
	for _, m := range p.Messages {
		msgs = append(msgs, &mcp.SamplingMessageV2{Role: m.Role, Content: []mcp.Content{m.Content}})
	}
	return &mcp.CreateMessageWithToolsParams{Meta: p.Meta, IncludeContext: p.IncludeContext, MaxTokens: p.MaxTokens, Messages: msgs,
		Metadata: p.Metadata, ModelPreferences: p.ModelPreferences, StopSequences: p.StopSequences, SystemPrompt: p.SystemPrompt, Temperature: p.Temperature}
}

// usesNewProtocol reports an upstream session on revision 2026-07-28 or
// later, which takes the log level in each request's _meta instead of
// logging/setLevel.
func usesNewProtocol(conn *mcptool.Conn) bool {
	ir := conn.InitializeResult()
	return ir != nil && ir.ProtocolVersion >= newProtocol
}

// callUpstream sends tools/call to the upstream and, while the upstream
// answers that it needs the client's input (a multi-round-trip result),
// asks the client within the call and sends the call again with the
// answers and the upstream's request state: one operation, one idempotency
// key. It returns what was asked of the client on the way, also when the
// upstream asked with requests of its own (relay.elicit, …).
func (s *session) callUpstream(ctx context.Context, up *upstream, conn *mcptool.Conn, params *mcp.CallToolParams, key string) (*mcp.CallToolResult, []string, error) {
	r := s.relayOf(up)
	tr := r.track(ctx, params.GetProgressToken())
	defer r.untrack(tr)
	if lvl := s.level(); lvl != "" && usesNewProtocol(conn) {
		params.Meta[mcp.MetaKeyLogLevel] = lvl
	}
	for round := 1; ; round++ {
		res, err := conn.Call(ctx, params, key)
		r.settle(ctx)
		if err != nil || !res.NeedsInput() {
			return res, tr.asked(), err
		}
		if round >= maxInputRounds {
			return nil, tr.asked(), inputFailed(up, params.Name, fmt.Errorf("the upstream still asks for input after %d rounds", round))
		}
		answers, err := r.fulfil(ctx, tr, res.InputRequests)
		if err != nil {
			return nil, tr.asked(), inputFailed(up, params.Name, err)
		}
		next := *params
		next.InputResponses, next.RequestState = answers, res.RequestState
		params = &next
	}
}

// inputFailed is a call the upstream left waiting for input the client
// did not give: the upstream has the call, so its effect is uncertain.
func inputFailed(up *upstream, tool string, err error) error {
	return &kernel.ToolError{ErrorType: mcptool.ErrorTypeCallFailed, Effect: kernel.EffectUncertain,
		Err: fmt.Errorf("mcp server %q tool %q: asking the MCP client for the input the server requested: %w", up.cfg.Name, tool, err)}
}

func (s *session) relayOf(up *upstream) *relay {
	uc := s.ups[up.cfg.Name]
	uc.mu.Lock()
	defer uc.mu.Unlock()
	return uc.relay
}

// level is the log level the client set (empty: none).
func (s *session) level() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.logLevel
}

// setLevel notes the client's log level and passes it to the session's
// upstream sessions that take logging/setLevel (newer ones get it with
// each call).
func (s *session) setLevel(ctx context.Context, lvl string) {
	s.mu.Lock()
	s.logLevel = lvl
	s.mu.Unlock()
	for _, uc := range s.ups {
		uc.mu.Lock()
		conn := uc.conn
		uc.mu.Unlock()
		if conn != nil {
			s.passLevel(ctx, conn, lvl)
		}
	}
}

func (s *session) passLevel(ctx context.Context, conn *mcptool.Conn, lvl string) {
	if lvl == "" || usesNewProtocol(conn) {
		return
	}
	if ir := conn.InitializeResult(); ir == nil || ir.Capabilities == nil || ir.Capabilities.Logging == nil {
		return
	}
	if err := conn.Session().SetLoggingLevel(ctx, &mcp.SetLoggingLevelParams{Level: mcp.LoggingLevel(lvl)}); err != nil {
		s.g.log.Warn().Err(err).Str("run_id", s.runID).Msg("mcp gateway: passing the client's log level upstream failed")
	}
}

// onSetLevel passes a client's logging/setLevel on to its upstream
// sessions once the SDK has recorded it.
func (g *Gateway) onSetLevel(next mcp.MethodHandler) mcp.MethodHandler {
	return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
		res, err := next(ctx, method, req)
		if err != nil || method != "logging/setLevel" {
			return res, err
		}
		ss, ok := req.GetSession().(*mcp.ServerSession)
		p, pok := req.GetParams().(*mcp.SetLoggingLevelParams)
		if ok && pok && p != nil {
			if s := g.sessionFor(ss); s != nil {
				s.setLevel(ctx, string(p.Level))
			}
		}
		return res, err
	}
}

// relayOptions sets the server options through which the client's side
// reaches the upstreams.
func (g *Gateway) relayOptions(o *mcp.ServerOptions) {
	o.RootsListChangedHandler = g.rootsChanged
}

// rootsChanged tells a client's upstream sessions that its roots changed.
func (g *Gateway) rootsChanged(_ context.Context, req *mcp.RootsListChangedRequest) {
	if req == nil || req.Session == nil {
		return
	}
	s := g.sessionFor(req.Session)
	if s == nil {
		return
	}
	for _, uc := range s.ups {
		uc.mu.Lock()
		r := uc.relay
		uc.mu.Unlock()
		if r != nil {
			r.rootsChanged()
		}
	}
}
