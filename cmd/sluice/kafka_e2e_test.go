package main

import (
	"bytes"
	"context"
	"fmt"
	"os/exec"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/cmd/sluice/internal/proctest"
	"github.com/sluicehq/sluice/internal/testutil"
	"github.com/sluicehq/sluice/local/localtest"
)

// TestE2EKafkaExactlyOnceAcrossKills: the Kafka pipeline (a topic read, a
// keyed count, the transactional Kafka sink) on a JobManager and two
// TaskManager processes; the TaskManager running the sink is kill -9ed
// three times, once mid-checkpoint, and a read_committed consumer still
// sees each result exactly once.
func TestE2EKafkaExactlyOnceAcrossKills(t *testing.T) {
	k := testutil.StartKafka(t, localtest.KafkaPartitions, localtest.KafkaIn, localtest.KafkaOut)
	c := proctest.Start(t, []string{"--heartbeat-interval", "100ms", "--heartbeat-timeout", "3s"}, 4, 4)
	localtest.CheckKafkaAcrossTaskManagerKills(t, c, k.Brokers, 20_000, 7)
}

// TestE2EKafkaCrossCheckWithKcat: an independent client (kcat, on
// librdkafka) produces the input and reads the output with
// read_committed, so the connector is checked against more than franz-go
// talking to itself.
func TestE2EKafkaCrossCheckWithKcat(t *testing.T) {
	kcat := testutil.Kcat(t)
	const n, keys = 2000, 5
	k := testutil.StartKafka(t, localtest.KafkaPartitions, localtest.KafkaIn, localtest.KafkaOut)
	var in bytes.Buffer
	for i := range n {
		fmt.Fprintf(&in, "k%d:k%d %d\n", i%keys, i%keys, i)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	produce := exec.CommandContext(ctx, kcat, "-b", k.Brokers, "-t", localtest.KafkaIn, "-P", "-K", ":", "-z", "none")
	produce.Stdin = &in
	if out, err := produce.CombinedOutput(); err != nil {
		t.Fatalf("kcat -P: %v\n%s", err, out)
	}
	c := proctest.Start(t, nil, 4)
	localtest.KafkaSubmit(t, c, k.Brokers, nil)
	localtest.KafkaWaitOutput(t, k.Brokers, n, 2*time.Minute)
	out, err := exec.CommandContext(ctx, kcat, "-b", k.Brokers, "-t", localtest.KafkaOut, "-C", "-o", "beginning", "-e", "-q",
		"-X", "isolation.level=read_committed", "-f", "%s\n").Output()
	if err != nil {
		t.Fatalf("kcat -C: %v", err)
	}
	got := strings.Split(strings.TrimSpace(string(out)), "\n")
	var want []string
	for i := range n {
		want = append(want, fmt.Sprintf("k%d %d %d", i%keys, i, i/keys+1))
	}
	sort.Strings(got)
	sort.Strings(want)
	if d := localtest.Diff(want, got); d != "" {
		t.Fatalf("kcat reads %s as not each result exactly once:\n%s", localtest.KafkaOut, d)
	}
}
