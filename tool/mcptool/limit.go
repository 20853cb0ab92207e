package mcptool

import (
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
)

// MaxJSONResponseBytes bounds an MCP server's JSON answer over streamable
// HTTP. The SDK reads such an answer whole (it bounds server-sent events
// at 16 MiB each, not JSON bodies), so an upstream that answered a call
// with gigabytes held them all in the worker's, the gateway's or the
// probe's memory. The bound is the SDK's own for one event: an answer
// sent either way has the same room.
const MaxJSONResponseBytes = 16 << 20

// ErrResponseTooLarge is the read error of a JSON answer past
// MaxJSONResponseBytes. A call whose answer it cut was sent, so it fails
// as any call whose answer was lost does (effect uncertain).
var ErrResponseTooLarge = errors.New("mcp server's JSON answer exceeds the size reckon reads")

// LimitResponses wraps base (nil: http.DefaultTransport) so that the body
// of every application/json answer fails with ErrResponseTooLarge past
// MaxJSONResponseBytes instead of being read on.
func LimitResponses(base http.RoundTripper) http.RoundTripper {
	if base == nil {
		base = http.DefaultTransport
	}
	return limitRT{base: base}
}

type limitRT struct{ base http.RoundTripper }

func (t limitRT) RoundTrip(r *http.Request) (*http.Response, error) {
	resp, err := t.base.RoundTrip(r)
	if err != nil {
		return resp, err
	}
	if mt, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type")); mt == "application/json" {
		resp.Body = &limitedBody{rc: resp.Body, left: MaxJSONResponseBytes, host: r.URL.Host}
	}
	return resp, nil
}

// limitedBody reads at most left bytes of rc, then fails.
type limitedBody struct {
	rc   io.ReadCloser
	left int64
	host string
}

func (b *limitedBody) Read(p []byte) (int, error) {
	if b.left <= 0 {
		// One byte more tells an answer of exactly the bound from a
		// longer one.
		var one [1]byte
		if n, _ := b.rc.Read(one[:]); n == 0 {
			return 0, io.EOF
		}
		return 0, fmt.Errorf("%w (%s: more than %d bytes)", ErrResponseTooLarge, b.host, MaxJSONResponseBytes)
	}
	if int64(len(p)) > b.left {
		p = p[:b.left]
	}
	n, err := b.rc.Read(p)
	b.left -= int64(n)
	return n, err
}

func (b *limitedBody) Close() error { return b.rc.Close() }
