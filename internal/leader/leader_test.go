package leader

import (
	"context"
	"log/slog"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/testutil"
)

func TestParseURL(t *testing.T) {
	for _, tc := range []struct {
		in      string
		want    Target
		wantErr string
	}{
		{in: "etcd://127.0.0.1:2379", want: Target{Endpoints: []string{"127.0.0.1:2379"}, Cluster: DefaultCluster}},
		{in: "etcd://a:1,b:2/prod", want: Target{Endpoints: []string{"a:1", "b:2"}, Cluster: "prod"}},
		{in: "http://a:1", wantErr: "not an etcd:// URL"},
		{in: "etcd://", wantErr: `endpoint "" is not host:port`},
		{in: "etcd://a", wantErr: `endpoint "a" is not host:port`},
		{in: "etcd://a:1,/x", wantErr: `endpoint "" is not host:port`},
		{in: "etcd://a:1/x/y", wantErr: "only letters"},
		{in: "etcd://a:1/" + strings.Repeat("x", 129), wantErr: "1 to 128 characters"},
	} {
		got, err := ParseURL(tc.in)
		if tc.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) || !strings.Contains(err.Error(), "want etcd://HOST:PORT") {
				t.Errorf("ParseURL(%q) = %v, want an error with %q saying what to write", tc.in, err, tc.wantErr)
			}
			continue
		}
		if err != nil || strings.Join(got.Endpoints, ",") != strings.Join(tc.want.Endpoints, ",") || got.Cluster != tc.want.Cluster {
			t.Errorf("ParseURL(%q) = %+v, %v; want %+v", tc.in, got, err, tc.want)
		}
	}
	if a, b := (Target{Cluster: "a"}).Prefix(), (Target{Cluster: "b"}).Prefix(); a == b || !strings.HasPrefix(Target{Cluster: "a"}.JobsPrefix(), a) {
		t.Errorf("clusters a and b share keys: %q %q", a, b)
	}
}

// TestConnectUnreachable: with no etcd at the endpoint, Connect retries
// with growing backoff, logs it, and ends with ctx, saying what to check.
func TestConnectUnreachable(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close() // nothing listens there now
	var logs testutil.SyncBuffer
	log := slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	cli, err := Connect(ctx, Target{Endpoints: []string{addr}, Cluster: "x"}, log)
	if err == nil {
		cli.Close()
		t.Fatal("Connect to a closed port succeeded")
	}
	for _, want := range []string{"etcd at " + addr + " unreachable", "check the --ha URL and that etcd runs"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not say %q", err, want)
		}
	}
	out := logs.String()
	if n := strings.Count(out, "etcd unreachable; retrying"); n < 2 || !strings.Contains(out, "backoff=100ms") || !strings.Contains(out, "backoff=200ms") {
		t.Errorf("want at least two retries with a growing backoff logged, got %d:\n%s", n, out)
	}
}
