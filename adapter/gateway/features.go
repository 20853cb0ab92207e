package gateway

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/yosida95/uritemplate/v3"

	"github.com/seed-7bc021c3/reckon/tool/mcptool"
)

// This file serves the upstreams' resources, resource templates, prompts
// and completions under the tools' naming rules — each under its own name
// (URI, URI template, prompt name), one upstream per name — and follows
// the upstreams' list_changed notifications. None of these has a side
// effect to journal, so they pass unrecorded. A capability no upstream
// declares is not declared by the gateway either, so the client is told at
// initialize, not per request.

// listKind names one of an upstream's lists.
type listKind int

const (
	listTools listKind = iota
	listPrompts
	listResources
)

// features is what one upstream offers besides its tools.
type features struct {
	prompts   []*mcp.Prompt
	resources []*mcp.Resource
	templates []*mcp.ResourceTemplate
}

// listFeatures lists an upstream's prompts, resources and resource
// templates, those its capabilities declare.
func listFeatures(ctx context.Context, cs *mcp.ClientSession) (features, error) {
	var f features
	caps := &mcp.ServerCapabilities{}
	if ir := cs.InitializeResult(); ir != nil && ir.Capabilities != nil {
		caps = ir.Capabilities
	}
	if caps.Prompts != nil {
		for p, err := range cs.Prompts(ctx, nil) {
			if err != nil {
				return f, fmt.Errorf("prompts/list: %w", err)
			}
			f.prompts = append(f.prompts, p)
		}
	}
	if caps.Resources != nil {
		for r, err := range cs.Resources(ctx, nil) {
			if err != nil {
				return f, fmt.Errorf("resources/list: %w", err)
			}
			f.resources = append(f.resources, r)
		}
		for t, err := range cs.ResourceTemplates(ctx, nil) {
			if err != nil {
				return f, fmt.Errorf("resources/templates/list: %w", err)
			}
			f.templates = append(f.templates, t)
		}
	}
	return f, nil
}

// claim records up as the server of names in owners, refusing a name
// another upstream serves.
func claim(owners map[string]*upstream, up *upstream, kind string, names []string) error {
	for _, n := range names {
		if other, dup := owners[n]; dup && other != up {
			return fmt.Errorf("mcp gateway start-up: %s %q is offered by upstream %q and by upstream %q; served names must be unique", kind, n, other.cfg.Name, up.cfg.Name)
		}
		owners[n] = up
	}
	return nil
}

// claimFeatures records f as up's, refusing collisions.
func (g *Gateway) claimFeatures(up *upstream, f features) error {
	g.fmu.Lock()
	defer g.fmu.Unlock()
	names := func(n int, name func(i int) string) []string {
		out := make([]string, n)
		for i := range out {
			out[i] = name(i)
		}
		return out
	}
	if err := claim(g.prompts, up, "prompt", names(len(f.prompts), func(i int) string { return f.prompts[i].Name })); err != nil {
		return err
	}
	if err := claim(g.resources, up, "resource", names(len(f.resources), func(i int) string { return f.resources[i].URI })); err != nil {
		return err
	}
	return claim(g.templates, up, "resource template", names(len(f.templates), func(i int) string { return f.templates[i].URITemplate }))
}

// serveFeatures adds f to the served set, each handled by up.
func (g *Gateway) serveFeatures(up *upstream, f features) {
	for _, p := range f.prompts {
		g.server.AddPrompt(p, g.getPrompt(up))
	}
	for _, r := range f.resources {
		g.server.AddResource(r, g.readResource(up))
	}
	for _, t := range f.templates {
		g.server.AddResourceTemplate(t, g.readResource(up))
	}
}

// serverOptions are the handlers the gateway offers only when an upstream
// does: completions and resource subscriptions.
func (g *Gateway) serverOptions(o *mcp.ServerOptions, caps []*mcp.ServerCapabilities) {
	for _, c := range caps {
		if c == nil {
			continue
		}
		if c.Completions != nil {
			o.CompletionHandler = g.complete
		}
		if c.Resources != nil && c.Resources.Subscribe {
			o.SubscribeHandler, o.UnsubscribeHandler = g.subscribe, g.unsubscribe
		}
	}
}

// upstreamFor is the upstream session of ss with up, opened on first use.
func (g *Gateway) upstreamFor(ctx context.Context, ss *mcp.ServerSession, up *upstream) (*mcptool.Conn, error) {
	s := g.sessionFor(ss)
	if s == nil {
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: "mcp-gateway is shutting down"}
	}
	return s.conn(ctx, up)
}

