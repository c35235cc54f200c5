package tlsconf

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// DefaultWatchInterval is how often Watch looks at the files when its
// caller passes no interval.
const DefaultWatchInterval = 10 * time.Second

// Files names the PEM files of one process.
type Files struct {
	// CA is the bundle of CA certificates peers are verified against:
	// servers by clients, members' client certificates by servers.
	CA string
	// Cert and Key are this process's certificate chain and private key:
	// both or neither. A server needs them; a client presents them when
	// the server asks for a client certificate.
	Cert, Key string
}

// Enabled reports whether any file is named, that is whether the process
// was asked to use TLS.
func (f Files) Enabled() bool { return f.CA != "" || f.Cert != "" || f.Key != "" }

// Source holds the TLS material read from Files last and builds the
// *tls.Config values that use it. It is safe for concurrent use.
type Source struct {
	files Files
	mu    sync.Mutex // serializes Reload
	cur   atomic.Pointer[material]
}

// material is one reading of the files; it never changes once stored.
type material struct {
	roots  *x509.CertPool
	cert   *tls.Certificate // nil without Files.Cert
	stamps []stamp
}

// stamp is what Watch compares to notice that a file changed.
type stamp struct {
	mod  time.Time
	size int64
}

// Load reads files.
//
// # Errors
//
// No CA file, a certificate without its key (or the reverse), a file that
// cannot be read, a CA file with no certificate, or a key that does not
// match its certificate.
func Load(files Files) (*Source, error) {
	if files.CA == "" {
		return nil, errors.New("tls: no CA file: pass --tls-ca with the PEM bundle of the CA that signed the cluster's certificates")
	}
	if (files.Cert == "") != (files.Key == "") {
		return nil, errors.New("tls: --tls-cert and --tls-key go together: pass both or neither")
	}
	m, err := read(files)
	if err != nil {
		return nil, err
	}
	s := &Source{files: files}
	s.cur.Store(m)
	return s, nil
}

func (s *Source) paths() []string {
	if s.files.Cert == "" {
		return []string{s.files.CA}
	}
	return []string{s.files.CA, s.files.Cert, s.files.Key}
}

// read stats the files before reading them, so a file replaced while it is
// read shows as changed to the next Watch tick.
func read(f Files) (*material, error) {
	m := &material{}
	paths := []string{f.CA}
	if f.Cert != "" {
		paths = append(paths, f.Cert, f.Key)
	}
	for _, p := range paths {
		st, err := os.Stat(p)
		if err != nil {
			return nil, fmt.Errorf("tls: %w", err)
		}
		m.stamps = append(m.stamps, stamp{st.ModTime(), st.Size()})
	}
	pem, err := os.ReadFile(f.CA)
	if err != nil {
		return nil, fmt.Errorf("tls: CA file: %w", err)
	}
	m.roots = x509.NewCertPool()
	if !m.roots.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("tls: CA file %s holds no PEM certificate: pass the CA's certificate, not its key", f.CA)
	}
	if f.Cert != "" {
		cert, err := tls.LoadX509KeyPair(f.Cert, f.Key)
		if err != nil {
			return nil, fmt.Errorf("tls: certificate %s with key %s: %w", f.Cert, f.Key, err)
		}
		m.cert = &cert
	}
	return m, nil
}

// HasCert reports whether the source has a certificate of its own, which
// a server needs.
func (s *Source) HasCert() bool { return s.cur.Load().cert != nil }

// Leaf returns the process's own certificate as last read, or nil without
// one.
func (s *Source) Leaf() *x509.Certificate {
	if c := s.cur.Load().cert; c != nil {
		return c.Leaf
	}
	return nil
}

// Reload reads the files again. Connections made from then on use what it
// read; connections already open keep theirs.
//
// # Errors
//
// The errors of Load; the source then keeps the material it had, so a
// half-written file never takes a server's certificate away.
func (s *Source) Reload() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	m, err := read(s.files)
	if err != nil {
		return err
	}
	s.cur.Store(m)
	return nil
}

