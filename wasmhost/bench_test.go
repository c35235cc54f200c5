package wasmhost

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/abi"
	"github.com/sluicehq/sluice/wasmhost/internal/benchfn"
)

// benchBatch is the map benchmark's input: records of 100-byte values.
func benchBatch(n int) []abi.Record {
	recs := make([]abi.Record, n)
	for i := range recs {
		v := make([]byte, 100)
		for j := range v {
			v[j] = "abcdefghijklmnopqrstuvwxyz ABCDEFGHIJ0123456789"[(i+j)%47]
		}
		recs[i].Value = v
	}
	return recs
}

// nativeMap is the baseline: the same function called natively on the
// same records, as a native operator would run it: each output goes into a
// per-batch arena and the batch's output records go to a consumer in one
// call, as Emit receives them from the guest.
type nativeMap struct {
	fn      func(dst []byte, r abi.Record) []byte
	arena   []byte
	outs    []abi.Record
	emitted int
}

func (n *nativeMap) process(recs []abi.Record) {
	n.arena, n.outs = n.arena[:0], n.outs[:0]
	for i := range recs {
		start := len(n.arena)
		n.arena = n.fn(n.arena, recs[i])
		n.outs = append(n.outs, abi.Record{Value: n.arena[start:len(n.arena):len(n.arena)]})
	}
	n.emitted += len(n.outs)
}

// codecMap is the baseline the benchmark used first: nativeMap plus the
// batch encoding in and out that the ABI path has (encode the input,
// decode it, map each record, encode the output, decode it for the
// consumer). Its ratio shows what the sandbox costs beyond the encoding.
type codecMap struct {
	fn           func(dst []byte, r abi.Record) []byte
	in, out, buf []byte
	recs, outs   []abi.Record
	emitted      int
}

func (n *codecMap) process(recs []abi.Record) {
	n.in = abi.AppendBatch(n.in[:0], recs)
	n.recs, _ = abi.DecodeBatch(n.recs[:0], n.in)
	n.out = append(n.out[:0], 0, 0, 0, 0)
	for i := range n.recs {
		r := n.recs[i]
		n.buf = n.fn(n.buf[:0], r)
		r.Value = n.buf
		n.out = abi.AppendRecord(n.out, &r)
	}
	putCount(n.out, len(n.recs))
	n.outs, _ = abi.DecodeBatch(n.outs[:0], n.out)
	n.emitted += len(n.outs)
}

func putCount(b []byte, n int) {
	b[0], b[1], b[2], b[3] = byte(n), byte(n>>8), byte(n>>16), byte(n>>24)
}

// measure runs f for at least d and returns its time per call.
func measure(d time.Duration, f func()) time.Duration {
	f()
	n := 0
	start := time.Now()
	for time.Since(start) < d {
		f()
		n++
	}
	return time.Since(start) / time.Duration(n)
}

// BenchmarkMapABI maps batches of 100-byte records through the ABI (one
// process call in, one emit out per batch) and reports native/abi: the time
// the same function takes called natively on the same records (nativeMap),
// over the time through the sandbox (1 = no overhead); and codec/abi, the
// same with the batch encoding in and out added to the native side
// (codecMap). Three functions:
//
//   - upper: ASCII upper-casing, a realistic small map;
//   - identity: returns the record, so the figure is the ABI's own cost;
//   - compute: upper-cases each record 100 times, so the figure is how fast
//     Go's wasm code runs in wazero, nearly without the boundary.
func BenchmarkMapABI(b *testing.B) {
	ctx := context.Background()
	upper := func(dst []byte, r abi.Record) []byte { return benchfn.Upper(dst, r.Value) }
	fns := []struct {
		name, mode string
		native     func(dst []byte, r abi.Record) []byte
		sizes      []int
	}{
		{"upper", "bench", upper, []int{100, 1000, 10000}},
		{"identity", "identity", func(dst []byte, r abi.Record) []byte { return append(dst, r.Value...) }, []int{1000}},
		{"compute", "bench-compute", func(dst []byte, r abi.Record) []byte {
			for i := 0; i < 100; i++ {
				dst = benchfn.Upper(dst[:0], r.Value)
			}
			return dst
		}, []int{100}},
	}
	for _, fn := range fns {
		for _, size := range fn.sizes {
			b.Run(fn.name+"/"+itoa(size)+"records", func(b *testing.B) {
				recs := benchBatch(size)
				emitted := 0
				tt := openTask(b, []string{fn.mode}, []int{2}, TaskConfig{Emit: func(out []abi.Record) error {
					emitted += len(out)
					return nil
				}})
				native := nativeMap{fn: fn.native}
				nativeT := measure(300*time.Millisecond, func() { native.process(recs) })
				codec := codecMap{fn: fn.native}
				codecT := measure(300*time.Millisecond, func() { codec.process(recs) })
				if native.emitted == 0 || codec.emitted == 0 {
					b.Fatal("the baselines emitted nothing")
				}
				b.SetBytes(int64(100 * size))
				b.ResetTimer()
				start := time.Now()
				for i := 0; i < b.N; i++ {
					if err := tt.in.Process(ctx, recs); err != nil {
						b.Fatal(err)
					}
				}
				abiT := time.Since(start) / time.Duration(b.N)
				b.StopTimer()
				if emitted != b.N*size {
					b.Fatalf("emitted %d records, want %d", emitted, b.N*size)
				}
				b.ReportMetric(float64(nativeT)/float64(abiT), "native/abi")
				b.ReportMetric(float64(codecT)/float64(abiT), "codec/abi")
				b.ReportMetric(float64(abiT.Nanoseconds())/float64(size), "ns/record")
				b.ReportMetric(float64(nativeT.Nanoseconds())/float64(size), "native-ns/record")
			})
		}
	}
}

