package exchange

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/abi"
	"github.com/sluicehq/sluice/internal/control"
	"github.com/sluicehq/sluice/internal/jobgraph"
	"github.com/sluicehq/sluice/internal/tlsconf"
	"github.com/sluicehq/sluice/internal/tlsconf/tlsconftest"
)

// tlsConfig is the data-port configuration of a member holding src, as
// the TaskManager sets it.
func tlsConfig(src *tlsconf.Source) Config {
	return Config{ServerTLS: src.ServerConfig(tls.RequireAndVerifyClientCert), ClientTLS: src.ClientConfig}
}

// send opens result on consumer, writes two records from producer and
// returns what arrived, or the first error.
func send(t *testing.T, producer, consumer *Manager, result string) ([]got, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	g, err := consumer.OpenInput(ctx, control.InputSpec{ResultID: result, Producers: 1}, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	w, err := producer.OpenOutput(ctx, control.OutputSpec{ResultID: result, Partitioner: jobgraph.Forward, Targets: []string{consumer.Addr()}}, 0, 0)
	if err != nil {
		return nil, err
	}
	defer w.Close()
	if err := w.Write(ctx, []abi.Record{rec("", "a"), rec("", "b")}); err != nil {
		return nil, err
	}
	if err := w.Finish(ctx); err != nil {
		return nil, err
	}
	recs, _, err := drain(ctx, g)
	return recs, err
}

func TestTLSDataPortCarriesRecords(t *testing.T) {
	ca := tlsconftest.NewCA(t, "cluster")
	a := newManager(t, tlsConfig(ca.Source(t, t.TempDir(), "tm-a")))
	b := newManager(t, tlsConfig(ca.Source(t, t.TempDir(), "tm-b")))
	recs, err := send(t, a, b, "r")
	if err != nil || len(recs) != 2 || recs[0].value != "a" || recs[1].value != "b" {
		t.Fatalf("got %v, %v", recs, err)
	}
}

func TestTLSDataPortRefusesPlaintext(t *testing.T) {
	ca := tlsconftest.NewCA(t, "cluster")
	consumer := newManager(t, tlsConfig(ca.Source(t, t.TempDir(), "tm-a")))
	plain := newManager(t, Config{HandshakeTimeout: 30 * time.Second})
	if _, err := send(t, plain, consumer, "r"); !errors.Is(err, ErrHandshake) {
		t.Fatalf("a plaintext producer: %v, want ErrHandshake", err)
	}
	// A raw HELLO gets no frame back: the port speaks TLS only.
	nc, err := net.DialTimeout("tcp", consumer.Addr(), 30*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	nc.SetDeadline(time.Now().Add(time.Minute))
	if _, err := nc.Write(appendFrame(nil, frameHello, 0, hello{version: protocolVersion}.payload())); err != nil {
		t.Fatal(err)
	}
	var hb [headerSize]byte
	if h, err := readHeader(nc, &hb, 0); err == nil {
		t.Fatalf("a plaintext HELLO got a %s frame", frameName(h.typ))
	}
}

func TestTLSDataPortRefusesAMemberOfAnotherCA(t *testing.T) {
	ca := tlsconftest.NewCA(t, "cluster")
	other := tlsconftest.NewCA(t, "other")
	consumer := newManager(t, tlsConfig(ca.Source(t, t.TempDir(), "tm-a")))
	// The stranger trusts the cluster's CA but holds another CA's
	// certificate: the consumer refuses it.
	dir := t.TempDir()
	cert, key := other.Issue(t, dir, "stranger", "127.0.0.1")
	stranger, err := tlsconf.Load(tlsconf.Files{CA: ca.WriteCA(t, dir), Cert: cert, Key: key})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := send(t, newManager(t, tlsConfig(stranger)), consumer, "r"); err == nil {
		t.Fatal("a producer with a certificate of another CA was accepted")
	}
	// A producer that trusts another CA refuses the consumer.
	if _, err := send(t, newManager(t, tlsConfig(other.Source(t, t.TempDir(), "tm-c"))), consumer, "r2"); !errors.Is(err, ErrHandshake) || !strings.Contains(err.Error(), "certificate") {
		t.Fatalf("a producer of another CA: %v, want a certificate error", err)
	}
}

// BenchmarkExchangeTLSVsPlain measures the exchange between two Managers
// on loopback with TLS on the data port against the same without, in
// interleaved rounds of the same run (the workload of
// BenchmarkExchangeVsTCP). It reports both rates and tls/plain.
//
//	go test -run '^$' -bench ExchangeTLSVsPlain -benchtime 20000x ./tm/exchange/
func BenchmarkExchangeTLSVsPlain(b *testing.B) {
	const recSize = 100
	perBatch := (32 << 10) / (recSize + 5)
	val := make([]byte, recSize)
	for i := range val {
		val[i] = byte('a' + i%26)
	}
	batch := make([]abi.Record, perBatch)
	for i := range batch {
		batch[i] = abi.Record{Value: val}
	}
	ctx := context.Background()
	ca := tlsconftest.NewCA(b, "cluster")
	plainP, plainC := newManager(b, Config{}), newManager(b, Config{})
	tlsP := newManager(b, tlsConfig(ca.Source(b, b.TempDir(), "tm-a")))
	tlsC := newManager(b, tlsConfig(ca.Source(b, b.TempDir(), "tm-b")))
	const rounds = 5
	var plainDur, tlsDur time.Duration
	var total int64
	b.ResetTimer()
	for r := 0; r < rounds; r++ {
		n := b.N / rounds
		if r == rounds-1 {
			n = b.N - n*(rounds-1)
		}
		bytes := int64(n) * int64(perBatch*recSize)
		total += bytes
		plainDur += benchExchange(b, ctx, plainP, plainC, fmt.Sprint("plain", r), batch, n, bytes)
		tlsDur += benchExchange(b, ctx, tlsP, tlsC, fmt.Sprint("tls", r), batch, n, bytes)
	}
	b.StopTimer()
	plain := float64(total) / plainDur.Seconds()
	enc := float64(total) / tlsDur.Seconds()
	b.ReportMetric(plain/1e6, "plain_MB/s")
	b.ReportMetric(enc/1e6, "tls_MB/s")
	b.ReportMetric(enc/plain, "ratio")
}
