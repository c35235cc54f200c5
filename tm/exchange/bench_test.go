package exchange

import (
	"context"
	"fmt"
	"io"
	"net"
	"slices"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/abi"
	"github.com/sluicehq/sluice/internal/control"
	"github.com/sluicehq/sluice/internal/jobgraph"
	"github.com/sluicehq/sluice/internal/watermark"
)

// BenchmarkExchangeVsTCP measures the exchange between two Managers on
// loopback (one producer writing ~32 KiB batches of 100-byte records as
// fast as it can, one consumer decoding them) against raw Go TCP streaming
// the same number of payload bytes over a loopback socket in 32 KiB writes,
// in the same run. Only record values count as payload (the 5 bytes of
// framing per record are the exchange's overhead). It reports both rates
// and exchange/tcp (target ≥ 0.5).
//
//	go test -run '^$' -bench ExchangeVsTCP -benchtime 20000x ./tm/exchange/
func BenchmarkExchangeVsTCP(b *testing.B) {
	const recSize = 100
	const bufSize = 32 << 10
	perBatch := bufSize / (recSize + 5)
	batch := make([]abi.Record, perBatch)
	val := make([]byte, recSize)
	for i := range val {
		val[i] = byte('a' + i%26)
	}
	for i := range batch {
		batch[i] = abi.Record{Value: val}
	}
	ctx := context.Background()
	prod := newManager(b, Config{})
	cons := newManager(b, Config{})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	defer ln.Close()

	// Both sides run in interleaved rounds, so load from elsewhere on the
	// machine hits them alike.
	const rounds = 5
	var exDur, tcpDur time.Duration
	var total int64
	b.ResetTimer()
	for r := 0; r < rounds; r++ {
		n := b.N / rounds
		if r == rounds-1 {
			n = b.N - n*(rounds-1)
		}
		bytes := int64(n) * int64(perBatch*recSize)
		total += bytes
		exDur += benchExchange(b, ctx, prod, cons, fmt.Sprint("bench", r), batch, n, bytes)
		tcpDur += benchRawTCP(b, ln, bytes)
	}
	b.StopTimer()

	ex := float64(total) / exDur.Seconds()
	raw := float64(total) / tcpDur.Seconds()
	b.ReportMetric(ex/1e6, "exchange_MB/s")
	b.ReportMetric(raw/1e6, "tcp_MB/s")
	b.ReportMetric(ex/raw, "ratio")
}

func benchExchange(b *testing.B, ctx context.Context, prod, cons *Manager, result string, batch []abi.Record, n int, total int64) time.Duration {
	g, err := cons.OpenInput(ctx, control.InputSpec{ResultID: result, Producers: 1}, 0)
	if err != nil {
		b.Fatal(err)
	}
	defer g.Close()
	w, err := prod.OpenOutput(ctx, control.OutputSpec{ResultID: result, Partitioner: jobgraph.Forward, Targets: []string{cons.Addr()}}, 0, 0)
	if err != nil {
		b.Fatal(err)
	}
	defer w.Close()
	done := make(chan error, 1)
	start := time.Now()
	go func() {
		for i := 0; i < n; i++ {
			if err := w.Write(ctx, batch); err != nil {
				done <- err
				return
			}
		}
		done <- w.Finish(ctx)
	}()
	var got int64
	for {
		bt, err := g.Next(ctx)
		if err == io.EOF {
			break
		}
		if err != nil {
			b.Fatal(err)
		}
		for i := range bt.Records {
			got += int64(len(bt.Records[i].Value))
		}
	}
	d := time.Since(start)
	if err := <-done; err != nil {
		b.Fatal(err)
	}
	if got != total {
		b.Fatalf("exchange moved %d payload bytes, want %d", got, total)
	}
	return d
}

func benchRawTCP(b *testing.B, ln net.Listener, total int64) time.Duration {
	done := make(chan error, 1)
	start := time.Now()
	go func() {
		nc, err := net.Dial("tcp", ln.Addr().String())
		if err != nil {
			done <- err
			return
		}
		defer nc.Close()
		buf := make([]byte, 32<<10)
		for left := total; left > 0; {
			n := int64(len(buf))
			if left < n {
				n = left
			}
			if _, err := nc.Write(buf[:n]); err != nil {
				done <- err
				return
			}
			left -= n
		}
		done <- nil
	}()
	nc, err := ln.Accept()
	if err != nil {
		b.Fatal(err)
	}
	defer nc.Close()
	buf := make([]byte, 32<<10)
	var got int64
	for got < total {
		n, err := nc.Read(buf)
		got += int64(n)
		if err != nil {
			b.Fatal(err)
		}
	}
	d := time.Since(start)
	if err := <-done; err != nil {
		b.Fatal(err)
	}
	return d
}

