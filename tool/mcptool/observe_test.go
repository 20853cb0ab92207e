package mcptool

import (
	"io"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
)

// oneByte reads one byte at a time, as a slow stream arrives.
type oneByte struct{ r io.Reader }

func (o oneByte) Read(p []byte) (int, error) { return o.r.Read(p[:1]) }

// TestSSEBodyObservesEachMessage: an event stream's messages reach the
// observer in order, however the bytes arrive, with CRLF line ends and
// data split over lines; comments, other fields and undecodable data are
// passed over; the bytes read are the stream's, unchanged.
func TestSSEBodyObservesEachMessage(t *testing.T) {
	t.Parallel()
	stream := ": keep-alive\r\n\r\n" +
		"event: message\r\nid: 1\r\ndata: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/message\",\r\ndata: \"params\":{\"level\":\"info\",\"data\":\"x\"}}\r\n\r\n" +
		"data: not json\n\n" +
		"data: {\"jsonrpc\":\"2.0\",\"id\":7,\"result\":{}}\n\n"
	var got []string
	body := &sseBody{rc: io.NopCloser(oneByte{strings.NewReader(stream)}), obs: func(m jsonrpc.Message) {
		switch m := m.(type) {
		case *jsonrpc.Request:
			got = append(got, "request "+m.Method)
		case *jsonrpc.Response:
			got = append(got, "response")
		}
	}}
	read, err := io.ReadAll(body)
	if err != nil || string(read) != stream {
		t.Fatalf("the body changed what it passed on (%v)", err)
	}
	if strings.Join(got, ", ") != "request notifications/message, response" {
		t.Fatalf("observed %q", got)
	}
}
