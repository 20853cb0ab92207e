package certfile_test

import (
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/seed-7bc021c3/reckon/internal/certtest"
	"github.com/seed-7bc021c3/reckon/internal/reckontest"
	"github.com/seed-7bc021c3/reckon/platform/certfile"
)

// served is the serial of the certificate the pair hands a handshake.
func served(t *testing.T, p *certfile.Pair) int64 {
	t.Helper()
	c, err := p.GetCertificate(nil)
	if err != nil {
		t.Fatal(err)
	}
	return c.Leaf.SerialNumber.Int64()
}

func TestRotationIsServedFromTheNextCheck(t *testing.T) {
	t.Parallel()
	certPath, keyPath := certtest.Paths(t)
	a, b := certtest.New(t, 1, "localhost"), certtest.New(t, 2, "localhost")
	a.Write(t, certPath, keyPath)
	clk := reckontest.NewClock(time.Unix(1_700_000_000, 0))
	var mu sync.Mutex
	var reloads []error
	p, err := certfile.Load(certPath, keyPath, certfile.Options{Now: clk.Now, OnReload: func(err error) {
		mu.Lock()
		defer mu.Unlock()
		reloads = append(reloads, err)
	}})
	if err != nil {
		t.Fatal(err)
	}
	if got := served(t, p); got != 1 {
		t.Fatalf("serial %d served, want 1", got)
	}

	// Rewritten in place: the same inode and, on a coarse file clock,
	// perhaps the same modification time; the bytes tell.
	b.Write(t, certPath, keyPath)
	clk.Advance(certfile.CheckInterval / 2)
	if got := served(t, p); got != 1 {
		t.Fatalf("serial %d served before the check interval passed, want 1", got)
	}
	clk.Advance(certfile.CheckInterval)
	if got := served(t, p); got != 2 {
		t.Fatalf("serial %d served after the rotation, want 2", got)
	}

	// Half a rotation: a new certificate beside the old key. The pair in
	// service stays, and the failure is told once, not at every check.
	c := certtest.New(t, 3, "localhost")
	if err := os.WriteFile(certPath, c.CertPEM, 0o600); err != nil {
		t.Fatal(err)
	}
	for range 3 {
		clk.Advance(certfile.CheckInterval)
		if got := served(t, p); got != 2 {
			t.Fatalf("serial %d served with a mismatched pair on disk, want the pair in service (2)", got)
		}
	}
	// The key follows: the new pair goes into service.
	if err := os.WriteFile(keyPath, c.KeyPEM, 0o600); err != nil {
		t.Fatal(err)
	}
	clk.Advance(certfile.CheckInterval)
	if got := served(t, p); got != 3 {
		t.Fatalf("serial %d served once the key followed, want 3", got)
	}

	// A missing file keeps the pair too.
	if err := os.Remove(keyPath); err != nil {
		t.Fatal(err)
	}
	clk.Advance(certfile.CheckInterval)
	if got := served(t, p); got != 3 {
		t.Fatalf("serial %d served with the key gone, want 3", got)
	}

	mu.Lock()
	defer mu.Unlock()
	if len(reloads) != 4 {
		t.Fatalf("reloads told %v, want 4: in service, mismatch (once), in service, key missing", reloads)
	}
	if reloads[0] != nil || reloads[2] != nil {
		t.Errorf("successful reloads told %v and %v, want nil", reloads[0], reloads[2])
	}
	if reloads[1] == nil || !strings.Contains(reloads[1].Error(), "pair in service is kept") || !strings.Contains(reloads[1].Error(), "private key does not match") {
		t.Errorf("mismatched pair told %v", reloads[1])
	}
	if reloads[3] == nil || !strings.Contains(reloads[3].Error(), "TLS key") {
		t.Errorf("missing key told %v", reloads[3])
	}
}

func TestLoadRefusesWhatItCannotServe(t *testing.T) {
	t.Parallel()
	certPath, keyPath := certtest.Paths(t)
	if _, err := certfile.Load(certPath, keyPath, certfile.Options{}); err == nil || !strings.Contains(err.Error(), "TLS certificate") {
		t.Errorf("missing files: %v", err)
	}
	a, b := certtest.New(t, 1, "localhost"), certtest.New(t, 2, "localhost")
	if err := os.WriteFile(certPath, a.CertPEM, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(keyPath, b.KeyPEM, 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := certfile.Load(certPath, keyPath, certfile.Options{}); err == nil || !strings.Contains(err.Error(), certPath) {
		t.Errorf("mismatched pair: %v, want an error naming %s", err, certPath)
	}
	if err := os.WriteFile(keyPath, []byte("not a key"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := certfile.Load(certPath, keyPath, certfile.Options{}); err == nil {
		t.Error("a key file that holds no key was loaded")
	}
}

func TestTLSConfigRefusesOldProtocols(t *testing.T) {
	t.Parallel()
	certPath, keyPath := certtest.Paths(t)
	certtest.New(t, 1, "localhost").Write(t, certPath, keyPath)
	p, err := certfile.Load(certPath, keyPath, certfile.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if v := p.TLSConfig().MinVersion; v < 0x0303 {
		t.Errorf("MinVersion %#x, want TLS 1.2 (0x0303) at least", v)
	}
}

// An expired certificate still loads (the server says what it has; the
// client refuses it), and the leaf is parsed for the logs.
func TestLeafIsParsed(t *testing.T) {
	t.Parallel()
	certPath, keyPath := certtest.Paths(t)
	certtest.NewValid(t, 9, "old", time.Now().Add(-48*time.Hour), time.Now().Add(-24*time.Hour)).Write(t, certPath, keyPath)
	p, err := certfile.Load(certPath, keyPath, certfile.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if p.Leaf().Subject.CommonName != "old" || p.Leaf().SerialNumber.Int64() != 9 {
		t.Errorf("leaf %v", p.Leaf().Subject)
	}
}
