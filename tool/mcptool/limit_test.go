package mcptool

import (
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// TestLimitResponsesBoundsJSONAnswers: an upstream's JSON answer is read
// up to MaxJSONResponseBytes and then fails with ErrResponseTooLarge (the
// SDK read it whole, so a hostile server's gigabytes sat in memory); an
// answer at the bound and an event stream (bounded per event by the SDK)
// are read as they are. HTTPClient is the client every MCP call and
// lookup over HTTP uses.
func TestLimitResponsesBoundsJSONAnswers(t *testing.T) {
	t.Parallel()
	body := func(n int) string { return `"` + strings.Repeat("x", n-2) + `"` }
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/huge":
			w.Header().Set("Content-Type", "application/json; charset=utf-8")
			_, _ = io.WriteString(w, body(MaxJSONResponseBytes+1))
		case "/exact":
			w.Header().Set("Content-Type", "application/json")
			_, _ = io.WriteString(w, body(MaxJSONResponseBytes))
		case "/stream":
			w.Header().Set("Content-Type", "text/event-stream")
			_, _ = io.WriteString(w, "data: "+body(MaxJSONResponseBytes+10)+"\n\n")
		}
	}))
	defer hs.Close()
	client := HTTPClient(http.Header{})
	read := func(path string) (int, error) {
		resp, err := client.Get(hs.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		return len(b), err
	}
	if n, err := read("/huge"); !errors.Is(err, ErrResponseTooLarge) || n != MaxJSONResponseBytes {
		t.Errorf("huge JSON answer: read %d bytes, %v; want %d bytes and ErrResponseTooLarge", n, err, MaxJSONResponseBytes)
	}
	if n, err := read("/exact"); err != nil || n != MaxJSONResponseBytes {
		t.Errorf("JSON answer at the bound: read %d bytes, %v", n, err)
	}
	if n, err := read("/stream"); err != nil || n <= MaxJSONResponseBytes {
		t.Errorf("event stream: read %d bytes, %v; want it whole", n, err)
	}
}
