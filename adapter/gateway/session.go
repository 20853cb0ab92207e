package gateway

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/seed-7bc021c3/reckon/kernel"
	"github.com/seed-7bc021c3/reckon/tool/mcptool"
)

// session is the gateway's state of one MCP session: its run, its calls
// in flight and its own upstream sessions (one per upstream server, opened
// on first use, as the host would have opened them without the gateway).
type session struct {
	g      *Gateway
	ss     *mcp.ServerSession
	runID  string
	client *mcp.Implementation

	mu       sync.Mutex
	started  bool              // run.started is committed
	open     map[string]string // operations of the session's run in flight: op → tool
	inflight int               // calls in flight, with or without an operation yet
	drained  chan struct{}     // closed when ended and inflight is 0
	ended    bool
	atEnd    map[string]bool // operations in flight when the session ended
	cut      []string        // of those, the ones that did not complete
	ups      map[string]*upstreamConn
	logLevel string // set by the client (logging/setLevel)
}

// upstreamConn is the session's connection to one upstream server.
type upstreamConn struct {
	mu    sync.Mutex
	conn  *mcptool.Conn
	relay *relay
}

// sessionFor returns the state of ss, creating it (and its run id) the
// first time; the session's end is watched from then on. It is nil once
// the gateway is closing and ss has no state yet.
func (g *Gateway) sessionFor(ss *mcp.ServerSession) *session {
	g.mu.Lock()
	defer g.mu.Unlock()
	if s, ok := g.sessions[ss]; ok {
		return s
	}
	if g.closing {
		return nil
	}
	s := &session{g: g, ss: ss, runID: newID("gw"), open: map[string]string{}, ups: map[string]*upstreamConn{}, drained: make(chan struct{})}
	if p := ss.InitializeParams(); p != nil && p.ClientInfo != nil {
		// The client chooses these and they only describe the run: made
		// storable and bounded, so that a NUL or a megabyte in them cannot
		// make run.started unstorable and with it every call refused.
		c := *p.ClientInfo
		s.client = &mcp.Implementation{Name: clientField(c.Name), Version: clientField(c.Version)}
	}
	for _, up := range g.ups {
		s.ups[up.cfg.Name] = &upstreamConn{}
	}
	g.sessions[ss] = s
	g.watchers.Add(1)
	go g.watch(s)
	return s
}

// initialized starts the session's run: run.started when the client has
// initialised. A failure is logged; the first call records the run then.
func (g *Gateway) initialized(ctx context.Context, req *mcp.InitializedRequest) {
	if req == nil || req.Session == nil {
		return
	}
	s := g.sessionFor(req.Session)
	if s == nil {
		return
	}
	ev, err := g.runStartedEvent(s.runID, kindSession, s.client)
	if err == nil {
		err = g.st.startRun(ctx, g.o.Project, s.runID, g.o.Source, g.instance, ev)
	}
	if err != nil {
		g.log.Warn().Err(err).Str("run_id", s.runID).Msg("mcp gateway: recording run.started failed; the first call records it")
		return
	}
	s.mu.Lock()
	s.started = true
	s.mu.Unlock()
	g.log.Info().Str("run_id", s.runID).Str("client", clientName(s.client)).Msg("mcp session started")
}

// clientField is a client-chosen name or version as recorded.
func clientField(v string) string { return kernel.Abbreviate(kernel.Storable(v), 200) }

func clientName(c *mcp.Implementation) string {
	if c == nil {
		return ""
	}
	return strings.TrimSpace(c.Name + " " + c.Version)
}

