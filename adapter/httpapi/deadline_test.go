package httpapi_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/seed-7bc021c3/reckon/adapter/httpapi"
)

// TestBodyDeadlineSparesHandler: the body deadline bounds the body's
// arrival only. A handler that has read its body (or got none) and then
// works longer than BodyTimeout keeps its context.
func TestBodyDeadlineSparesHandler(t *testing.T) {
	t.Parallel()
	for _, body := range []string{"", `{"a":1}`} {
		got := make(chan error, 1)
		api := httpapi.New(httpapi.Config{Log: zerolog.Nop(), BodyTimeout: 100 * time.Millisecond,
			Console: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				_, _ = io.Copy(io.Discard, r.Body)
				select {
				case <-r.Context().Done():
					got <- r.Context().Err()
				case <-time.After(500 * time.Millisecond):
					got <- nil
				}
			})})
		ts := httptest.NewServer(api)
		resp, err := http.Post(ts.URL+"/", "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		_ = resp.Body.Close()
		if err := <-got; err != nil {
			t.Errorf("body %q: the handler's context ended after the body deadline: %v", body, err)
		}
		ts.Close()
	}
}
