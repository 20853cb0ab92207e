package gateway

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/seed-7bc021c3/reckon/kernel"
	"github.com/seed-7bc021c3/reckon/platform/httplimit"
)

// ServeStdio serves one MCP session over in/out until the client closes
// it (stdin ends) or ctx ends; then it shuts down as Close does. Nothing
// else may write to out.
func (g *Gateway) ServeStdio(ctx context.Context, in io.ReadCloser, out io.WriteCloser) error {
	sctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	defer cancel()
	ss, err := g.server.Connect(sctx, &mcp.IOTransport{Reader: in, Writer: out}, nil)
	if err != nil {
		g.Close()
		return fmt.Errorf("mcp gateway: stdio session: %w", err)
	}
	ended := make(chan struct{})
	go func() {
		_ = ss.Wait()
		close(ended)
	}()
	select {
	case <-ended:
	case <-ctx.Done():
	}
	g.Close()
	_ = ss.Close() // a client that never initialised has no session state
	return nil
}

// Handler serves streamable HTTP at HTTPPath, each MCP session a run,
// with the API's bounds (platform/httplimit): the token is checked before
// the body is read, and the body must arrive within Config.BodyTimeout.
// With Config.Token set, requests must carry "Authorization: Bearer
// <token>" (the scheme in any case).
func (g *Gateway) Handler() http.Handler {
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return g.server },
		&mcp.StreamableHTTPOptions{SessionTimeout: g.o.SessionIdle})
	mux := http.NewServeMux()
	mux.Handle(HTTPPath, g.authorize(g.limitSessions(h)))
	return httplimit.BodyDeadline(g.o.BodyTimeout, mux)
}

// limitSessions refuses a request that would open a new MCP session (it
// carries no Mcp-Session-Id) while Config.MaxSessions sessions are open:
// 503 with a Retry-After, before the SDK creates anything. Requests of
// open sessions pass.
func (g *Gateway) limitSessions(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Mcp-Session-Id") == "" && r.Method == http.MethodPost {
			g.mu.Lock()
			open := len(g.sessions)
			g.mu.Unlock()
			if open >= g.o.MaxSessions {
				httplimit.CloseIfUnread(w, r)
				w.Header().Set("Retry-After", "60")
				w.Header().Set("Content-Type", "application/json")
				w.WriteHeader(http.StatusServiceUnavailable)
				_, _ = fmt.Fprintf(w, `{"error": "mcp-gateway serves at most %d MCP sessions at once (--max-sessions, RECKON_GATEWAY_MAX_SESSIONS) and all are open; close one, or retry when an idle one has been closed"}`+"\n", g.o.MaxSessions)
				return
			}
		}
		h.ServeHTTP(w, r)
	})
}

func (g *Gateway) authorize(h http.Handler) http.Handler {
	if g.o.Token == "" {
		return h
	}
	// Digests, not the strings, are compared: ConstantTimeCompare returns
	// at once on a length mismatch, which would time the token's length.
	want := sha256.Sum256([]byte(g.o.Token))
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		secret, _ := httplimit.Bearer(r)
		got := sha256.Sum256([]byte(secret))
		if subtle.ConstantTimeCompare(got[:], want[:]) != 1 {
			httplimit.CloseIfUnread(w, r)
			w.Header().Set("WWW-Authenticate", `Bearer realm="reckon mcp-gateway"`)
			http.Error(w, `{"error": "missing or wrong bearer token (RECKON_GATEWAY_TOKEN)"}`, http.StatusUnauthorized)
			return
		}
		h.ServeHTTP(w, r)
	})
}

// ServeHTTP serves Handler on ln until ctx ends, then shuts down as Close
// does. One client address holds at most Config.MaxConnsPerClient
// connections; headers must arrive within 10 s.
func (g *Gateway) ServeHTTP(ctx context.Context, ln net.Listener) error {
	ln = httplimit.PerClient(ln, g.o.MaxConnsPerClient)
	hs := &http.Server{Handler: g.Handler(), ReadHeaderTimeout: 10 * time.Second, IdleTimeout: g.o.ConnIdle}
	errc := make(chan error, 1)
	go func() { errc <- hs.Serve(ln) }()
	var err error
	select {
	case err = <-errc:
	case <-ctx.Done():
	}
	// Calls in flight finish first (Close waits for them), then sessions
	// and their streams close, then the listener.
	g.Close()
	sctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	if serr := hs.Shutdown(sctx); serr != nil {
		_ = hs.Close()
	}
	if errors.Is(err, http.ErrServerClosed) {
		err = nil
	}
	return err
}

