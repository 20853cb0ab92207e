// Package certtest makes self-signed TLS server certificates for tests.
package certtest

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// Cert is a self-signed server certificate for its host and 127.0.0.1,
// and its key, both PEM.
type Cert struct {
	CertPEM, KeyPEM []byte
	Leaf            *x509.Certificate
}

// New makes a certificate with serial for host (a DNS name).
func New(t testing.TB, serial int64, host string) Cert {
	t.Helper()
	return NewValid(t, serial, host, time.Now().Add(-time.Hour), time.Now().Add(time.Hour))
}

// NewValid is New valid from notBefore to notAfter (an expired one, say).
func NewValid(t testing.TB, serial int64, host string, notBefore, notAfter time.Time) Cert {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(serial),
		Subject:      pkix.Name{CommonName: host},
		DNSNames:     []string{host},
		IPAddresses:  []net.IP{net.IPv4(127, 0, 0, 1)},
		NotBefore:    notBefore,
		NotAfter:     notAfter,
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	leaf, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	kder, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	return Cert{
		CertPEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		KeyPEM:  pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kder}),
		Leaf:    leaf,
	}
}

// Paths names a certificate file and a key file in a directory of the
// test's own (nothing written yet).
func Paths(t testing.TB) (certFile, keyFile string) {
	t.Helper()
	dir := t.TempDir()
	return filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key")
}

// Write writes the certificate and the key to their files (over whatever
// they held, in place).
func (c Cert) Write(t testing.TB, certFile, keyFile string) {
	t.Helper()
	if err := os.WriteFile(certFile, c.CertPEM, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(keyFile, c.KeyPEM, 0o600); err != nil {
		t.Fatal(err)
	}
}

// Pool is a certificate pool trusting c alone.
func (c Cert) Pool() *x509.CertPool {
	p := x509.NewCertPool()
	p.AddCert(c.Leaf)
	return p
}
