package main

import (
	"context"
	"crypto/tls"
	"fmt"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sluicehq/sluice/cmd/sluice/internal/proctest"
	"github.com/sluicehq/sluice/internal/testutil"
	"github.com/sluicehq/sluice/internal/tlsconf"
	"github.com/sluicehq/sluice/internal/tlsconf/tlsconftest"
)

// servedSerial dials addr over TLS, trusting src's CA, and returns the
// serial of the certificate the server presents.
func servedSerial(src *tlsconf.Source, addr string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	d := tls.Dialer{Config: src.ClientConfig(tlsconf.ServerName(addr))}
	nc, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return "", err
	}
	defer nc.Close()
	return nc.(*tls.Conn).ConnectionState().PeerCertificates[0].SerialNumber.String(), nil
}

// TestE2ETLS runs the word count across two TaskManagers with TLS on every
// connection (flags for the JobManager, SLUICE_TLS_* for the TaskManagers
// and the client commands), checks that a client command without TLS is
// refused, and that SIGHUP makes the running JobManager serve a renewed
// certificate.
func TestE2ETLS(t *testing.T) {
	in, want := wordInput(t)
	ca := tlsconftest.NewCA(t, "cluster")
	dir := t.TempDir()
	jmCert, jmKey := ca.Issue(t, dir, "jm", "127.0.0.1")
	member := ca.Member(t, dir, "member")
	client, err := tlsconf.Load(tlsconf.Files{CA: member.CA})
	if err != nil {
		t.Fatal(err)
	}
	c := proctest.StartConfig(t, proctest.Config{
		JMArgs: []string{"--tls-ca", member.CA, "--tls-cert", jmCert, "--tls-key", jmKey},
		Env:    []string{envTLSCA + "=" + member.CA, envTLSCert + "=" + member.Cert, envTLSKey + "=" + member.Key},
		Slots:  []int{2, 2},
		TLS:    client.ClientConfig(""),
	})
	r := c.Run("run", "--blob", c.BlobURL, "-p", "4", moduleDir(t, "examples/wordcount"), "--", "--input", in)
	if r.Code != 0 {
		t.Fatalf("sluice run over TLS: exit %d\nstderr:\n%s", r.Code, r.Stderr)
	}
	checkCounts(t, want, r.Stdout)

	// The same command without the TLS files fails.
	plain := proctest.Sluice(t, c.BaseEnv, "list")
	if plain.Code == 0 || !strings.Contains(plain.Stderr, "list jobs") {
		t.Fatalf("sluice list without TLS: exit %d (want a failure to list jobs)\nstdout:\n%s\nstderr:\n%s", plain.Code, plain.Stdout, plain.Stderr)
	}
	t.Logf("sluice list without TLS: %s", strings.TrimSpace(plain.Stderr))
	// A client command needs only the CA.
	if r := proctest.Sluice(t, c.BaseEnv, "list", "--tls-ca", member.CA); r.Code != 0 {
		t.Fatalf("sluice list --tls-ca: exit %d\n%s", r.Code, r.Stderr)
	}

	before, err := servedSerial(client, c.Addr())
	if err != nil {
		t.Fatal(err)
	}
	ca.Issue(t, dir, "jm", "127.0.0.1") // renew in place
	c.JM.Signal(t, syscall.SIGHUP)
	testutil.CheckFor(t, time.Minute, 20*time.Millisecond, func() error {
		if !strings.Contains(c.JM.Stderr(), "SIGHUP: tls files reloaded") {
			return fmt.Errorf("the JobManager did not log a reload:\n%s", c.JM.Stderr())
		}
		got, err := servedSerial(client, c.Addr())
		if err != nil {
			return err
		}
		if got == before {
			return fmt.Errorf("still serves serial %s", before)
		}
		return nil
	})
	// It still serves its TaskManagers and clients.
	if r := c.Run("list"); r.Code != 0 {
		t.Fatalf("sluice list after the reload: exit %d\n%s", r.Code, r.Stderr)
	}
}
