package task

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/bytedance/sonic"

	"github.com/sluicehq/sluice/internal/checkpoint"
	"github.com/sluicehq/sluice/internal/control"
	"github.com/sluicehq/sluice/internal/jobconfig"
	"github.com/sluicehq/sluice/internal/jobgraph"
	"github.com/sluicehq/sluice/internal/testutil"
	"github.com/sluicehq/sluice/tm/exchange"
	"github.com/sluicehq/sluice/wasmhost"
)

// poisonInput is n lines "k<i mod 97>", with line bad (0-based) "boom".
func poisonInput(n, bad int) []byte {
	var b bytes.Buffer
	for i := 0; i < n; i++ {
		if i == bad {
			b.WriteString("boom\n")
			continue
		}
		fmt.Fprintf(&b, "k%d\n", i%97)
	}
	return b.Bytes()
}

func poisonConf(t *testing.T, kv ...string) jobconfig.Config {
	t.Helper()
	m := map[string]string{}
	for i := 0; i+1 < len(kv); i += 2 {
		m[kv[i]] = kv[i+1]
	}
	c, err := jobconfig.Parse(m)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// checkRunningCounts checks the output of poisonsum over n lines with one
// poison line: every key's counts 1..its lines, each exactly once.
func checkRunningCounts(t *testing.T, got []string, n, bad int) {
	t.Helper()
	want := map[string]int{}
	for i := 0; i < n; i++ {
		if i != bad {
			want[fmt.Sprintf("k%d", i%97)]++
		}
	}
	seen := map[string]bool{}
	max := map[string]int{}
	for _, line := range got {
		k, c, ok := strings.Cut(line, "\t")
		cnt, err := strconv.Atoi(c)
		if !ok || err != nil {
			t.Fatalf("output line %q", line)
		}
		if seen[line] {
			t.Fatalf("output %q twice", line)
		}
		seen[line] = true
		max[k] = maxInt(max[k], cnt)
	}
	for k, w := range want {
		if max[k] != w {
			t.Errorf("key %s: highest count %d, want %d", k, max[k], w)
		}
	}
	if len(max) != len(want) {
		t.Errorf("%d keys in the output, want %d", len(max), len(want))
	}
}

func maxInt(a, b int) int {
	if a > b {
		return a
	}
	return b
}

// TestSkipOnePoisonRecordIn100000 runs 100,000 lines through a keyed
// running count whose reduce panics on one of them: with skip the job ends
// with 99,999 results, every count exactly once (the accumulators the Go
// SDK caches in guest memory survived the rebuilds) and a count of 1.
func TestSkipOnePoisonRecordIn100000(t *testing.T) {
	const n, bad = 100_000, 61_234
	mod := testGuest(t)
	store := openStore(t)
	data := poisonInput(n, bad)
	put(t, store, "in/x.txt", data)
	for _, p := range []int{1, 2} {
		t.Run(fmt.Sprintf("p=%d", p), func(t *testing.T) {
			j := job{g: plan(t, mod, "poisonsum"), mod: mod, args: []string{"poisonsum"}, p: p,
				mgrs: []*exchange.Manager{newManager(t)}, store: store, splits: cut("in/x.txt", int64(len(data)), 300_000),
				conf: poisonConf(t, jobconfig.KeyPoisonRecords, "skip", jobconfig.KeyPoisonMaxPerMillion, "10")}
			res := j.run(t, context.Background())
			if len(res.errs) > 0 {
				t.Fatal(res.errs)
			}
			if len(res.collected) != n-1 {
				t.Fatalf("%d results, want %d", len(res.collected), n-1)
			}
			checkRunningCounts(t, res.collected, n, bad)
			if got := res.accs[AccPoisonSkipped]; got != 1 {
				t.Errorf("accumulator %s = %d, want 1 (all: %v)", AccPoisonSkipped, got, res.accs)
			}
		})
	}
}

// TestPoisonRateFailsTheJob: more poison records than max-per-million
// allow fail the task anyway, saying which key to raise.
func TestPoisonRateFailsTheJob(t *testing.T) {
	mod := testGuest(t)
	store := openStore(t)
	data := []byte(strings.Repeat("fine\nboom\n", 20))
	put(t, store, "in/x.txt", data)
	j := job{g: plan(t, mod, "panic"), mod: mod, args: []string{"panic"}, p: 1,
		mgrs: []*exchange.Manager{newManager(t)}, store: store, splits: cut("in/x.txt", int64(len(data)), 1000),
		conf: poisonConf(t, jobconfig.KeyPoisonRecords, "skip", jobconfig.KeyPoisonMaxCount, "3", jobconfig.KeyPoisonMaxPerMillion, "1000000")}
	res := j.run(t, context.Background())
	if len(res.errs) != 1 {
		t.Fatalf("errors %v, want one", res.errs)
	}
	err := res.errs[0]
	if !strings.Contains(err.Error(), "4 poison records") || !strings.Contains(err.Error(), jobconfig.KeyPoisonMaxCount+"=3") ||
		!errors.Is(err, wasmhost.ErrGuestFailed) {
		t.Fatalf("error %v", err)
	}
}

// TestFailNamesTheRecordOffset: with the default policy the task fails,
// naming the byte offset of the record that failed the guest.
func TestFailNamesTheRecordOffset(t *testing.T) {
	mod := testGuest(t)
	store := openStore(t)
	var b bytes.Buffer
	for i := 0; i < 5000; i++ {
		b.WriteString("fine\n")
	}
	off := b.Len()
	b.WriteString("boom\nfine\n")
	data := b.Bytes()
	put(t, store, "in/x.txt", data)
	j := job{g: plan(t, mod, "panic"), mod: mod, args: []string{"panic"}, p: 1,
		mgrs: []*exchange.Manager{newManager(t)}, store: store, splits: cut("in/x.txt", int64(len(data)), 1<<20)}
	res := j.run(t, context.Background())
	if len(res.errs) != 1 {
		t.Fatalf("errors %v, want one", res.errs)
	}
	err := res.errs[0]
	want := fmt.Sprintf("the record at byte offset %d of in/x.txt failed the guest", off)
	if !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), jobconfig.KeyPoisonRecords+"=skip") {
		t.Fatalf("error %v\nwant it to contain %q", err, want)
	}
	var ge *wasmhost.GuestError
	if !errors.As(err, &ge) || !strings.Contains(ge.Message, "nil map") {
		t.Fatalf("error %v is not the guest's panic", err)
	}
}

