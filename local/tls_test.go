package local_test

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/control"
	"github.com/sluicehq/sluice/internal/rpcserver"
	"github.com/sluicehq/sluice/internal/tlsconf"
	"github.com/sluicehq/sluice/internal/tlsconf/tlsconftest"
	"github.com/sluicehq/sluice/local"
	"github.com/sluicehq/sluice/local/localtest"
	"github.com/sluicehq/sluice/sdk/client"
	tmrpc "github.com/sluicehq/sluice/tm/rpc"
)

// TestJobRunsOverTLS runs the word count at p=4 on two TaskManagers of two
// slots with TLS on every connection (the client's, the JobManager's to
// and from the TaskManagers, and the data ports between them), checks the
// counts against coreutils', and that what has no certificate of the
// cluster's CA is refused.
func TestJobRunsOverTLS(t *testing.T) {
	ca := tlsconftest.NewCA(t, "cluster")
	c := localtest.Start(t, local.Config{TaskManagers: 2, Slots: 2, TLS: ca.Source(t, t.TempDir(), "member")})
	in := filepath.Join(t.TempDir(), "input.txt")
	if err := localtest.GenerateText(in, 1<<20, 7); err != nil {
		t.Fatal(err)
	}
	want := localtest.CoreutilsWordCount(t, in)
	r := localtest.WaitFinished(t, c, localtest.SubmitJob(t, c, localtest.Guest(t, "examples/wordcount"), []string{"--input", in}, 4))
	if d := localtest.Diff(want, localtest.Lines(r.Records)); d != "" {
		t.Fatalf("word counts over TLS differ from coreutils:\n%s", d)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	plain, err := client.New(c.Addr(), client.WithTimeout(time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := plain.ListJobs(ctx); err == nil {
		t.Fatal("a plaintext client listed the jobs of a TLS JobManager")
	}
	// A client that trusts another CA refuses the JobManager.
	other := tlsconftest.NewCA(t, "other")
	wrongCA, err := client.New(c.Addr(), client.WithTimeout(time.Minute), client.WithTLS(other.Source(t, t.TempDir(), "user").ClientConfig("")))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := wrongCA.ListJobs(ctx); err == nil || !strings.Contains(err.Error(), "certificate") {
		t.Fatalf("a client of another CA: %v, want a certificate error", err)
	}

	// A TaskManager whose certificate another CA signed cannot register,
	// though it trusts the cluster's CA and so the JobManager.
	dir := t.TempDir()
	cert, key := other.Issue(t, dir, "stranger", "127.0.0.1")
	stranger, err := tlsconf.Load(tlsconf.Files{CA: ca.WriteCA(t, dir), Cert: cert, Key: key})
	if err != nil {
		t.Fatal(err)
	}
	rm, err := tmrpc.NewResourceManager(c.Addr(), rpcserver.ClientConfig{TLS: stranger.ClientConfig, RPCTimeout: time.Minute, ConnectTimeout: 30 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := rm.Register(ctx, control.Registration{ResourceID: "stranger", RPCAddress: "127.0.0.1:1", DataAddress: "127.0.0.1:2", Slots: 1}); err == nil {
		t.Fatal("a TaskManager with a certificate of another CA registered")
	}
	// The same call with a member's certificate registers.
	member := ca.Source(t, t.TempDir(), "tm-3")
	rm, err = tmrpc.NewResourceManager(c.Addr(), rpcserver.ClientConfig{TLS: member.ClientConfig, RPCTimeout: time.Minute, ConnectTimeout: 30 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := rm.Register(ctx, control.Registration{ResourceID: "tm-3", RPCAddress: "127.0.0.1:1", DataAddress: "127.0.0.1:2", Slots: 1}); err != nil {
		t.Fatal(fmt.Errorf("a member's registration: %w", err))
	}
}
