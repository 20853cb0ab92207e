// Package certfile serves a TLS certificate and key from files that may be
// replaced while the process runs.
//
// Certificates are rotated by writing new files over the old ones
// (cert-manager, certbot, a secret mounted into a container): a server
// that read its pair once at start-up would serve the old certificate
// until it expired and then refuse every client. A Pair reads the two
// files again at most once every CheckInterval, from a TLS handshake, and
// puts them in service when their bytes changed (not their times: a
// rewrite within one tick of a coarse file clock keeps its modification
// time). A pair that does not load (one file new and the other not yet, a
// mismatched key, a file half written) leaves the last good pair in
// service until the next check: a rotation never takes the API down.
package certfile

import (
	"bytes"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"os"
	"sync"
	"time"
)

// CheckInterval is the least time between two looks at the files.
const CheckInterval = time.Second

// Pair is a certificate and its key, read from two files and read again
// when they change.
type Pair struct {
	certFile, keyFile string
	now               func() time.Time
	onReload          func(error)

	mu      sync.Mutex
	cert    *tls.Certificate
	certPEM []byte   // the files' bytes the serving pair was read from
	keyPEM  []byte   //
	failed  [32]byte // digest of the files' bytes that last failed to load
	checked time.Time
}

// Options are a Pair's optional settings.
type Options struct {
	// Now is the clock the check interval is measured on; nil is time.Now.
	Now func() time.Time
	// OnReload, when set, is told of each reload: nil after a new pair
	// went into service, the error when changed files did not load (once
	// per change of the files).
	OnReload func(error)
}

// Load reads the pair from certFile and keyFile (PEM, as
// tls.LoadX509KeyPair reads them). An error here names the file at fault
// when it can: a server must not start on a pair it cannot serve.
func Load(certFile, keyFile string, o Options) (*Pair, error) {
	p := &Pair{certFile: certFile, keyFile: keyFile, now: o.Now, onReload: o.OnReload}
	if p.now == nil {
		p.now = time.Now
	}
	c, k, err := p.read()
	if err != nil {
		return nil, err
	}
	cert, err := parse(c, k)
	if err != nil {
		return nil, fmt.Errorf("TLS certificate %s and key %s: %w", certFile, keyFile, err)
	}
	p.cert, p.certPEM, p.keyPEM, p.checked = cert, c, k, p.now()
	return p, nil
}

// TLSConfig is a server configuration serving the pair: TLS 1.2 at least,
// the certificate chosen per handshake so that a replaced pair is served
// from the next connection on.
func (p *Pair) TLSConfig() *tls.Config {
	return &tls.Config{MinVersion: tls.VersionTLS12, GetCertificate: p.GetCertificate}
}

// GetCertificate returns the pair in service, having first loaded the
// files again if they changed since the last check (at most one check
// every CheckInterval).
func (p *Pair) GetCertificate(*tls.ClientHelloInfo) (*tls.Certificate, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if now := p.now(); now.Sub(p.checked) >= CheckInterval {
		p.checked = now
		p.reload()
	}
	return p.cert, nil
}

// Leaf is the certificate in service (parsed), for logs and tests.
func (p *Pair) Leaf() *x509.Certificate {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.cert.Leaf
}

// reload reads the files again and serves them when their bytes changed
// and load; p.mu is held.
func (p *Pair) reload() {
	c, k, err := p.read()
	if err == nil && bytes.Equal(c, p.certPEM) && bytes.Equal(k, p.keyPEM) {
		return
	}
	if err == nil {
		var cert *tls.Certificate
		if cert, err = parse(c, k); err == nil {
			p.cert, p.certPEM, p.keyPEM, p.failed = cert, c, k, [32]byte{}
			if p.onReload != nil {
				p.onReload(nil)
			}
			return
		}
	}
	// Told once per content of the files, not at every check while a
	// rotation is half done or a file stays missing.
	h := sha256.New()
	h.Write(c)
	h.Write([]byte{0})
	h.Write(k)
	if err != nil {
		h.Write([]byte(err.Error()))
	}
	var d [32]byte
	copy(d[:], h.Sum(nil))
	if d != p.failed {
		p.failed = d
		if p.onReload != nil {
			p.onReload(fmt.Errorf("TLS certificate %s and key %s not reloaded, the pair in service is kept: %w", p.certFile, p.keyFile, err))
		}
	}
}

// read reads both files.
func (p *Pair) read() (certPEM, keyPEM []byte, err error) {
	if certPEM, err = os.ReadFile(p.certFile); err != nil {
		return nil, nil, fmt.Errorf("TLS certificate: %w", err)
	}
	if keyPEM, err = os.ReadFile(p.keyFile); err != nil {
		return nil, nil, fmt.Errorf("TLS key: %w", err)
	}
	return certPEM, keyPEM, nil
}

// parse parses the pair, with its leaf certificate parsed.
func parse(certPEM, keyPEM []byte) (*tls.Certificate, error) {
	cert, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		return nil, err
	}
	// Go fills Leaf itself unless GODEBUG=x509keypairleaf=0 says not to;
	// Leaf is what the start-up log and Pair.Leaf read.
	if cert.Leaf == nil {
		if len(cert.Certificate) == 0 {
			return nil, errors.New("no certificate")
		}
		if cert.Leaf, err = x509.ParseCertificate(cert.Certificate[0]); err != nil {
			return nil, err
		}
	}
	return &cert, nil
}
