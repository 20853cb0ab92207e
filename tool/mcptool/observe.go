package mcptool

import (
	"bytes"
	"context"
	"io"
	"mime"
	"net/http"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Observer sees every message a server sends, in the order the server sent
// them, as it is read off the wire: before the client hands it on. The SDK
// delivers a response to its caller at once but queues notifications for a
// handler goroutine, so a call's answer can overtake the notifications the
// server sent before it; an observer lets the caller wait for those
// (gateway's relay, TestLogsDuringACallReachTheClient).
type Observer func(jsonrpc.Message)

// observed wraps a stdio transport so that its connection's reads pass
// obs. Only transports whose connections the SDK does not inspect for
// more than Connection may be wrapped (stdio's); a streamable HTTP
// connection is observed at its HTTP bodies instead (observeSSE).
type observed struct {
	mcp.Transport
	obs Observer
}

func (t observed) Connect(ctx context.Context) (mcp.Connection, error) {
	c, err := t.Transport.Connect(ctx)
	if err != nil {
		return nil, err
	}
	return observedConn{Connection: c, obs: t.obs}, nil
}

type observedConn struct {
	mcp.Connection
	obs Observer
}

func (c observedConn) Read(ctx context.Context) (jsonrpc.Message, error) {
	m, err := c.Connection.Read(ctx)
	if err == nil {
		c.obs(m)
	}
	return m, err
}

// observeSSE makes the event streams (text/event-stream bodies) that rt
// answers pass each of their messages to obs as the client reads them.
func observeSSE(rt http.RoundTripper, obs Observer) http.RoundTripper {
	return sseRT{base: rt, obs: obs}
}

type sseRT struct {
	base http.RoundTripper
	obs  Observer
}

func (t sseRT) RoundTrip(r *http.Request) (*http.Response, error) {
	resp, err := t.base.RoundTrip(r)
	if err != nil {
		return resp, err
	}
	if mt, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type")); mt == "text/event-stream" {
		resp.Body = &sseBody{rc: resp.Body, obs: t.obs}
	}
	return resp, nil
}

// maxObservedEvent bounds the bytes an event may hold and still be
// observed (the client's own limits apply to what it reads).
const maxObservedEvent = 8 << 20

// sseBody passes its bytes through unchanged and gives obs each event's
// data that decodes as a JSON-RPC message.
type sseBody struct {
	rc   io.ReadCloser
	obs  Observer
	line []byte
	data []byte
	over bool // the event is too large to observe
}

func (b *sseBody) Read(p []byte) (int, error) {
	n, err := b.rc.Read(p)
	for _, c := range p[:n] {
		if c != '\n' {
			if len(b.line) < maxObservedEvent {
				b.line = append(b.line, c)
			} else {
				b.over = true
			}
			continue
		}
		b.endLine()
	}
	return n, err
}

// endLine handles one line of the stream (its "\r" trimmed): data lines
// accumulate, a blank line ends the event.
func (b *sseBody) endLine() {
	line := bytes.TrimSuffix(b.line, []byte("\r"))
	b.line = b.line[:0]
	switch {
	case len(line) == 0:
		if len(b.data) > 0 && !b.over {
			if m, err := jsonrpc.DecodeMessage(b.data); err == nil {
				b.obs(m)
			}
		}
		b.data, b.over = b.data[:0], false
	case bytes.HasPrefix(line, []byte("data:")):
		d := bytes.TrimPrefix(bytes.TrimPrefix(line, []byte("data:")), []byte(" "))
		if len(b.data) > 0 {
			b.data = append(b.data, '\n')
		}
		if len(b.data)+len(d) > maxObservedEvent {
			b.over = true
			return
		}
		b.data = append(b.data, d...)
	}
}

func (b *sseBody) Close() error { return b.rc.Close() }