// passMeta is the _meta of an unrecorded request sent upstream: the
// client's own entries, without the protocol's reserved keys.
func passMeta(in mcp.Meta) mcp.Meta {
	if len(in) == 0 {
		return nil
	}
	out := mcp.Meta{}
	for k, v := range in {
		if !reservedMetaKey(k) {
			out[k] = v
		}
	}
	return out
}

// errInputOnRead refuses a multi-round-trip answer outside tools/call.
func errInputOnRead(up *upstream, what string) error {
	return &jsonrpc.Error{Code: jsonrpc.CodeInternalError,
		Message: fmt.Sprintf("mcp-gateway: upstream %q asks the client for input on %s; the gateway relays such requests within tools/call only", up.cfg.Name, what)}
}

func (g *Gateway) readResource(up *upstream) mcp.ResourceHandler {
	return func(ctx context.Context, req *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
		conn, err := g.upstreamFor(ctx, req.Session, up)
		if err != nil {
			return nil, err
		}
		res, err := conn.Session().ReadResource(ctx, &mcp.ReadResourceParams{URI: req.Params.URI, Meta: passMeta(req.Params.Meta)})
		if err == nil && res.NeedsInput() {
			return nil, errInputOnRead(up, "resources/read")
		}
		return res, err
	}
}

func (g *Gateway) getPrompt(up *upstream) mcp.PromptHandler {
	return func(ctx context.Context, req *mcp.GetPromptRequest) (*mcp.GetPromptResult, error) {
		conn, err := g.upstreamFor(ctx, req.Session, up)
		if err != nil {
			return nil, err
		}
		res, err := conn.Session().GetPrompt(ctx, &mcp.GetPromptParams{Name: req.Params.Name, Arguments: req.Params.Arguments, Meta: passMeta(req.Params.Meta)})
		if err == nil && res.NeedsInput() {
			return nil, errInputOnRead(up, "prompts/get")
		}
		return res, err
	}
}

// resourceOwner is the upstream serving uri: the one listing it, else the
// first (in name order) whose template matches it.
func (g *Gateway) resourceOwner(uri string) *upstream {
	g.fmu.Lock()
	defer g.fmu.Unlock()
	if up := g.resources[uri]; up != nil {
		return up
	}
	if up := g.templates[uri]; up != nil {
		return up
	}
	tpls := make([]string, 0, len(g.templates))
	for t := range g.templates {
		tpls = append(tpls, t)
	}
	sort.Strings(tpls)
	for _, t := range tpls {
		if tpl, err := uritemplate.New(t); err == nil && tpl.Regexp().MatchString(uri) {
			return g.templates[t]
		}
	}
	return nil
}

func (g *Gateway) complete(ctx context.Context, req *mcp.CompleteRequest) (*mcp.CompleteResult, error) {
	var up *upstream
	switch ref := req.Params.Ref; ref.Type {
	case "ref/prompt":
		g.fmu.Lock()
		up = g.prompts[ref.Name]
		g.fmu.Unlock()
	case "ref/resource":
		up = g.resourceOwner(ref.URI)
	}
	if up == nil {
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: fmt.Sprintf("mcp-gateway: no upstream offers %s %q", req.Params.Ref.Type, req.Params.Ref.Name+req.Params.Ref.URI)}
	}
	conn, err := g.upstreamFor(ctx, req.Session, up)
	if err != nil {
		return nil, err
	}
	if ir := conn.InitializeResult(); ir == nil || ir.Capabilities == nil || ir.Capabilities.Completions == nil {
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeMethodNotFound, Message: fmt.Sprintf("mcp-gateway: upstream %q offers no completions", up.cfg.Name)}
	}
	p := *req.Params
	p.Meta = passMeta(p.Meta)
	return conn.Session().Complete(ctx, &p)
}

// subscribe passes a resource subscription to the upstream serving the
// resource; the SDK notes the session's subscription, and the upstream's
// notifications/resources/updated reach it (relay.resourceUpdated).
func (g *Gateway) subscribe(ctx context.Context, req *mcp.SubscribeRequest) error {
	return g.onResourceOwner(ctx, req.Session, req.Params.URI, func(cs *mcp.ClientSession) error {
		return cs.Subscribe(ctx, &mcp.SubscribeParams{URI: req.Params.URI, Meta: passMeta(req.Params.Meta)})
	})
}

