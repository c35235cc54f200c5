package rpcserver_test

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/cloudwego/kitex/server"

	"github.com/sluicehq/sluice/idl/kitex_gen/sluice/resourcemanager"
	rmsvc "github.com/sluicehq/sluice/idl/kitex_gen/sluice/resourcemanager/resourcemanager"
	"github.com/sluicehq/sluice/internal/rpcerr"
	"github.com/sluicehq/sluice/internal/rpcserver"
	"github.com/sluicehq/sluice/internal/testutil"
	"github.com/sluicehq/sluice/internal/tlsconf"
	"github.com/sluicehq/sluice/internal/tlsconf/tlsconftest"
)

// startTLS starts the test ResourceManager service behind TLS with a
// certificate of ca, asking for client certificates as auth says.
func startTLS(t *testing.T, ca *tlsconftest.CA, auth tls.ClientAuthType) (*rpcserver.Server, *tlsconf.Source) {
	t.Helper()
	src := ca.Source(t, t.TempDir(), "server")
	srv, err := rpcserver.Start(context.Background(), rpcserver.Config{Addr: "127.0.0.1:0", TLS: src.ServerConfig(auth)},
		func(s server.Server) error { return rmsvc.RegisterService(s, &tokenRM{}) })
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close() })
	return srv, src
}

func register(c rmsvc.Client) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	resp, err := c.RegisterTaskManager(ctx, &resourcemanager.RegisterTaskManagerRequest{})
	if err != nil {
		return "", rpcserver.FromCall(err)
	}
	return resp.RegistrationId, nil
}

// generous bounds a loaded machine keeps.
var generous = rpcserver.ClientConfig{RPCTimeout: time.Minute, ConnectTimeout: 30 * time.Second}

func withTLS(cfg rpcserver.ClientConfig, src *tlsconf.Source) rpcserver.ClientConfig {
	cfg.TLS = src.ClientConfig
	return cfg
}

func TestTLSCallsCarryMetadata(t *testing.T) {
	ca := tlsconftest.NewCA(t, "cluster")
	srv, _ := startTLS(t, ca, tls.RequireAndVerifyClientCert)
	member := ca.Source(t, t.TempDir(), "member")
	cfg := withTLS(generous, member)
	cfg.Metadata = map[string]string{rpcserver.MetaToken: "t", rpcserver.MetaPeer: "p"}
	c := rmsvc.MustNewClient("rm", rpcserver.ClientOptions(srv.Addr(), cfg)...)
	for i := range 3 { // a pooled connection is reused
		if id, err := register(c); err != nil || id != "t|p" {
			t.Fatalf("call %d: %q %v", i, id, err)
		}
	}
	ic := rmsvc.MustNewClient("rm", rpcserver.IntervalClientOptions(srv.Addr(), cfg)...)
	if id, err := register(ic); err != nil || id != "t|p" {
		t.Fatalf("interval client: %q %v", id, err)
	}
}

func TestTLSServerRefusesPlaintext(t *testing.T) {
	ca := tlsconftest.NewCA(t, "cluster")
	srv, _ := startTLS(t, ca, tls.VerifyClientCertIfGiven)
	c := rmsvc.MustNewClient("rm", rpcserver.ClientOptions(srv.Addr(), generous)...)
	if id, err := register(c); err == nil {
		t.Fatalf("a plaintext call to a TLS server answered %q", id)
	}
}

func TestTLSClientRefusesPlaintextServer(t *testing.T) {
	srv, err := rpcserver.Start(context.Background(), rpcserver.Config{Addr: "127.0.0.1:0"},
		func(s server.Server) error { return rmsvc.RegisterService(s, &tokenRM{}) })
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	ca := tlsconftest.NewCA(t, "cluster")
	c := rmsvc.MustNewClient("rm", rpcserver.ClientOptions(srv.Addr(), withTLS(generous, ca.Source(t, t.TempDir(), "member")))...)
	if id, err := register(c); err == nil || !errors.Is(err, rpcerr.ErrUnavailable) {
		t.Fatalf("a TLS client talked to a plaintext server: %q %v", id, err)
	}
}

