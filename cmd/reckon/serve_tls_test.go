package main

import (
	"context"
	"crypto/tls"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/seed-7bc021c3/reckon/internal/certtest"
	"github.com/seed-7bc021c3/reckon/internal/pgtest"
	"github.com/seed-7bc021c3/reckon/internal/sandboxtest"
)

// TestServeAPIOverTLS runs `reckon serve --api` with RECKON_TLS_CERT_FILE
// and RECKON_TLS_KEY_FILE: a pair that does not load stops start-up with
// one line naming the variables; a good one is served, announced as
// https, and `reckon ops` reaches it with the certificate trusted through
// SSL_CERT_FILE, as docs/security.md says.
func TestServeAPIOverTLS(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	conn := connectTemporal(ctx, t, "serve-tls-test")
	s := pgtest.New(t)
	certPath, keyPath := certtest.Paths(t)
	good, other := certtest.New(t, 1, "localhost"), certtest.New(t, 2, "localhost")
	env := func(extra ...string) []string {
		return reckonEnv(s.URL, conn, "serve-tls-test", "serve-tls-"+s.Name, sandboxtest.Dir(t),
			append([]string{
				"RECKON_HTTP_ADDR=127.0.0.1:0",
				"RECKON_TOKENS=ops:operator:operator-secret",
				"RECKON_TLS_CERT_FILE=" + certPath,
				"RECKON_TLS_KEY_FILE=" + keyPath,
				"RECKON_LOG_LEVEL=info",
			}, extra...)...)
	}

	// The certificate of one pair with the key of another: refused at
	// start-up, before anything is served.
	if err := os.WriteFile(certPath, good.CertPEM, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(keyPath, other.KeyPEM, 0o600); err != nil {
		t.Fatal(err)
	}
	bad := exec.CommandContext(ctx, os.Args[0], "serve", "--api")
	bad.Env = env()
	out, err := bad.CombinedOutput()
	if err == nil || !strings.Contains(string(out), "RECKON_TLS_CERT_FILE") || !strings.Contains(string(out), "private key does not match") {
		t.Fatalf("serve with a mismatched pair: err=%v out=%s", err, out)
	}

	good.Write(t, certPath, keyPath)
	cmd := exec.CommandContext(ctx, os.Args[0], "serve", "--api")
	cmd.Env = env()
	base := startServe(ctx, t, cmd)
	if !strings.HasPrefix(base, "https://") {
		t.Fatalf("serve announced %s, want an https address", base)
	}

	client := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{
		TLSClientConfig: &tls.Config{RootCAs: good.Pool()},
	}}
	resp, err := client.Get(base + "/healthz")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /healthz over TLS: %s", resp.Status)
	}

	// The CLI, a process of its own, trusts the certificate through Go's
	// SSL_CERT_FILE; without it the certificate is unknown and the call
	// fails.
	ops := func(extra ...string) (string, error) {
		c := exec.CommandContext(ctx, os.Args[0], "ops", "list", "--project", "acme")
		c.Env = append(append(os.Environ(), execMainEnv+"=1", "RECKON_URL="+base, "RECKON_TOKEN=operator-secret"), extra...)
		out, err := c.CombinedOutput()
		return string(out), err
	}
	if out, err := ops("SSL_CERT_FILE=" + certPath); err != nil {
		t.Fatalf("reckon ops over TLS with SSL_CERT_FILE: %v\n%s", err, out)
	}
	if out, err := ops("SSL_CERT_FILE=" + filepath.Join(filepath.Dir(certPath), "none.pem")); err == nil || !strings.Contains(out, "certificate") {
		t.Errorf("reckon ops trusting nothing: err=%v out=%s, want a certificate error", err, out)
	}
}
