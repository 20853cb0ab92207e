package httpapi_test

import (
	"crypto/tls"
	"io"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/seed-7bc021c3/reckon/internal/reckontest"
	"github.com/seed-7bc021c3/reckon/kernel/certfile"
	"github.com/seed-7bc021c3/reckon/kernel/certfile/certtest"
	"github.com/seed-7bc021c3/reckon/kernel/httpapi"
)

// TestListenServesTLS: with RECKON_TLS_CERT_FILE and RECKON_TLS_KEY_FILE
// the API answers HTTPS only, with the pair in the files, and serves a
// replaced pair from the next connection on without a restart.
func TestListenServesTLS(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	certPath, keyPath := filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key")
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