// TestFailNamesTheInputRecord: behind an exchange the position is the
// input channel's record number.
func TestFailNamesTheInputRecord(t *testing.T) {
	mod := testGuest(t)
	store := openStore(t)
	data := poisonInput(3000, 2345)
	put(t, store, "in/x.txt", data)
	j := job{g: plan(t, mod, "poisonsum"), mod: mod, args: []string{"poisonsum"}, p: 1,
		mgrs: []*exchange.Manager{newManager(t)}, store: store, splits: cut("in/x.txt", int64(len(data)), 1<<20)}
	res := j.run(t, context.Background())
	if len(res.errs) == 0 {
		t.Fatal("the job did not fail")
	}
	var found bool
	for _, err := range res.errs {
		if strings.Contains(err.Error(), "the record at input 0 (result ") && strings.Contains(err.Error(), "record 2345 from producer subtask 0") {
			found = true
		}
	}
	if !found {
		t.Fatalf("no error names input record 2345: %v", res.errs)
	}
}

// TestDeadLetterOnePoisonRecord: with dead-letter the job goes on and
// exactly one dead-letter record, in a file-sink part, holds the record
// and its trap with the guest's stack.
func TestDeadLetterOnePoisonRecord(t *testing.T) {
	const n, bad = 20_000, 7_777
	mod := testGuest(t)
	store := openStore(t)
	data := poisonInput(n, bad)
	put(t, store, "in/x.txt", data)
	j := job{g: plan(t, mod, "poisonsum"), mod: mod, args: []string{"poisonsum"}, p: 2,
		mgrs: []*exchange.Manager{newManager(t)}, store: store, splits: cut("in/x.txt", int64(len(data)), 50_000),
		conf: poisonConf(t, jobconfig.KeyPoisonRecords, "dead-letter", jobconfig.KeyDeadLetterPath, "dead/letters")}
	res := j.run(t, context.Background())
	if len(res.errs) > 0 {
		t.Fatal(res.errs)
	}
	checkRunningCounts(t, res.collected, n, bad)
	if got := res.accs[AccPoisonDeadLettered]; got != 1 {
		t.Errorf("accumulator %s = %d, want 1", AccPoisonDeadLettered, got)
	}
	var lines []string
	for _, p := range res.parts {
		if !strings.Contains(p.Final, "/files/dead/letters/") {
			t.Errorf("part %s -> %s is not under the dead-letter path", p.Pending, p.Final)
		}
		rc, err := store.Get(context.Background(), p.Pending)
		if err != nil {
			t.Fatal(err)
		}
		b, err := io.ReadAll(rc)
		rc.Close()
		if err != nil {
			t.Fatal(err)
		}
		sc := bufio.NewScanner(bytes.NewReader(b))
		sc.Buffer(nil, 1<<20)
		for sc.Scan() {
			lines = append(lines, sc.Text())
		}
	}
	if len(lines) != 1 {
		t.Fatalf("%d dead-letter records, want 1: %q", len(lines), lines)
	}
	var d deadLetterRecord
	if err := sonic.ConfigStd.UnmarshalFromString(lines[0], &d); err != nil {
		t.Fatal(err)
	}
	if d.ValueText == nil || *d.ValueText != "boom" || string(d.Key) != "boom" || d.Module != mod.Digest() || d.Job != "job1" ||
		!strings.Contains(d.Message, "poison record boom") || !strings.Contains(d.Stack, "goroutine") || d.Cause != wasmhost.ErrGuestFailed.Error() ||
		len(d.Operators) == 0 || d.Operators[0] != "count" || d.Input == nil || d.Record == nil {
		t.Fatalf("dead-letter record %s", lines[0])
	}
}

