package tlsconf_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/testutil"
	"github.com/sluicehq/sluice/internal/tlsconf"
	"github.com/sluicehq/sluice/internal/tlsconf/tlsconftest"
)

// handshake runs one TLS handshake over loopback TCP (buffered, so a
// server's alert never waits for a client that stopped reading) and
// returns the client's and the server's error, and the serial of the
// certificate the client saw.
func handshake(t *testing.T, srv, cli *tls.Config) (cliErr, srvErr error, serial string) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	done := make(chan error, 1)
	go func() {
		nc, err := ln.Accept()
		if err != nil {
			done <- err
			return
		}
		defer nc.Close()
		done <- tls.Server(nc, srv).HandshakeContext(ctx)
	}()
	var d net.Dialer
	nc, err := d.DialContext(ctx, "tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	c := tls.Client(nc, cli)
	if cliErr = c.HandshakeContext(ctx); cliErr == nil {
		serial = c.ConnectionState().PeerCertificates[0].SerialNumber.String()
	}
	srvErr = <-done
	return cliErr, srvErr, serial
}

func TestMembersOfOneCATrustEachOther(t *testing.T) {
	ca := tlsconftest.NewCA(t, "cluster")
	jm := ca.Source(t, t.TempDir(), "jm")
	tm := ca.Source(t, t.TempDir(), "tm")
	for _, auth := range []tls.ClientAuthType{tls.RequireAndVerifyClientCert, tls.VerifyClientCertIfGiven} {
		cliErr, srvErr, _ := handshake(t, tm.ServerConfig(auth), jm.ClientConfig("127.0.0.1"))
		if cliErr != nil || srvErr != nil {
			t.Fatalf("%v: client %v, server %v", auth, cliErr, srvErr)
		}
	}
}

func TestServerRefusesAClientCertificateOfAnotherCA(t *testing.T) {
	ca := tlsconftest.NewCA(t, "cluster")
	other := tlsconftest.NewCA(t, "other")
	srv := ca.Source(t, t.TempDir(), "tm")
	// The stranger trusts the cluster's CA (so it would accept the server)
	// but holds a certificate of another CA.
	dir := t.TempDir()
	c, k := other.Issue(t, dir, "stranger", "127.0.0.1")
	stranger, err := tlsconf.Load(tlsconf.Files{CA: ca.WriteCA(t, dir), Cert: c, Key: k})
	if err != nil {
		t.Fatal(err)
	}
	for _, auth := range []tls.ClientAuthType{tls.RequireAndVerifyClientCert, tls.VerifyClientCertIfGiven} {
		_, srvErr, _ := handshake(t, srv.ServerConfig(auth), stranger.ClientConfig("127.0.0.1"))
		if srvErr == nil || !strings.Contains(srvErr.Error(), "certificate") {
			t.Fatalf("%v: server accepted a client certificate of another CA (err %v)", auth, srvErr)
		}
	}
}

func TestMemberPortRefusesAClientWithoutCertificate(t *testing.T) {
	ca := tlsconftest.NewCA(t, "cluster")
	srv := ca.Source(t, t.TempDir(), "tm")
	user, err := tlsconf.Load(tlsconf.Files{CA: ca.WriteCA(t, t.TempDir())})
	if err != nil {
		t.Fatal(err)
	}
	if _, srvErr, _ := handshake(t, srv.ServerConfig(tls.RequireAndVerifyClientCert), user.ClientConfig("127.0.0.1")); srvErr == nil {
		t.Fatal("a member port accepted a client without a certificate")
	}
	// The JobManager's port takes clients without one.
	if cliErr, srvErr, _ := handshake(t, srv.ServerConfig(tls.VerifyClientCertIfGiven), user.ClientConfig("127.0.0.1")); cliErr != nil || srvErr != nil {
		t.Fatalf("client %v, server %v", cliErr, srvErr)
	}
}

func TestClientVerifiesTheServer(t *testing.T) {
	ca := tlsconftest.NewCA(t, "cluster")
	other := tlsconftest.NewCA(t, "other")
	srv := ca.Source(t, t.TempDir(), "jm") // good for 127.0.0.1, ::1, localhost
	trustsOther := other.Source(t, t.TempDir(), "client")
	if cliErr, _, _ := handshake(t, srv.ServerConfig(tls.VerifyClientCertIfGiven), trustsOther.ClientConfig("127.0.0.1")); cliErr == nil {
		t.Fatal("a client that trusts another CA accepted the server")
	}
	good := ca.Source(t, t.TempDir(), "client")
	cliErr, _, _ := handshake(t, srv.ServerConfig(tls.VerifyClientCertIfGiven), good.ClientConfig("10.1.2.3"))
	var he x509.HostnameError
	if cliErr == nil || !errors.As(cliErr, &he) {
		t.Fatalf("a server without the name 10.1.2.3 was accepted for it (err %v)", cliErr)
	}
	if cliErr, srvErr, _ := handshake(t, srv.ServerConfig(tls.VerifyClientCertIfGiven), good.ClientConfig("localhost")); cliErr != nil || srvErr != nil {
		t.Fatalf("client %v, server %v", cliErr, srvErr)
	}
}

