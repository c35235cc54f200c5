package jobmaster

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/checkpoint"
	"github.com/sluicehq/sluice/internal/control"
	"github.com/sluicehq/sluice/internal/jobgraph"
	"github.com/sluicehq/sluice/internal/testutil"
)

// kafkaGraph is wordcount with a kafka source at parallelism p.
func kafkaGraph(p int, config map[string]string) *jobgraph.Graph {
	g := wordcount(p, 1)
	g.Vertices[0].Connector = jobgraph.ConnectorKafkaSource
	g.Vertices[0].Config = config
	return g
}

// Each partition goes to the subtask that owns it, once, whoever asks
// first; a partition found by discovery while the job runs goes to its
// owner too, and the others hear "no split yet", not done.
func TestKafkaPartitionsGoToTheirOwners(t *testing.T) {
	initial := append(testutil.KafkaSplits("bids", 5), testutil.KafkaSplits("asks", 3)...)
	var mu sync.Mutex
	listed := slices.Clone(initial)
	h := start(t, kafkaGraph(2, map[string]string{"brokers": "127.0.0.1:9092", "topics": "bids,asks", "discovery-interval-ms": "20"}), func(c *Config, _ *fakeGateway, _ *fakePool) {
		c.Splits = map[int][]checkpoint.Split{1: initial}
		c.Discover = func(ctx context.Context, vertex int) ([]checkpoint.Split, error) {
			mu.Lock()
			defer mu.Unlock()
			return slices.Clone(listed), nil
		}
	})
	testutil.CheckFor(t, 5*time.Second, 5*time.Millisecond, func() error { return deployments(h, 3) })
	deps, _, _ := h.gw.snapshot()
	srcs := []control.Deployment{deps[1], deps[2]}
	if srcs[0].Subtask == 1 {
		srcs[0], srcs[1] = srcs[1], srcs[0]
	}
	ctx := context.Background()
	ask := func(d control.Deployment) (checkpoint.Split, bool) {
		t.Helper()
		s, done, err := h.jm.NextSplit(ctx, control.SplitRequest{Fencing: d.Fencing, ExecutionID: d.ExecutionID, VertexID: 1, Subtask: d.Subtask})
		if err != nil || done {
			t.Fatalf("subtask %d: split %v, done %v, err %v", d.Subtask, s, done, err)
		}
		return s, done
	}
	got := map[string]int{}
	for i := 0; i < 2*len(initial); i++ {
		d := srcs[i%2]
		s, _ := ask(d)
		if s == (checkpoint.Split{}) {
			continue
		}
		topic, p, ok := jobgraph.ParseKafkaSplitKey(s.Key)
		if !ok {
			t.Fatalf("split %v is no partition", s)
		}
		if o := jobgraph.KafkaPartitionOwner(topic, p, 2); o != d.Subtask {
			t.Fatalf("%s went to subtask %d, its owner is %d", s.Key, d.Subtask, o)
		}
		if _, dup := got[s.Key]; dup {
			t.Fatalf("%s handed out twice", s.Key)
		}
		got[s.Key] = d.Subtask
	}
	if len(got) != len(initial) {
		t.Fatalf("handed out %v, want all of %v", got, initial)
	}
	for _, d := range srcs {
		if s, _ := ask(d); s != (checkpoint.Split{}) {
			t.Fatalf("subtask %d got %v after every partition was handed out", d.Subtask, s)
		}
	}

	// A partition is added while the job runs: its owner gets it.
	added := checkpoint.Split{Key: jobgraph.KafkaSplitKey("bids", 5)}
	mu.Lock()
	listed = append(listed, added)
	mu.Unlock()
	owner := srcs[jobgraph.KafkaPartitionOwner("bids", 5, 2)]
	testutil.CheckFor(t, 5*time.Second, 5*time.Millisecond, func() error {
		if s, _ := ask(owner); s != added {
			return fmt.Errorf("owner got %v, want %v", s, added)
		}
		return nil
	})
	for _, d := range srcs {
		if s, _ := ask(d); s != (checkpoint.Split{}) {
			t.Fatalf("subtask %d got %v after the added partition was handed out", d.Subtask, s)
		}
	}
}

