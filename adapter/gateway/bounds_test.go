package gateway

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/seed-7bc021c3/reckon/tool/mcptool"
)

// serveBounded serves a gateway of one HTTP issues upstream over HTTP on
// a loopback port, configured by o (its bounds, its token), and returns
// its address.
func serveBounded(t *testing.T, o Config) string {
	t.Helper()
	up := newHTTPIssues(t)
	o.Servers = []mcptool.ServerConfig{up.config("issues")}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	g, err := New(ctx, newSchema(t), o)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	sctx, stop := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- g.ServeHTTP(sctx, ln) }()
	t.Cleanup(func() { stop(); <-done })
	return ln.Addr().String()
}

// TestHTTPTricklingBodiesAreCut: 20 connections that announce a body and
// trickle it a byte at a time are all closed within the body bound, with
// the token or without one; connections beyond the per-client cap are
// closed as soon as they are accepted.
func TestHTTPTricklingBodiesAreCut(t *testing.T) {
	t.Parallel()
	for _, token := range []string{"", "s3cret-token"} {
		addr := serveBounded(t, Config{Token: token, BodyTimeout: time.Second, MaxConnsPerClient: 8})
		auth := ""
		if token != "" {
			auth = "Authorization: bearer " + token + "\r\n" // any case
		}
		start := time.Now()
		var wg sync.WaitGroup
		closedAfter := make([]time.Duration, 20)
		for i := range closedAfter {
			wg.Add(1)
			go func() {
				defer wg.Done()
				closedAfter[i] = trickle(t, addr, auth)
			}()
		}
		wg.Wait()
		for i, d := range closedAfter {
			if d < 0 || d > 6*time.Second {
				t.Errorf("token %q: connection %d still open %v after it began trickling (closed after %v)", token, i, time.Since(start), d)
			}
		}
	}
}

// trickle sends a request whose body never arrives whole, a byte every
// 100 ms, and returns how long the server took to close the connection (or
// -1 if it was still open after 10 s).
func trickle(t *testing.T, addr, auth string) time.Duration {
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Error(err)
		return -1
	}
	defer conn.Close()
	start := time.Now()
	fmt.Fprintf(conn, "POST %s HTTP/1.1\r\nHost: gw\r\n%sContent-Type: application/json\r\nAccept: application/json, text/event-stream\r\nContent-Length: 1000\r\n\r\n", HTTPPath, auth)
	closed := make(chan struct{})
	go func() {
		defer close(closed)
		_ = conn.SetReadDeadline(time.Now().Add(10 * time.Second))
		_, _ = io.Copy(io.Discard, conn)
	}()
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-closed:
			return time.Since(start)
		case <-tick.C:
			if time.Since(start) > 10*time.Second {
				return -1
			}
			if _, err := conn.Write([]byte("{")); err != nil && !errors.Is(err, net.ErrClosed) {
				<-closed
				return time.Since(start)
			}
		}
	}
}

// TestHTTPEarlyRefusal: a wrong token is refused before the body is read,
// at once, with Connection: close, however long the stalled body would
// take; the bearer scheme is accepted in any case.
func TestHTTPEarlyRefusal(t *testing.T) {
	t.Parallel()
	addr := serveBounded(t, Config{Token: "s3cret-token", BodyTimeout: time.Minute})
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	fmt.Fprintf(conn, "POST %s HTTP/1.1\r\nHost: gw\r\nAuthorization: Bearer wrong\r\nContent-Length: 100000\r\n\r\n{", HTTPPath)
	_ = conn.SetReadDeadline(time.Now().Add(5 * time.Second))
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatalf("no answer while the body stalls: %v", err)
	}
	if resp.StatusCode != http.StatusUnauthorized || !resp.Close {
		t.Errorf("wrong token: %d close=%v, want 401 with Connection: close", resp.StatusCode, resp.Close)
	}

	for _, scheme := range []string{"Bearer", "bearer", "BEARER"} {
		hc := &http.Client{Transport: headerTransport{"Authorization", scheme + " s3cret-token"}}
		cs, err := mcp.NewClient(&mcp.Implementation{Name: "x"}, nil).Connect(context.Background(),
			&mcp.StreamableClientTransport{Endpoint: "http://" + addr + HTTPPath, MaxRetries: -1, HTTPClient: hc}, nil)
		if err != nil {
			t.Fatalf("scheme %q refused: %v", scheme, err)
		}
		_ = cs.Close()
	}
}

type headerTransport struct{ name, value string }

func (h headerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set(h.name, h.value)
	return http.DefaultTransport.RoundTrip(r)
}

// TestSourceOfAnAgentIsRefused: the gateway does not start under a source
// an API token writes, nor under one the journal holds from an agent's
// runs (registering it would refuse that agent's writes from then on);
// the error names the variable.
func TestSourceOfAnAgentIsRefused(t *testing.T) {
	t.Parallel()
	up := newHTTPIssues(t)
	pool := newSchema(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if _, err := pool.Exec(ctx, `INSERT INTO agent_runs (project, run_id, source_id) VALUES ('acme', 'r1', 'ag2')`); err != nil {
		t.Fatal(err)
	}
	start := func(source string) error {
		g, err := New(ctx, pool, Config{Servers: []mcptool.ServerConfig{up.config("issues")}, Source: source, TokenSources: []string{"ag1", "ag1-bot"}})
		if err == nil {
			g.Close()
		}
		return err
	}
	for _, source := range []string{"ag1", "ag1-bot", "ag2"} {
		err := start(source)
		if err == nil || !strings.Contains(err.Error(), "RECKON_GATEWAY_SOURCE") || !strings.Contains(err.Error(), `"`+source+`"`) {
			t.Errorf("source %q: %v, want a refusal naming RECKON_GATEWAY_SOURCE and the source", source, err)
		}
	}
	var registered int
	if err := pool.QueryRow(ctx, `SELECT count(*) FROM gateway_instances`).Scan(&registered); err != nil || registered != 0 {
		t.Fatalf("refused starts registered %d instances (%v)", registered, err)
	}
	if err := start("gw-own"); err != nil {
		t.Fatalf("a source of its own: %v", err)
	}
}