// watch waits for the session's end, lets its calls finish (their contexts
// are canceled by the end), closes its upstream sessions and records the
// end of its run: run.completed when every call in flight at the end still
// completed, run.failed naming those that did not.
func (g *Gateway) watch(s *session) {
	defer g.watchers.Done()
	_ = s.ss.Wait()
	s.mu.Lock()
	s.ended = true
	s.atEnd = make(map[string]bool, len(s.open))
	for op := range s.open {
		s.atEnd[op] = true
	}
	if s.inflight == 0 {
		close(s.drained)
	}
	s.mu.Unlock()
	select {
	case <-s.drained:
	case <-time.After(g.o.ShutdownGrace + time.Minute):
		// A call that outlives its session by this much is stuck upstream;
		// its operation stays open and the run's end says so below.
		g.log.Error().Str("run_id", s.runID).Msg("mcp gateway: calls of an ended session did not finish")
	}
	// The run's end is recorded before the upstream sessions close: a host
	// that stops a stdio gateway gives it only a few seconds.
	defer func() {
		var conns []*mcptool.Conn
		for _, uc := range s.ups {
			uc.mu.Lock()
			if uc.conn != nil {
				conns = append(conns, uc.conn)
			}
			uc.mu.Unlock()
		}
		closeAll(conns)
		g.mu.Lock()
		delete(g.sessions, s.ss)
		g.mu.Unlock()
	}()

	s.mu.Lock()
	started := s.started
	cut := append([]string(nil), s.cut...)
	for op := range s.open { // still in flight: never finished
		cut = append(cut, op)
	}
	s.mu.Unlock()
	if !started {
		return
	}
	sort.Strings(cut)
	typ, suffix, data := kernel.TypeRunCompleted, "run/completed", any(struct{}{})
	if len(cut) > 0 {
		typ, suffix = kernel.TypeRunFailed, "run/failed"
		data = kernel.RunFailed{Error: fmt.Sprintf("the MCP session ended while %s was in flight; the outcome stays to be reconciled", strings.Join(cut, ", "))}
	}
	ev, err := g.event(s.runID, typ, suffix, data)
	if err == nil {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		_, err = g.st.endRun(ctx, g.o.Project, s.runID, ev)
		cancel()
	}
	if err != nil {
		// The instance's lease ends the run once this process is gone.
		g.log.Error().Err(err).Str("run_id", s.runID).Msg("mcp gateway: recording the run's end failed")
		return
	}
	g.log.Info().Str("run_id", s.runID).Str("end", typ).Msg("mcp session ended")
}

// closeAll closes upstream sessions at once: a stdio server may take its
// TerminateGrace to exit.
func closeAll(conns []*mcptool.Conn) {
	var wg sync.WaitGroup
	for _, c := range conns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c.Close()
		}()
	}
	wg.Wait()
}

// enter counts a call in flight; false when the session has ended.
func (s *session) enter() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ended {
		return false
	}
	s.inflight++
	return true
}

func (s *session) leave() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.inflight--
	if s.ended && s.inflight == 0 {
		close(s.drained)
	}
}

// The bookkeeping below is of the session's own run only: its end names
// the operations it cut, and operation ids are unique only within a run,
// so a call the session made in a client-named run (op-1 of host-7) must
// neither be named by the session run's end nor be mistaken for the
// session run's op-1.

// opened notes an operation of run in flight.
func (s *session) opened(run, op, tool string) {
	if run != s.runID {
		return
	}
	s.mu.Lock()
	s.open[op] = tool
	s.mu.Unlock()
}

// closed notes the end of an operation of run; completed is false when it
// failed or its terminal event could not be written. An operation in
// flight at the session's end that did not complete is cut.
func (s *session) closed(run, op string, completed bool) {
	if run != s.runID {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.open, op)
	if s.atEnd[op] && !completed && !slices.Contains(s.cut, op) {
		s.cut = append(s.cut, op)
	}
}

// cutOp notes an operation of run cut by the gateway's shutdown.
func (s *session) cutOp(run, op string) {
	if run != s.runID {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if !slices.Contains(s.cut, op) {
		s.cut = append(s.cut, op)
	}
}

// conn returns the session's upstream session with server up, opening it
// (or adopting the gateway's discovery session) when there is none or it
// has ended. A failure is mcp_connect_failed with effect none.
func (s *session) conn(ctx context.Context, up *upstream) (*mcptool.Conn, error) {
	uc := s.ups[up.cfg.Name]
	uc.mu.Lock()
	defer uc.mu.Unlock()
	if uc.conn != nil {
		select {
		case <-uc.conn.Done():
			uc.conn.Close()
			uc.conn = nil
		default:
			return uc.conn, nil
		}
	}
	// The discovery session declared no client capabilities: it serves a
	// client that declared none of those the gateway relays.
	if sp := s.g.takeSpare(up.cfg.Name); sp != nil {
		select {
		case <-sp.conn.Done():
			sp.conn.Close()
		default:
			if noCaps(clientCaps(s.ss)) {
				sp.relay.set(s.ss)
				uc.conn, uc.relay = sp.conn, sp.relay
				s.passLevel(ctx, uc.conn, s.level())
				return uc.conn, nil
			}
			s.g.closers.Add(1)
			go func() {
				defer s.g.closers.Done()
				sp.conn.Close()
			}()
		}
	}
	c, r, err := s.g.dial(ctx, up, s.ss)
	if err != nil {
		return nil, err
	}
	uc.conn, uc.relay = c, r
	s.passLevel(ctx, c, s.level())
	return c, nil
}
