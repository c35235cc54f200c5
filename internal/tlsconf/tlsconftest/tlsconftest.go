package tlsconftest

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

	"github.com/sluicehq/sluice/internal/tlsconf"
)

// CA is a certificate authority made for one test.
type CA struct {
	Name string
	Cert *x509.Certificate
	key  *ecdsa.PrivateKey
}

// NewCA makes a CA whose certificate is valid for a day.
func NewCA(t testing.TB, name string) *CA {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber:          serial(t),
		Subject:               pkix.Name{CommonName: name},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(24 * time.Hour),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	return &CA{Name: name, Cert: cert, key: key}
}

func serial(t testing.TB) *big.Int {
	n, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 62))
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// WriteCA writes the CA's certificate as PEM to dir/<name>-ca.pem and
// returns the path.
func (ca *CA) WriteCA(t testing.TB, dir string) string {
	t.Helper()
	p := filepath.Join(dir, ca.Name+"-ca.pem")
	write(t, p, "CERTIFICATE", ca.Cert.Raw)
	return p
}

// Issue writes a certificate for hosts (IP addresses or DNS names), with
// common name cn, and its key to dir/<cn>.pem and dir/<cn>-key.pem, and
// returns the two paths. Writing again to the same paths replaces the
// files, which is how tests rotate a certificate.
func (ca *CA) Issue(t testing.TB, dir, cn string, hosts ...string) (certPath, keyPath string) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial(t),
		Subject:      pkix.Name{CommonName: cn},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
	}
	for _, h := range hosts {
		if ip := net.ParseIP(h); ip != nil {
			tmpl.IPAddresses = append(tmpl.IPAddresses, ip)
		} else {
			tmpl.DNSNames = append(tmpl.DNSNames, h)
		}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.Cert, &key.PublicKey, ca.key)
	if err != nil {
		t.Fatal(err)
	}
	kder, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	certPath = filepath.Join(dir, cn+".pem")
	keyPath = filepath.Join(dir, cn+"-key.pem")
	// The key first: a watcher that sees the new certificate then finds
	// its key (the test helpers' Watch interval is far longer anyway).
	write(t, keyPath, "PRIVATE KEY", kder)
	write(t, certPath, "CERTIFICATE", der)
	return certPath, keyPath
}

// Member writes the CA file and a certificate for the loopback addresses
// (127.0.0.1, ::1, localhost) named cn into dir, and returns the Files a
// member of a test cluster is started with.
func (ca *CA) Member(t testing.TB, dir, cn string) tlsconf.Files {
	t.Helper()
	c, k := ca.Issue(t, dir, cn, "127.0.0.1", "::1", "localhost")
	return tlsconf.Files{CA: ca.WriteCA(t, dir), Cert: c, Key: k}
}

// Source is Member loaded.
func (ca *CA) Source(t testing.TB, dir, cn string) *tlsconf.Source {
	t.Helper()
	s, err := tlsconf.Load(ca.Member(t, dir, cn))
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// write replaces path atomically (a rename), so a reader sees the old file
// or the new one, never half of one.
func write(t testing.TB, path, typ string, der []byte) {
	t.Helper()
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
}