// changed reports whether a file's modification time or size differs from
// the last reading (or it cannot be stat'ed, which Reload then reports).
func (s *Source) changed() bool {
	old := s.cur.Load().stamps
	for i, p := range s.paths() {
		st, err := os.Stat(p)
		if err != nil {
			return true
		}
		if i >= len(old) || !st.ModTime().Equal(old[i].mod) || st.Size() != old[i].size {
			return true
		}
	}
	return false
}

// Watch reloads the files whenever they change, looking every interval
// (DefaultWatchInterval if interval <= 0), until ctx ends. A failed reload
// is logged and retried at the next change.
func (s *Source) Watch(ctx context.Context, interval time.Duration, log *slog.Logger) {
	if interval <= 0 {
		interval = DefaultWatchInterval
	}
	if log == nil {
		log = slog.Default()
	}
	t := time.NewTicker(interval)
	defer t.Stop()
	var failed []stamp // the reading that failed, not to log it every tick
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if !s.changed() {
			continue
		}
		now := s.statAll()
		if failed != nil && slices.Equal(now, failed) {
			continue
		}
		if err := s.Reload(); err != nil {
			failed = now
			log.Warn("tls files changed but cannot be loaded; keeping the previous ones", "err", err)
			continue
		}
		failed = nil
		s.LogLoaded(log, "tls files reloaded")
	}
}

func (s *Source) statAll() []stamp {
	var out []stamp
	for _, p := range s.paths() {
		if st, err := os.Stat(p); err == nil {
			out = append(out, stamp{st.ModTime(), st.Size()})
		} else {
			out = append(out, stamp{})
		}
	}
	return out
}

// LogLoaded logs msg with the files and the subject and expiry of the
// process's certificate, if it has one.
func (s *Source) LogLoaded(log *slog.Logger, msg string) {
	attrs := []any{"ca", s.files.CA}
	if l := s.Leaf(); l != nil {
		attrs = append(attrs, "cert", s.files.Cert, "subject", l.Subject.String(), "not_after", l.NotAfter.UTC().Format(time.RFC3339))
	}
	log.Info(msg, attrs...)
}

// ServerConfig returns the configuration of a TLS listener: each handshake
// gets the certificate read last and checks client certificates against
// the CA read last, as clientAuth says (tls.RequireAndVerifyClientCert for
// ports only members call, tls.VerifyClientCertIfGiven for a port that
// clients without certificates call too).
func (s *Source) ServerConfig(clientAuth tls.ClientAuthType) *tls.Config {
	return &tls.Config{
		MinVersion: tls.VersionTLS12,
		GetConfigForClient: func(*tls.ClientHelloInfo) (*tls.Config, error) {
			m := s.cur.Load()
			if m.cert == nil {
				return nil, errors.New("tls: this server has no certificate: start it with --tls-cert and --tls-key")
			}
			return &tls.Config{
				MinVersion:   tls.VersionTLS12,
				Certificates: []tls.Certificate{*m.cert},
				ClientCAs:    m.roots,
				ClientAuth:   clientAuth,
			}, nil
		},
	}
}

// ClientConfig returns the configuration of one connection to a server
// that must present a certificate for serverName (a host name or an IP
// address) signed by the CA read last. The process's own certificate, if
// it has one, goes with it when the server asks. Call it for every
// connection, so each uses what was read last; crypto/tls verifies the
// server as usual.
func (s *Source) ClientConfig(serverName string) *tls.Config {
	m := s.cur.Load()
	c := &tls.Config{
		MinVersion: tls.VersionTLS12,
		ServerName: serverName,
		RootCAs:    m.roots,
	}
	if cert := m.cert; cert != nil {
		// Always present it, where a tls.Config.Certificates entry would go
		// only to a server whose acceptable CAs include its issuer: a
		// member with a certificate of the wrong CA is then refused by
		// name, not quietly treated as a client without one.
		c.GetClientCertificate = func(*tls.CertificateRequestInfo) (*tls.Certificate, error) { return cert, nil }
	}
	return c
}

// ServerName is the name a client verifies the server at addr (host:port)
// by: its host, an IP address or a DNS name.
func ServerName(addr string) string {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return addr
	}
	return host
}