// TestSkipAcrossCheckpointsAndRestore: the rebuild after a poison record
// starts from the last checkpoint's snapshot (not the task's start), and
// the skipped count travels in the checkpoint, so a restored task reports
// the skips before it too, once each.
func TestSkipAcrossCheckpointsAndRestore(t *testing.T) {
	mod := testGuest(t)
	chain := chainOf(t, plan(t, mod, "poisonsum"), "count")
	store := openStore(t)
	m := newManager(t)
	ctx := context.Background()
	acks := &fakeAcks{}
	ctl := NewControl()
	conf := poisonConf(t, jobconfig.KeyPoisonRecords, "skip", jobconfig.KeyPoisonMaxPerMillion, "1000000")
	spec := Spec{
		ExecutionID: "count-0", JobID: "job1", Tenant: "acme", ModuleDigest: mod.Digest(), Args: []string{"poisonsum"},
		Chain: chain, Parallelism: 1, MaxParallelism: 128, Config: conf,
		Inputs: []control.InputSpec{{ResultID: "in", Producers: 1}},
	}
	run := start(ctx, spec, Deps{Modules: oneModule{mod}, Blob: store, Exchange: m, Control: ctl, Checkpoints: acks})
	w := writer(t, m, "in", 0, 1, jobgraph.Forward)
	must(t, w.Write(ctx, keyed("a", "a", "boom", "a")))
	must(t, w.EmitBarrier(ctx, 1))
	testutil.CheckFor(t, 30*time.Second, 5*time.Millisecond, func() error { return acks.acked(1) })
	must(t, w.Write(ctx, keyed("a", "b", "boom", "a", "b")))
	must(t, w.EmitBarrier(ctx, 2))
	testutil.CheckFor(t, 30*time.Second, 5*time.Millisecond, func() error { return acks.acked(2) })
	must(t, w.Write(ctx, keyed("a", "boom")))
	must(t, w.Finish(ctx))
	res := run.wait(t)
	ack1, _ := acks.ack(1)
	ack, _ := acks.ack(2)
	if got, want := collected(res, ack1, ack), []string{"a\t1", "a\t2", "a\t3", "a\t4", "a\t5", "a\t6", "b\t1", "b\t2"}; !slices.Equal(got, want) {
		t.Fatalf("collected %q, want %q", got, want)
	}
	if got := res.Accumulators[AccPoisonSkipped]; got != 3 {
		t.Fatalf("skipped %d, want 3", got)
	}

	// Restored from checkpoint 2: two skips before it, one after.
	spec2 := spec
	spec2.ExecutionID = "count-restored"
	spec2.Inputs = []control.InputSpec{{ResultID: "in2", Producers: 1}}
	spec2.Restore = &checkpoint.TaskRestore{CheckpointID: 2, States: []checkpoint.StateHandle{*ack.State}}
	run2 := start(ctx, spec2, Deps{Modules: oneModule{mod}, Blob: store, Exchange: m})
	w2 := writer(t, m, "in2", 0, 1, jobgraph.Forward)
	must(t, w2.Write(ctx, keyed("boom", "a", "b")))
	must(t, w2.Finish(ctx))
	res2 := run2.wait(t)
	if got, want := collected(res2, ack1, ack), []string{"a\t1", "a\t2", "a\t3", "a\t4", "a\t5", "a\t6", "b\t1", "b\t2", "b\t3"}; !slices.Equal(got, want) {
		t.Fatalf("after restore: %q, want %q", got, want)
	}
	if got := res2.Accumulators[AccPoisonSkipped]; got != 3 {
		t.Fatalf("skipped %d after restore, want 3", got)
	}
}

// TestOperatorOverridesThePolicy: an operator's SetPoisonRecords(skip)
// beats the job's default fail.
func TestOperatorOverridesThePolicy(t *testing.T) {
	mod := testGuest(t)
	store := openStore(t)
	data := []byte(strings.Repeat("fine\n", 3000) + "boom\n" + strings.Repeat("fine\n", 10))
	put(t, store, "in/x.txt", data)
	g := plan(t, mod, "poisonop")
	j := job{g: g, mod: mod, args: []string{"poisonop"}, p: 1, mgrs: []*exchange.Manager{newManager(t)}, store: store,
		splits: cut("in/x.txt", int64(len(data)), 1<<20)}
	res := j.run(t, context.Background())
	if len(res.errs) > 0 {
		t.Fatal(res.errs)
	}
	if len(res.collected) != 3010 || res.accs[AccPoisonSkipped] != 1 {
		t.Fatalf("%d results and %d skipped, want 3010 and 1", len(res.collected), res.accs[AccPoisonSkipped])
	}
}