func (g *Gateway) unsubscribe(ctx context.Context, req *mcp.UnsubscribeRequest) error {
	return g.onResourceOwner(ctx, req.Session, req.Params.URI, func(cs *mcp.ClientSession) error {
		return cs.Unsubscribe(ctx, &mcp.UnsubscribeParams{URI: req.Params.URI, Meta: passMeta(req.Params.Meta)})
	})
}

// onResourceOwner runs f on ss's upstream session with the upstream
// serving uri.
func (g *Gateway) onResourceOwner(ctx context.Context, ss *mcp.ServerSession, uri string, f func(*mcp.ClientSession) error) error {
	up := g.resourceOwner(uri)
	if up == nil {
		return mcp.ResourceNotFoundError(uri)
	}
	conn, err := g.upstreamFor(ctx, ss, up)
	if err != nil {
		return err
	}
	return f(conn.Session())
}

// refresh follows an upstream's list_changed: it lists the upstream's
// tools, prompts or resources again on cs, in the background (the
// notification's handler must not wait on the same session), and updates
// the served set; the SDK tells the clients (their own list_changed).
func (g *Gateway) refresh(ctx context.Context, up *upstream, cs *mcp.ClientSession, kind listKind) {
	if cs == nil {
		return
	}
	go func() {
		ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
		defer cancel()
		var err error
		switch kind {
		case listTools:
			err = g.refreshTools(ctx, up, cs)
		default:
			err = g.refreshFeatures(ctx, up, cs)
		}
		if err != nil {
			g.log.Error().Err(err).Str("server", up.cfg.Name).Msg("mcp gateway: following the upstream's list_changed failed; the served list is unchanged")
		}
	}()
}

// refreshTools replaces up's served tools by its current list (restricted
// to its "tools" list when configured). A new tool whose name another
// upstream serves is not served.
func (g *Gateway) refreshTools(ctx context.Context, up *upstream, cs *mcp.ClientSession) error {
	current := map[string]*mcp.Tool{}
	for t, err := range cs.Tools(ctx, nil) {
		if err != nil {
			return fmt.Errorf("tools/list: %w", err)
		}
		if len(up.cfg.Tools) == 0 || slices.Contains(up.cfg.Tools, t.Name) {
			current[t.Name] = t
		}
	}
	g.fmu.Lock()
	var gone []string
	for n, t := range g.tools {
		if t.up == up && current[n] == nil {
			gone = append(gone, n)
			delete(g.tools, n)
		}
	}
	var add []*tool
	for n, def := range current {
		if other, ok := g.tools[n]; ok && other.up != up {
			g.log.Error().Str("server", up.cfg.Name).Str("tool", n).Str("served_by", other.up.cfg.Name).Msg("mcp gateway: a new upstream tool's name is served by another upstream; not served")
			continue
		}
		t := &tool{up: up, def: def}
		g.tools[n] = t
		add = append(add, t)
	}
	g.fmu.Unlock()
	if len(gone) > 0 {
		g.server.RemoveTools(gone...)
	}
	for _, t := range add {
		if err := g.addTool(t); err != nil {
			g.log.Error().Err(err).Msg("mcp gateway: upstream tool not served")
		}
	}
	g.log.Info().Str("server", up.cfg.Name).Int("tools", len(current)).Strs("removed", gone).Msg("mcp gateway: upstream tool list followed")
	return nil
}

// refreshFeatures replaces up's served prompts, resources and templates by
// its current lists.
func (g *Gateway) refreshFeatures(ctx context.Context, up *upstream, cs *mcp.ClientSession) error {
	f, err := listFeatures(ctx, cs)
	if err != nil {
		return err
	}
	g.fmu.Lock()
	var prompts, resources, templates []string
	for _, drop := range []struct {
		owners map[string]*upstream
		out    *[]string
	}{{g.prompts, &prompts}, {g.resources, &resources}, {g.templates, &templates}} {
		for n, o := range drop.owners {
			if o == up {
				*drop.out = append(*drop.out, n)
				delete(drop.owners, n)
			}
		}
	}
	g.fmu.Unlock()
	g.server.RemovePrompts(prompts...)
	g.server.RemoveResources(resources...)
	g.server.RemoveResourceTemplates(templates...)
	if err := g.claimFeatures(up, f); err != nil {
		return fmt.Errorf("%s", strings.TrimPrefix(err.Error(), "mcp gateway start-up: "))
	}
	g.serveFeatures(up, f)
	return nil
}