func TestTLSServerRefusesAMemberOfAnotherCA(t *testing.T) {
	ca := tlsconftest.NewCA(t, "cluster")
	other := tlsconftest.NewCA(t, "other")
	for _, auth := range []tls.ClientAuthType{tls.RequireAndVerifyClientCert, tls.VerifyClientCertIfGiven} {
		srv, _ := startTLS(t, ca, auth)
		dir := t.TempDir()
		cert, key := other.Issue(t, dir, "stranger", "127.0.0.1")
		stranger, err := tlsconf.Load(tlsconf.Files{CA: ca.WriteCA(t, dir), Cert: cert, Key: key})
		if err != nil {
			t.Fatal(err)
		}
		c := rmsvc.MustNewClient("rm", rpcserver.ClientOptions(srv.Addr(), withTLS(generous, stranger))...)
		if id, err := register(c); err == nil {
			t.Fatalf("%v: a client with a certificate of another CA got %q", auth, id)
		}
		// A client without a certificate: refused where members only call.
		user, err := tlsconf.Load(tlsconf.Files{CA: ca.WriteCA(t, dir)})
		if err != nil {
			t.Fatal(err)
		}
		uc := rmsvc.MustNewClient("rm", rpcserver.ClientOptions(srv.Addr(), withTLS(generous, user))...)
		_, err = register(uc)
		if got, want := err != nil, auth == tls.RequireAndVerifyClientCert; got != want {
			t.Fatalf("%v: a client without a certificate: err %v", auth, err)
		}
	}
}

func TestTLSClientVerifiesTheServersCA(t *testing.T) {
	srv, _ := startTLS(t, tlsconftest.NewCA(t, "cluster"), tls.VerifyClientCertIfGiven)
	other := tlsconftest.NewCA(t, "other")
	c := rmsvc.MustNewClient("rm", rpcserver.ClientOptions(srv.Addr(), withTLS(generous, other.Source(t, t.TempDir(), "member")))...)
	_, err := register(c)
	if err == nil || !strings.Contains(err.Error(), "certificate") {
		t.Fatalf("a server of another CA was trusted: %v", err)
	}
}

func TestTLSServerPicksUpAReloadedCertificate(t *testing.T) {
	ca := tlsconftest.NewCA(t, "cluster")
	dir := t.TempDir()
	src := ca.Source(t, dir, "server")
	srv, err := rpcserver.Start(context.Background(), rpcserver.Config{Addr: "127.0.0.1:0", TLS: src.ServerConfig(tls.VerifyClientCertIfGiven)},
		func(s server.Server) error { return rmsvc.RegisterService(s, &tokenRM{}) })
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	// The client records the serial of the certificate of each connection.
	client := ca.Source(t, t.TempDir(), "member")
	seen := make(chan string, 16)
	cfg := generous
	cfg.TLS = func(name string) *tls.Config {
		c := client.ClientConfig(name)
		c.VerifyConnection = func(cs tls.ConnectionState) error {
			seen <- cs.PeerCertificates[0].SerialNumber.String()
			return nil
		}
		return c
	}
	if _, err := register(rmsvc.MustNewClient("rm", rpcserver.ClientOptions(srv.Addr(), cfg)...)); err != nil {
		t.Fatal(err)
	}
	if got := <-seen; got != src.Leaf().SerialNumber.String() {
		t.Fatalf("served %s, loaded %s", got, src.Leaf().SerialNumber)
	}
	// Replace the files; the server, still running, serves the new one.
	ca.Issue(t, dir, "server", "127.0.0.1")
	if err := src.Reload(); err != nil {
		t.Fatal(err)
	}
	want := src.Leaf().SerialNumber.String()
	testutil.CheckFor(t, time.Minute, 10*time.Millisecond, func() error {
		// A new client: a new connection, so a new handshake.
		if _, err := register(rmsvc.MustNewClient("rm", rpcserver.ClientOptions(srv.Addr(), cfg)...)); err != nil {
			return err
		}
		if got := <-seen; got != want {
			return fmt.Errorf("served %s, want the reloaded %s", got, want)
		}
		return nil
	})
}