// BenchmarkFlushLatency measures how long a lone record takes from Write
// to the consumer's Next between two Managers on loopback, when nothing
// else is written: only the flush timer sends it, so the figure is the
// FlushTimeout (5 ms by default) plus the timer's lateness. It reports the
// median and the 99th percentile.
//
//	go test -run '^$' -bench FlushLatency -benchtime 400x ./tm/exchange/
func BenchmarkFlushLatency(b *testing.B) {
	ctx := context.Background()
	prod := newManager(b, Config{})
	cons := newManager(b, Config{})
	g, err := cons.OpenInput(ctx, control.InputSpec{ResultID: "lat", Producers: 1}, 0)
	if err != nil {
		b.Fatal(err)
	}
	defer g.Close()
	w, err := prod.OpenOutput(ctx, control.OutputSpec{ResultID: "lat", Partitioner: jobgraph.Forward, Targets: []string{cons.Addr()}}, 0, 0)
	if err != nil {
		b.Fatal(err)
	}
	defer w.Close()
	recs := []abi.Record{{Value: []byte("x")}}
	lat := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		start := time.Now()
		if err := w.Write(ctx, recs); err != nil {
			b.Fatal(err)
		}
		if _, err := g.Next(ctx); err != nil {
			b.Fatal(err)
		}
		lat = append(lat, time.Since(start))
	}
	b.StopTimer()
	slices.Sort(lat)
	b.ReportMetric(float64(lat[len(lat)/2].Microseconds())/1e3, "median_ms")
	b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds())/1e3, "p99_ms")
}

// BenchmarkWatermarkCost measures what in-band watermarks cost the
// exchange: one producer writes batches of 100 timestamped 64-byte records
// to one consumer over loopback (the consumer feeds every event to a
// watermark.Valve, as a task does), without watermarks and with one after
// every `every` batches, interleaved in 5 rounds. A host source emits one
// every 200 ms, far rarer than either rate here. It reports records/s off
// and the on/off ratios (1.0 = free).
//
//	go test -run '^$' -bench WatermarkCost -benchtime 20000x ./tm/exchange/
func BenchmarkWatermarkCost(b *testing.B) {
	const perBatch, recSize = 100, 64
	val := make([]byte, recSize)
	batch := make([]abi.Record, perBatch)
	for i := range batch {
		batch[i] = abi.Record{Value: val, Time: int64(i), HasTime: true}
	}
	ctx := context.Background()
	prod := newManager(b, Config{})
	cons := newManager(b, Config{})
	everies := []int{0, 100, 1}
	durs := make([]time.Duration, len(everies))
	const rounds = 5
	b.ResetTimer()
	for r := 0; r < rounds; r++ {
		n := max(b.N/rounds, 1)
		for i, every := range everies {
			durs[i] += benchWatermarks(b, ctx, prod, cons, fmt.Sprintf("wm%d-%d", r, every), batch, n, every)
		}
	}
	b.StopTimer()
	recs := float64(max(b.N/rounds, 1)*rounds*perBatch) / durs[0].Seconds()
	b.ReportMetric(recs/1e6, "Mrec/s_off")
	b.ReportMetric(durs[0].Seconds()/durs[1].Seconds(), "ratio_every100")
	b.ReportMetric(durs[0].Seconds()/durs[2].Seconds(), "ratio_every1")
}

func benchWatermarks(b *testing.B, ctx context.Context, prod, cons *Manager, result string, batch []abi.Record, n, every int) time.Duration {
	g, err := cons.OpenInput(ctx, control.InputSpec{ResultID: result, Producers: 1}, 0)
	if err != nil {
		b.Fatal(err)
	}
	defer g.Close()
	w, err := prod.OpenOutput(ctx, control.OutputSpec{ResultID: result, Partitioner: jobgraph.Forward, Targets: []string{cons.Addr()}}, 0, 0)
	if err != nil {
		b.Fatal(err)
	}
	defer w.Close()
	done := make(chan error, 1)
	start := time.Now()
	go func() {
		for i := 0; i < n; i++ {
			if err := w.Write(ctx, batch); err != nil {
				done <- err
				return
			}
			if every > 0 && i%every == every-1 {
				if err := w.EmitEvent(ctx, Event{Type: Watermark, Timestamp: int64(i)}); err != nil {
					done <- err
					return
				}
			}
		}
		done <- w.Finish(ctx)
	}()
	v := watermark.NewValve(1)
	var got int
	for {
		bt, err := g.Next(ctx)
		if err == io.EOF {
			break
		}
		if err != nil {
			b.Fatal(err)
		}
		switch bt.Event.Type {
		case 0:
			got += len(bt.Records)
		case Watermark:
			v.Watermark(0, bt.Event.Timestamp)
		case EndOfPartition:
			v.End(0)
		}
	}
	d := time.Since(start)
	if err := <-done; err != nil {
		b.Fatal(err)
	}
	if got != n*len(batch) {
		b.Fatalf("got %d records, want %d", got, n*len(batch))
	}
	return d
}
