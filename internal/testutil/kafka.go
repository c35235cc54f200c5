package testutil

import (
	"net"
	"strconv"
	"sync"
	"testing"

	"github.com/twmb/franz-go/pkg/kfake"
)

// Kafka is franz-go's in-process test broker (kfake: a test broker, not a
// production one) on a loopback port with its data in a t.TempDir(). Stop
// and Start close it and open it again on the same port and data dir, so
// a test can take it away for a while; the test's cleanup closes it.
type Kafka struct {
	Brokers string // host:port
	DataDir string

	t      testing.TB
	port   int
	topics []string
	parts  int32

	mu sync.Mutex
	c  *kfake.Cluster
}

// StartKafka starts a one-broker kfake cluster with topics, each of
// partitions partitions, created.
func StartKafka(t testing.TB, partitions int32, topics ...string) *Kafka {
	t.Helper()
	k := &Kafka{DataDir: t.TempDir(), t: t, topics: topics, parts: partitions}
	t.Cleanup(k.Stop)
	k.Start()
	return k
}

// Start opens the cluster (again), on the same port and data dir.
func (k *Kafka) Start() {
	k.t.Helper()
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.c != nil {
		return
	}
	opts := []kfake.Opt{kfake.NumBrokers(1), kfake.DataDir(k.DataDir), kfake.SeedTopics(k.parts, k.topics...)}
	if k.port != 0 {
		opts = append(opts, kfake.Ports(k.port))
	}
	c, err := kfake.NewCluster(opts...)
	if err != nil {
		k.t.Fatalf("kfake: %v", err)
	}
	k.c = c
	k.Brokers = c.ListenAddrs()[0]
	if k.port == 0 {
		_, p, err := net.SplitHostPort(k.Brokers)
		if err == nil {
			k.port, err = strconv.Atoi(p)
		}
		if err != nil {
			k.t.Fatalf("kfake address %q: %v", k.Brokers, err)
		}
	}
}

// Stop closes the cluster (its data dir stays); a stopped cluster's Stop
// does nothing.
func (k *Kafka) Stop() {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.c != nil {
		k.c.Close()
		k.c = nil
	}
}