// enter counts a call in flight; false once the gateway is closing.
func (g *Gateway) enter() bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.closing {
		return false
	}
	g.inflight++
	return true
}

func (g *Gateway) leave() {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.inflight--
	if g.closing && g.inflight == 0 && g.idle != nil {
		close(g.idle)
		g.idle = nil
	}
}

// Close stops the gateway: new calls are refused, calls in flight get
// ShutdownGrace to finish, then every MCP session is closed (a call still
// running is canceled and recorded tool.failed uncertain; its session's run
// ends with run.failed naming it; the others end with run.completed), the
// upstream sessions are closed and the instance is marked stopped. Safe to
// call more than once.
func (g *Gateway) Close() {
	g.mu.Lock()
	if g.closing {
		g.mu.Unlock()
		g.closed.Wait()
		return
	}
	g.closing = true
	g.closed.Add(1)
	defer g.closed.Done()
	var idle chan struct{}
	if g.inflight > 0 {
		idle = make(chan struct{})
		g.idle = idle
	}
	g.mu.Unlock()
	if idle != nil {
		select {
		case <-idle:
		case <-time.After(g.o.ShutdownGrace):
			g.log.Warn().Int64("grace_ms", g.o.ShutdownGrace.Milliseconds()).Msg("mcp gateway: calls still in flight after the shutdown grace are canceled")
			g.haltNow()
			select {
			case <-idle:
			case <-time.After(time.Minute):
				g.log.Error().Msg("mcp gateway: canceled calls did not return")
			}
		}
	}
	g.haltNow()
	g.mu.Lock()
	sessions := make([]*mcp.ServerSession, 0, len(g.sessions))
	for ss := range g.sessions {
		sessions = append(sessions, ss)
	}
	g.mu.Unlock()
	for _, ss := range sessions {
		_ = ss.Close()
	}
	g.watchers.Wait()
	g.closeSpares()
	g.closers.Wait()
	g.stopLease()
	<-g.leaseDone
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := g.st.stopInstance(ctx, g.instance); err != nil {
		g.log.Error().Err(err).Msg("mcp gateway: marking the instance stopped failed; its lease runs out instead")
	}
	g.log.Info().Str("instance", g.instance).Msg("mcp gateway stopped")
}

// leaseLoop renews the instance's lease every Lease/3 and ends the session
// runs of dead instances (at start-up too).
func (g *Gateway) leaseLoop(ctx context.Context) {
	defer close(g.leaseDone)
	g.reap(ctx)
	t := time.NewTicker(g.o.Lease / 3)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if ok, err := g.st.heartbeat(ctx, g.instance); err != nil {
			g.log.Warn().Err(err).Msg("mcp gateway: lease not renewed")
		} else if !ok {
			g.log.Error().Str("instance", g.instance).Msg("mcp gateway: this instance is marked stopped; its lease is not renewed")
		}
		g.reap(ctx)
	}
}

// reap ends the session runs of dead instances with run.failed, so their
// calls without an answer move to the crash window.
func (g *Gateway) reap(ctx context.Context) {
	runs, err := g.st.reap(ctx, g.instance, func(r reaped) (kernel.Event, error) {
		why := fmt.Sprintf("mcp-gateway instance %s stopped renewing its lease at %s (lease %s) with this session open: calls it had sent and not answered are in the crash window",
			r.instance, r.heartbeat.UTC().Format(time.RFC3339), r.lease)
		if r.stopped {
			why = fmt.Sprintf("mcp-gateway instance %s stopped without recording this session's end", r.instance)
		}
		return kernel.NewEvent(r.source, r.project+"/"+r.runID+"/run/failed", r.project, r.runID,
			kernel.TypeRunFailed, Actor, g.o.Now(), kernel.RunFailed{Error: why})
	})
	if err != nil {
		if ctx.Err() == nil {
			g.log.Warn().Err(err).Msg("mcp gateway: ending runs of dead instances failed; next round retries")
		}
		return
	}
	for _, r := range runs {
		g.log.Warn().Str("project", r.project).Str("run_id", r.runID).Str("dead_instance", r.instance).Msg("mcp gateway: ended a dead instance's session run (run.failed)")
	}
}
