package main

import (
	"bufio"
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/seed-7bc021c3/reckon/internal/certtest"
	"github.com/seed-7bc021c3/reckon/internal/reckontest"
)

// TestServeAllRoles runs `reckon serve` as a separate process against an
// external Temporal frontend (an embedded server in the test process) and
// the test's schema, then drives it only through the HTTP API: a run with a
// fault after its run_command effect fails uncertain, the operation is
// listed, the scheduled sweep journals a verdict for it, and the listing
// clears.
func TestServeAllRoles(t *testing.T) {
	t.Parallel()
	r := newProcessRig(t, "serve-test")
	ctx, s := r.ctx, r.s

	// Without TEMPORAL_ADDRESS, serve refuses with one line naming it.
	refuse := exec.Command(os.Args[0], "serve")
	refuse.Env = append(os.Environ(), execMainEnv+"=1", "TEMPORAL_ADDRESS=", "DATABASE_URL="+s.URL)
	out, err := refuse.CombinedOutput()
	if err == nil || !strings.Contains(string(out), "TEMPORAL_ADDRESS") {
		t.Fatalf("serve without TEMPORAL_ADDRESS: err=%v out=%s", err, out)
	}

	cmd := exec.CommandContext(ctx, os.Args[0], "serve")
	cmd.Env = r.env(t, "serve-"+s.Name,
		"RECKON_HTTP_ADDR=127.0.0.1:0",
		"RECKON_TOKENS=ops:operator:operator-secret,ro:reader:reader-secret",
		"RECKON_TRIAGE_SCHEDULE=@every 1s",
		"RECKON_LOG_LEVEL=error",
		"KERNEL_FAULT_AFTER_EFFECT=run_command",
		"KERNEL_FAULT_BEFORE_EFFECT=",
		"RECKON_MCP_SERVERS=",
	)
	base := startServe(ctx, t, cmd)

	call := func(method, path, token, body string) (int, map[string]any) {
		r := reckontest.Call(t, method, base+path, token, body)
		return r.Status, r.Body
	}
	// serve --api serves the operator console at / with its policy, and the
	// routes its sign-in and project picker use.
	page, err := http.Get(base + "/")
	if err != nil {
		t.Fatal(err)
	}
	html, _ := io.ReadAll(page.Body)
	page.Body.Close()
	if page.StatusCode != 200 || !strings.Contains(string(html), `src="/console/console.js"`) ||
		!strings.HasPrefix(page.Header.Get("Content-Security-Policy"), "default-src 'none'") {
		t.Fatalf("console at /: %d %v", page.StatusCode, page.Header)
	}
	if code, m := call(http.MethodGet, "/v1/whoami", "reader-secret", ""); code != 200 || m["name"] != "ro" || m["role"] != "reader" {
		t.Fatalf("whoami: %d %v", code, m)
	}
	plan := `{"project":"acme","run_id":"serve-1","plan":{"steps":[{"tool":"run_command","args":{"command":"echo ok > proof.txt"},
		"postcondition":{"path":"proof.txt"}}]}}`
	if code, m := call(http.MethodPost, "/v1/runs", "reader-secret", plan); code != http.StatusForbidden {
		t.Fatalf("reader started a run: %d %v", code, m)
	}
	if code, m := call(http.MethodPost, "/v1/runs", "operator-secret", plan); code != http.StatusCreated {
		t.Fatalf("start run: %d %v", code, m)
	}
	waitFor := func(what string, cond func() bool) {
		t.Helper()
		for !cond() {
			if ctx.Err() != nil {
				t.Fatalf("timed out waiting for %s", what)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	waitFor("the run to fail", func() bool {
		_, m := call(http.MethodGet, "/v1/runs/serve-1?project=acme", "reader-secret", "")
		return m["status"] == "failed"
	})
	// The scheduled sweep settles the uncertain operation; the listing clears.
	waitFor("a supervisor verdict", func() bool {
		_, m := call(http.MethodGet, "/v1/supervisor/verdicts?project=acme", "reader-secret", "")
		v, _ := m["verdicts"].([]any)
		return len(v) == 1
	})
	waitFor("the listing to clear", func() bool {
		_, m := call(http.MethodGet, "/v1/agent/operations?project=acme", "reader-secret", "")
		ops, ok := m["operations"].([]any)
		return ok && len(ops) == 0
	})
	if code, m := call(http.MethodGet, "/v1/projects", "reader-secret", ""); code != 200 || fmt.Sprint(m["projects"]) != "[acme]" {
		t.Fatalf("projects: %d %v", code, m)
	}
	code, m := call(http.MethodGet, "/v1/agent/operations/history?project=acme&run_id=serve-1&operation_id=op-1", "reader-secret", "")
	evs, _ := m["events"].([]any)
	var chain []string
	for _, e := range evs {
		ev := e.(map[string]any)
		chain = append(chain, fmt.Sprintf("%v/%v", ev["type"], ev["actor"]))
	}
	if code != 200 || strings.Join(chain, ",") != "tool.started/kernel,tool.failed/kernel,supervisor.verdict/supervisor,operation.reconciled/supervisor" {
		t.Fatalf("history: %d %v", code, chain)
	}
}

// startServe starts a `reckon serve` process with the API, stops it (an
// interrupt, then a wait) when the test ends, and returns the API's base
// URL as the process announced it on stderr ("api on http(s)://…").
func startServe(ctx context.Context, t *testing.T, cmd *exec.Cmd) string {
	t.Helper()
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Signal(os.Interrupt); _ = cmd.Wait() })
	addrc := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stderr)
		re := regexp.MustCompile(`api on (https?://[0-9.:]+)`)
		for sc.Scan() {
			if m := re.FindStringSubmatch(sc.Text()); m != nil {
				addrc <- m[1]
			}
		}
	}()
	select {
	case base := <-addrc:
		return base
	case <-ctx.Done():
		t.Fatal("serve never announced its API address")
		return ""
	}
}

// TestServeAPIOverTLS runs `reckon serve --api` with RECKON_TLS_CERT_FILE
// and RECKON_TLS_KEY_FILE: a pair that does not load stops start-up with
// one line naming the variables; a good one is served, announced as
// https, and `reckon ops` reaches it with the certificate trusted through
// SSL_CERT_FILE, as docs/security.md says.
func TestServeAPIOverTLS(t *testing.T) {
	t.Parallel()
	r := newProcessRig(t, "serve-tls-test")
	ctx := r.ctx
	certPath, keyPath := certtest.Paths(t)
	good, other := certtest.New(t, 1, "localhost"), certtest.New(t, 2, "localhost")
	env := func(extra ...string) []string {
		return r.env(t, "serve-tls-"+r.s.Name,
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
