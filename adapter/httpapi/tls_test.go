package httpapi_test

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"github.com/seed-7bc021c3/reckon/adapter/httpapi"
	"github.com/seed-7bc021c3/reckon/internal/certtest"
	"github.com/seed-7bc021c3/reckon/internal/reckontest"
	"github.com/seed-7bc021c3/reckon/platform/certfile"
)

// TestListenServesTLS: with RECKON_TLS_CERT_FILE and RECKON_TLS_KEY_FILE
// the API answers HTTPS only, with the pair in the files, and serves a
// replaced pair from the next connection on without a restart.
func TestListenServesTLS(t *testing.T) {
	t.Parallel()
	certPath, keyPath := certtest.Paths(t)
	first, second := certtest.New(t, 1, "localhost"), certtest.New(t, 2, "localhost")
	first.Write(t, certPath, keyPath)
	clk := reckontest.NewClock(time.Unix(1_700_000_000, 0))
	pair, err := certfile.Load(certPath, keyPath, certfile.Options{Now: clk.Now})
	if err != nil {
		t.Fatal(err)
	}
	api := hostileAPI(t, httpapi.Config{TLS: pair.TLSConfig()})
	if api.Scheme() != "https" {
		t.Errorf("scheme %q, want https", api.Scheme())
	}
	addr := listen(t, api)

	// A new connection per request, so that each handshake picks the pair.
	client := func(trust certtest.Cert) *http.Client {
		return &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{
			TLSClientConfig:   &tls.Config{RootCAs: trust.Pool(), ServerName: "localhost"},
			DisableKeepAlives: true,
		}}
	}
	get := func(c *http.Client, url string) (*http.Response, string) {
		t.Helper()
		resp, err := c.Get(url)
		if err != nil {
			t.Fatalf("GET %s: %v", url, err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp, string(b)
	}

	resp, _ := get(client(first), "https://"+addr+"/healthz")
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /healthz over TLS: %s", resp.Status)
	}
	if s := resp.TLS.PeerCertificates[0].SerialNumber.Int64(); s != 1 {
		t.Errorf("served certificate %d, want 1", s)
	}
	if v := resp.TLS.Version; v < tls.VersionTLS12 {
		t.Errorf("TLS version %#x", v)
	}

	// Plain HTTP on the TLS port gets no answer of the API's: net/http
	// says the port speaks HTTPS, and nothing is served.
	resp, body := get(&http.Client{Timeout: 10 * time.Second}, "http://"+addr+"/healthz")
	if resp.StatusCode != http.StatusBadRequest || !strings.Contains(body, "HTTPS") {
		t.Errorf("plain HTTP on the TLS port: %s %q, want 400 naming HTTPS", resp.Status, body)
	}

	// TLS 1.1 is refused.
	old := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{
		TLSClientConfig: &tls.Config{RootCAs: first.Pool(), ServerName: "localhost", MaxVersion: tls.VersionTLS11},
	}}
	if _, err := old.Get("https://" + addr + "/healthz"); err == nil {
		t.Error("a TLS 1.1 client was served")
	}

	// The files are replaced (a rotation); past the check interval the next
	// connection gets the new certificate, which a client trusting only the
	// new one accepts.
	second.Write(t, certPath, keyPath)
	clk.Advance(certfile.CheckInterval)
	resp, _ = get(client(second), "https://"+addr+"/healthz")
	if s := resp.TLS.PeerCertificates[0].SerialNumber.Int64(); s != 2 {
		t.Errorf("served certificate %d after the rotation, want 2", s)
	}
	if _, err := client(first).Get("https://" + addr + "/healthz"); err == nil {
		t.Error("a client trusting only the old certificate was still served after the rotation")
	}
}

// TestPlainHTTPWithoutTLS: without a TLS configuration the scheme is http.
func TestPlainHTTPWithoutTLS(t *testing.T) {
	t.Parallel()
	if s := hostileAPI(t, httpapi.Config{}).Scheme(); s != "http" {
		t.Errorf("scheme %q, want http", s)
	}
}

// TestServerLogLevels: net/http's own lines reach the API's log, a
// handler's panic (which net/http recovers and logs with its stack) at
// error level, so that it is not filed beside routine warnings, and a
// failed TLS handshake at debug.
func TestServerLogLevels(t *testing.T) {
	t.Parallel()
	var logs reckontest.Buffer
	certPath, keyPath := certtest.Paths(t)
	cert := certtest.New(t, 1, "localhost")
	cert.Write(t, certPath, keyPath)
	pair, err := certfile.Load(certPath, keyPath, certfile.Options{})
	if err != nil {
		t.Fatal(err)
	}
	api := hostileAPI(t, httpapi.Config{
		Log: zerolog.New(&logs).Level(zerolog.DebugLevel), TLS: pair.TLSConfig(),
		Health: func(context.Context) error { panic("health check exploded") },
	})
	addr := listen(t, api)
	// Plain HTTP on the TLS port: a failed handshake.
	if resp, err := (&http.Client{Timeout: 10 * time.Second}).Get("http://" + addr + "/healthz"); err == nil {
		resp.Body.Close()
	}
	trusting := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{
		TLSClientConfig: &tls.Config{RootCAs: cert.Pool(), ServerName: "localhost"},
	}}
	if _, err := trusting.Get("https://" + addr + "/healthz"); err == nil {
		t.Error("a panicking handler answered")
	}
	levels := map[string]string{}
	deadline := time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) && (levels["panic"] == "" || levels["handshake"] == "") {
		for _, l := range logs.Lines() {
			var m map[string]any
			if json.Unmarshal([]byte(l), &m) != nil {
				continue
			}
			msg, _ := m["message"].(string)
			switch {
			case strings.HasPrefix(msg, "http: panic serving"):
				levels["panic"], _ = m["level"].(string)
			case strings.Contains(msg, "TLS handshake error"):
				levels["handshake"], _ = m["level"].(string)
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	if levels["panic"] != "error" || levels["handshake"] != "debug" {
		t.Errorf("levels %v, want the panic at error and the handshake at debug; log: %v", levels, logs.Lines())
	}
}