// Without discovery a subtask with no partition left is done.
func TestKafkaWithoutDiscoveryIsDone(t *testing.T) {
	h := start(t, kafkaGraph(1, map[string]string{"brokers": "127.0.0.1:9092", "topics": "bids", "discovery-interval-ms": "0"}), func(c *Config, _ *fakeGateway, _ *fakePool) {
		c.Splits = map[int][]checkpoint.Split{1: testutil.KafkaSplits("bids", 2)}
	})
	testutil.CheckFor(t, 5*time.Second, 5*time.Millisecond, func() error { return deployments(h, 2) })
	deps, _, _ := h.gw.snapshot()
	src := deps[1]
	var got []string
	for {
		s, done, err := h.jm.NextSplit(context.Background(), control.SplitRequest{Fencing: src.Fencing, ExecutionID: src.ExecutionID, VertexID: 1, Subtask: 0})
		if err != nil {
			t.Fatal(err)
		}
		if done {
			break
		}
		got = append(got, s.Key)
	}
	if want := []string{"bids/0", "bids/1"}; !slices.Equal(got, want) {
		t.Fatalf("splits %v, want %v", got, want)
	}
}

// A checkpoint of a kafka source is not restored at another parallelism.
func TestKafkaRescaleIsRefused(t *testing.T) {
	g := kafkaGraph(3, map[string]string{"brokers": "127.0.0.1:9092", "topics": "bids"})
	m := &checkpoint.Metadata{ID: 4, JobID: "old", Tasks: []checkpoint.TaskState{{Vertices: []int{1, 2, 3}, Subtask: 0, Parallelism: 2}}}
	err := checkKafkaRescale(m, Config{Graph: g, DefaultParallelism: 1})
	if err == nil || !strings.Contains(err.Error(), "a kafka source cannot be rescaled") || !strings.Contains(err.Error(), "restore at parallelism 2") {
		t.Fatalf("rescale 2 -> 3: %v, want it refused", err)
	}
	m.Tasks[0].Parallelism = 3
	if err := checkKafkaRescale(m, Config{Graph: g, DefaultParallelism: 1}); err != nil {
		t.Fatalf("same parallelism: %v", err)
	}
}

// A kafka source resumed from a savepoint reads the partitions created
// since (those the savepoint does not know), even without discovery, and
// does not hand out again those its subtasks had taken.
func TestKafkaResumeHandsOutNewPartitions(t *testing.T) {
	st := newStore(t)
	sp, _ := testKeys.Savepoint("sp-0123456789abcdef")
	meta := &checkpoint.Metadata{
		JobID: "old", Tenant: "default", ID: 7, Savepoint: true, SavepointID: "sp-0123456789abcdef", MaxParallelism: 128,
		Tasks: []checkpoint.TaskState{
			{Vertices: []int{1, 2, 3}, Subtask: 0, Parallelism: 1, State: checkpoint.StateHandle{Key: sp + "task-1_2_3-0.state", Size: 1, KeyGroupStart: 0, KeyGroupEnd: 127}},
			{Vertices: []int{4, 5}, Subtask: 0, Parallelism: 1, State: checkpoint.StateHandle{Key: sp + "task-4_5-0.state", Size: 1, KeyGroupStart: 0, KeyGroupEnd: 127}},
		},
		// bids/1 was not taken yet; bids/0 was; bids/2 is new.
		Sources:    map[int][]checkpoint.Split{1: {{Key: "bids/1"}}},
		Discovered: map[int][]string{1: {"bids/0", "bids/1"}},
	}
	h := start(t, kafkaGraph(1, map[string]string{"brokers": "127.0.0.1:9092", "topics": "bids", "discovery-interval-ms": "0"}), func(c *Config, _ *fakeGateway, _ *fakePool) {
		c.Blob, c.Restore = st, meta
		c.Splits = map[int][]checkpoint.Split{1: testutil.KafkaSplits("bids", 3)}
	})
	testutil.CheckFor(t, 10*time.Second, 5*time.Millisecond, func() error { return deployed(h, 0, 2) })
	var src control.Deployment
	for _, d := range h.deploysOf(0) {
		if d.Chain[0].ID == 1 {
			src = d
		}
	}
	var got []string
	for {
		s, done, err := h.jm.NextSplit(context.Background(), control.SplitRequest{Fencing: src.Fencing, ExecutionID: src.ExecutionID, VertexID: 1, Subtask: 0})
		if err != nil {
			t.Fatal(err)
		}
		if done {
			break
		}
		got = append(got, s.Key)
	}
	if want := []string{"bids/1", "bids/2"}; !slices.Equal(got, want) {
		t.Fatalf("handed out %v, want %v", got, want)
	}
}