// BenchmarkCompile compiles the test guest from the on-disk cache in a new
// runtime (as a restarted TaskManager would) and reports the ratio to a cold
// compile, measured in the same run.
func BenchmarkCompile(b *testing.B) {
	testGuest(b)
	ctx := context.Background()
	compile := func(dir string) time.Duration {
		start := time.Now()
		rt, err := NewRuntime(ctx, NewRuntimeConfig().WithCacheDir(dir))
		if err != nil {
			b.Fatal(err)
		}
		if _, err := rt.Compile(ctx, shared.wasm); err != nil {
			b.Fatal(err)
		}
		d := time.Since(start)
		rt.Close(ctx)
		return d
	}
	cold := func() time.Duration {
		dir, err := os.MkdirTemp("", "sluice-bench-cold-")
		if err != nil {
			b.Fatal(err)
		}
		defer os.RemoveAll(dir)
		return compile(dir)
	}
	coldT := cold()
	warmDir := b.TempDir()
	compile(warmDir) // populate
	b.ResetTimer()
	start := time.Now()
	for i := 0; i < b.N; i++ {
		compile(warmDir)
	}
	warmT := time.Since(start) / time.Duration(b.N)
	b.StopTimer()
	b.ReportMetric(float64(warmT)/float64(coldT), "cached/cold")
	b.ReportMetric(coldT.Seconds()*1000, "cold-ms")
	b.ReportMetric(warmT.Seconds()*1000, "cached-ms")
}

// BenchmarkInstantiate measures what a task start costs in wasmhost:
// instantiate the compiled guest (running the Go runtime's initialization),
// open the task (the guest rebuilds its plan), and close it.
func BenchmarkInstantiate(b *testing.B) {
	_, mod := testGuest(b)
	ctx := context.Background()
	g, err := mod.Plan(ctx, []string{"identity"}, Limits{})
	if err != nil {
		b.Fatal(err)
	}
	cfg := TaskConfig{Parallelism: 1, Chain: g.Vertices[1:2], Args: []string{"identity"}, Emit: func([]abi.Record) error { return nil }}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		in, err := mod.Instantiate(ctx, cfg)
		if err != nil {
			b.Fatal(err)
		}
		if err := in.Open(ctx); err != nil {
			b.Fatal(err)
		}
		in.Close(ctx)
	}
}

func itoa(n int) string {
	if n == 0 {
		return "0"
	}
	var b []byte
	for ; n > 0; n /= 10 {
		b = append([]byte{byte('0' + n%10)}, b...)
	}
	return string(b)
}

// BenchmarkFuelShares runs the same map (the test guest's upper-casing, 100
// and 1000 records a batch, and its compute mode) in two runtimes, one with
// the fuel scheduler on and one with it off, alternating in rounds of 50
// calls so machine load hits both alike; x_on_over_off is the throughput
// with it on over off (1 = free).
func BenchmarkFuelShares(b *testing.B) {
	ctx := context.Background()
	_, _ = testGuest(b)
	off, err := NewRuntime(ctx, NewRuntimeConfig().WithCacheDir(cacheDir()).WithFuelShares(false))
	if err != nil {
		b.Fatal(err)
	}
	defer off.Close(ctx)
	modOff, err := off.Compile(ctx, shared.wasm)
	if err != nil {
		b.Fatal(err)
	}
	for _, c := range []struct {
		mode string
		size int
	}{{"bench", 100}, {"bench", 1000}, {"bench-compute", 100}} {
		b.Run(c.mode+"/"+itoa(c.size)+"records", func(b *testing.B) {
			recs := benchBatch(c.size)
			emit := TaskConfig{Tenant: "bench", Emit: func([]abi.Record) error { return nil }}
			on := openTask(b, []string{c.mode}, []int{2}, emit)
			offT := openTaskOn(b, modOff, []string{c.mode}, []int{2}, emit)
			round := func(in *Instance) time.Duration {
				t0 := time.Now()
				for range 50 {
					if err := in.Process(ctx, recs); err != nil {
						b.Fatal(err)
					}
				}
				return time.Since(t0)
			}
			round(on.in)
			round(offT.in)
			var tOn, tOff time.Duration
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				if i%2 == 0 {
					tOn += round(on.in)
					tOff += round(offT.in)
				} else {
					tOff += round(offT.in)
					tOn += round(on.in)
				}
			}
			b.StopTimer()
			b.ReportMetric(float64(tOff)/float64(tOn), "x_on_over_off")
		})
	}
}