// BenchmarkPoisonPolicy is what skip costs when nothing is poison: 100,000
// lines through the keyed running count (text source, exchange, reduce,
// collect), with fail (nothing kept) and skip (output held per call, input
// kept since the last checkpoint). Compare the two ns/op of one run.
func BenchmarkPoisonPolicy(b *testing.B) {
	mod := testGuest(b)
	store := openStore(b)
	data := poisonInput(100_000, -1)
	put(b, store, "in/x.txt", data)
	for _, policy := range []string{"fail", "skip"} {
		b.Run(policy, func(b *testing.B) {
			conf, err := jobconfig.Parse(map[string]string{jobconfig.KeyPoisonRecords: policy})
			if err != nil {
				b.Fatal(err)
			}
			j := job{g: plan(b, mod, "poisonsum"), mod: mod, args: []string{"poisonsum"}, p: 1,
				mgrs: []*exchange.Manager{newManager(b)}, store: store, splits: cut("in/x.txt", int64(len(data)), 1<<20), conf: conf, noMetrics: true}
			for b.Loop() {
				res := j.run(b, context.Background())
				if len(res.errs) > 0 || len(res.collected) != 100_000 {
					b.Fatalf("%d results, errors %v", len(res.collected), res.errs)
				}
			}
		})
	}
}

// TestDeadLetterPartsGoWithCheckpoints: a dead-letter record written before
// a barrier is in a part the checkpoint's acknowledgement lists (so the
// JobManager commits it with that checkpoint, and a restore from it never
// writes it again), and once that checkpoint completed the task does not
// hand it back at the end; one written after is handed back.
func TestDeadLetterPartsGoWithCheckpoints(t *testing.T) {
	mod := testGuest(t)
	chain := chainOf(t, plan(t, mod, "poisonsum"), "count")
	store := openStore(t)
	m := newManager(t)
	ctx := context.Background()
	acks := &fakeAcks{}
	ctl := NewControl()
	spec := Spec{
		ExecutionID: "count-0", JobID: "job1", Tenant: "acme", ModuleDigest: mod.Digest(), Args: []string{"poisonsum"},
		Chain: chain, Parallelism: 1, MaxParallelism: 128, Attempt: 3,
		Config: poisonConf(t, jobconfig.KeyPoisonRecords, "dead-letter", jobconfig.KeyDeadLetterPath, "dead",
			jobconfig.KeyPoisonMaxPerMillion, "1000000"),
		Inputs: []control.InputSpec{{ResultID: "in", Producers: 1}},
	}
	run := start(ctx, spec, Deps{Modules: oneModule{mod}, Blob: store, Exchange: m, Control: ctl, Checkpoints: acks})
	w := writer(t, m, "in", 0, 1, jobgraph.Forward)
	must(t, w.Write(ctx, keyed("a", "boom", "a")))
	must(t, w.EmitBarrier(ctx, 1))
	testutil.CheckFor(t, 30*time.Second, 5*time.Millisecond, func() error { return acks.acked(1) })
	must(t, ctl.Notify(1, true))
	must(t, w.Write(ctx, keyed("boom", "b")))
	must(t, w.Finish(ctx))
	res := run.wait(t)
	ack, _ := acks.ack(1)
	if len(ack.SinkParts) != 1 || !strings.Contains(ack.SinkParts[0].Final, "/files/dead/part-job1-dead-letter-") ||
		!strings.HasSuffix(ack.SinkParts[0].Final, "-a3-00000000") {
		t.Fatalf("checkpoint 1 lists parts %+v, want one dead-letter part of attempt 3", ack.SinkParts)
	}
	if len(res.SinkParts) != 1 || res.SinkParts[0].Final == ack.SinkParts[0].Final {
		t.Fatalf("the task hands back %+v, want only the part after checkpoint 1", res.SinkParts)
	}
	for _, p := range append(ack.SinkParts, res.SinkParts...) {
		rc, err := store.Get(ctx, p.Pending)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(rc)
		rc.Close()
		if bytes.Count(b, []byte("\n")) != 1 || !bytes.Contains(b, []byte(`"value_text":"boom"`)) {
			t.Fatalf("part %s holds %q, want one dead-letter record", p.Pending, b)
		}
	}
	if got := res.Accumulators[AccPoisonDeadLettered]; got != 2 {
		t.Fatalf("dead-lettered %d, want 2", got)
	}
}