func TestLoadSaysWhatIsWrong(t *testing.T) {
	ca := tlsconftest.NewCA(t, "cluster")
	dir := t.TempDir()
	files := ca.Member(t, dir, "jm")
	junk := dir + "/junk.pem"
	if err := os.WriteFile(junk, []byte("not pem"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name  string
		files tlsconf.Files
		want  string
	}{
		{"no CA", tlsconf.Files{Cert: files.Cert, Key: files.Key}, "--tls-ca"},
		{"cert without key", tlsconf.Files{CA: files.CA, Cert: files.Cert}, "--tls-key"},
		{"missing CA", tlsconf.Files{CA: dir + "/absent.pem"}, "absent.pem"},
		{"CA without certificate", tlsconf.Files{CA: junk}, "no PEM certificate"},
		{"key of another cert", tlsconf.Files{CA: files.CA, Cert: files.Cert, Key: junk}, "junk.pem"},
	} {
		_, err := tlsconf.Load(tc.files)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: err %v, want it to mention %q", tc.name, err, tc.want)
		}
	}
}

func TestReloadServesTheNewCertificate(t *testing.T) {
	ca := tlsconftest.NewCA(t, "cluster")
	dir := t.TempDir()
	src := ca.Source(t, dir, "jm")
	client := ca.Source(t, t.TempDir(), "client")
	srvCfg := src.ServerConfig(tls.VerifyClientCertIfGiven) // one config, as a listener keeps it
	_, _, before := handshake(t, srvCfg, client.ClientConfig("127.0.0.1"))
	if before != src.Leaf().SerialNumber.String() {
		t.Fatalf("served %s, loaded %s", before, src.Leaf().SerialNumber)
	}
	ca.Issue(t, dir, "jm", "127.0.0.1") // rotate in place
	if err := src.Reload(); err != nil {
		t.Fatal(err)
	}
	_, _, after := handshake(t, srvCfg, client.ClientConfig("127.0.0.1"))
	if after == before || after != src.Leaf().SerialNumber.String() {
		t.Fatalf("after reload served %s (before %s, loaded %s)", after, before, src.Leaf().SerialNumber)
	}
}

func TestFailedReloadKeepsTheOldCertificate(t *testing.T) {
	ca := tlsconftest.NewCA(t, "cluster")
	dir := t.TempDir()
	files := ca.Member(t, dir, "jm")
	src, err := tlsconf.Load(files)
	if err != nil {
		t.Fatal(err)
	}
	was := src.Leaf().SerialNumber
	if err := os.WriteFile(files.Key, []byte("half a key"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := src.Reload(); err == nil {
		t.Fatal("reload of a broken key succeeded")
	}
	if src.Leaf().SerialNumber.Cmp(was) != 0 {
		t.Fatal("a failed reload replaced the certificate")
	}
	client := ca.Source(t, t.TempDir(), "client")
	if cliErr, srvErr, _ := handshake(t, src.ServerConfig(tls.VerifyClientCertIfGiven), client.ClientConfig("127.0.0.1")); cliErr != nil || srvErr != nil {
		t.Fatalf("after a failed reload: client %v, server %v", cliErr, srvErr)
	}
}

func TestWatchPicksUpAChangedFile(t *testing.T) {
	ca := tlsconftest.NewCA(t, "cluster")
	dir := t.TempDir()
	src := ca.Source(t, dir, "jm")
	was := src.Leaf().SerialNumber
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); src.Watch(ctx, 10*time.Millisecond, nil) }()
	defer func() { cancel(); <-done }()
	c, _ := ca.Issue(t, dir, "jm", "127.0.0.1")
	// A rename within the file system's time granularity can keep the
	// modification time; the new certificate's size differs only by
	// chance, so set a time that certainly differs.
	later := time.Now().Add(time.Minute)
	if err := os.Chtimes(c, later, later); err != nil {
		t.Fatal(err)
	}
	testutil.CheckFor(t, time.Minute, 10*time.Millisecond, func() error {
		if src.Leaf().SerialNumber.Cmp(was) == 0 {
			return fmt.Errorf("still serving serial %s", was)
		}
		return nil
	})
}

func TestServerName(t *testing.T) {
	for in, want := range map[string]string{
		"127.0.0.1:6123": "127.0.0.1",
		"[::1]:1":        "::1",
		"jm.example:80":  "jm.example",
		"jm.example":     "jm.example",
	} {
		if got := tlsconf.ServerName(in); got != want {
			t.Errorf("ServerName(%q) = %q, want %q", in, got, want)
		}
	}
}
