package reckontest

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"testing"
	"time"
)

// IdleConnectionCloses sends requests (raw HTTP/1.1, each asking to keep
// the connection alive) on one connection to addr, checks each is answered
// want without closing it, then waits up to 5 s for the server to close
// the now idle connection: the servers' IdleTimeout tests.
func IdleConnectionCloses(t testing.TB, addr string, want int, requests ...string) {
	t.Helper()
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	br := bufio.NewReader(conn)
	for _, req := range requests {
		if _, err := io.WriteString(conn, req); err != nil {
			t.Fatal(err)
		}
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != want || resp.Close {
			t.Fatalf("%q: %d, close %v; want %d on a kept-alive connection", req, resp.StatusCode, resp.Close, want)
		}
	}
	_ = conn.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := br.ReadByte(); err != io.EOF {
		t.Fatalf("an idle connection is still open after 5 s (read: %v), want it closed after the idle timeout", err)
	}
}
