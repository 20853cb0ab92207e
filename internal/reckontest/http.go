package reckontest

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
)

// Reply is an HTTP response as a test reads it.
type Reply struct {
	Status int
	Header http.Header
	Raw    []byte
	// Body is Raw decoded as a JSON object; nil when it is not one.
	Body map[string]any
}

// Call sends a method request to url with body (none when empty) and,
// unless token is empty, the bearer token, and reads the whole reply. A
// request that gets no response fails the test.
func Call(t testing.TB, method, url, token, body string) Reply {
	t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequestWithContext(t.Context(), method, url, rd)
	if err != nil {
		t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	r := Reply{Status: resp.StatusCode, Header: resp.Header, Raw: raw}
	_ = json.Unmarshal(raw, &r.Body)
	return r
}
