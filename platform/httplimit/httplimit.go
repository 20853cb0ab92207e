// Package httplimit holds the bounds every reckon HTTP listener applies to
// its clients: a deadline for a request's body, a cap on the connections
// one client address holds open, the bearer scheme read in any case, and
// the early refusal that does not wait for an unread body. The API and
// the MCP gateway's HTTP listener share them.
package httplimit

import (
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"
)

// BodyDeadline bounds how long a request's body may take to arrive,
// counted from the start of the request: a client that trickles its body
// has its read fail at the deadline instead of holding a connection open
// for as long as it likes. A request without a body needs none, and a
// ResponseWriter without deadlines (a test recorder) simply gets none.
func BodyDeadline(timeout time.Duration, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Body != nil && r.Body != http.NoBody {
			rc := http.NewResponseController(w)
			if rc.SetReadDeadline(time.Now().Add(timeout)) == nil {
				r.Body = &deadlineBody{ReadCloser: r.Body, rc: rc}
			}
		}
		next.ServeHTTP(w, r)
	})
}

// deadlineBody clears the connection's read deadline once the body has
// been read to its end: the deadline bounds the body's arrival, not the
// handler. Left set, it would expire under net/http's background read
// (which watches for the client going away once the body is read) and
// cancel the context of any request that runs longer than the deadline.
type deadlineBody struct {
	io.ReadCloser
	rc      *http.ResponseController
	cleared bool
}

func (b *deadlineBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if err == io.EOF && !b.cleared {
		b.cleared = true
		_ = b.rc.SetReadDeadline(time.Time{})
	}
	return n, err
}

// Bearer returns the token of an "Authorization: Bearer <token>" header.
// The scheme is case-insensitive (RFC 9110 section 11.1): "bearer x" is as
// good as "Bearer x".
func Bearer(r *http.Request) (string, bool) {
	scheme, secret, _ := strings.Cut(strings.TrimSpace(r.Header.Get("Authorization")), " ")
	secret = strings.TrimSpace(secret)
	if !strings.EqualFold(scheme, "Bearer") || secret == "" {
		return "", false
	}
	return secret, true
}

// CloseIfUnread marks the answer to a request whose body the server has
// not read "Connection: close". Call it before writing the answer: without
// it net/http first reads up to 256 KiB of the unread body to keep the
// connection, so a client that stalls its body would wait for the body
// deadline to hear that it was refused.
func CloseIfUnread(w http.ResponseWriter, r *http.Request) {
	if r.Body != nil && r.Body != http.NoBody {
		w.Header().Set("Connection", "close")
	}
}

// PerClient wraps ln so that one client address holds at most max
// connections at once: a connection beyond it is closed as soon as it is
// accepted. max < 1 means no cap. Behind a proxy every client shares the
// proxy's address; set the cap for that.
func PerClient(ln net.Listener, max int) net.Listener {
	if max < 1 {
		return ln
	}
	return &perClient{Listener: ln, max: max, open: map[string]int{}}
}

type perClient struct {
	net.Listener
	max  int
	mu   sync.Mutex
	open map[string]int
}

func (l *perClient) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		host := clientHost(c.RemoteAddr())
		l.mu.Lock()
		full := l.open[host] >= l.max
		if !full {
			l.open[host]++
		}
		l.mu.Unlock()
		if full {
			_ = c.Close()
			continue
		}
		return &countedConn{Conn: c, release: func() { l.release(host) }}, nil
	}
}

func (l *perClient) release(host string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.open[host]--; l.open[host] <= 0 {
		delete(l.open, host)
	}
}

// clientHost is the address's host (its IP for TCP).
func clientHost(a net.Addr) string {
	if host, _, err := net.SplitHostPort(a.String()); err == nil {
		return host
	}
	return a.String()
}

// countedConn releases its client's slot once, on its first Close.
type countedConn struct {
	net.Conn
	once    sync.Once
	release func()
}

func (c *countedConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(c.release)
	return err
}

// Slots bounds what one client holds at once (the API's open event
// streams): Acquire takes one of a key's max slots, or refuses.
type Slots struct {
	max  int
	mu   sync.Mutex
	held map[string]int
}

// NewSlots returns Slots of max per key; max < 1 means no bound.
func NewSlots(max int) *Slots { return &Slots{max: max, held: map[string]int{}} }

// Acquire takes a slot of key; ok is false when key holds max already.
// release gives the slot back (once, whatever the number of calls).
func (s *Slots) Acquire(key string) (release func(), ok bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.max >= 1 && s.held[key] >= s.max {
		return nil, false
	}
	s.held[key]++
	var once sync.Once
	return func() {
		once.Do(func() {
			s.mu.Lock()
			defer s.mu.Unlock()
			if s.held[key]--; s.held[key] <= 0 {
				delete(s.held, key)
			}
		})
	}, true
}

// ClientHost is the host (IP) of the request's client address.
func ClientHost(r *http.Request) string {
	if host, _, err := net.SplitHostPort(r.RemoteAddr); err == nil {
		return host
	}
	return r.RemoteAddr
}
