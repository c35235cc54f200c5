// Command kafkabids counts the bids of each auction in tumbling event-time
// windows, from a Kafka topic of JSON bids to a Kafka topic of JSON counts,
// exactly once.
//
// Each input record's value is a bid, {"auction": 1001, "bidder": 7,
// "price": 120}; its Kafka timestamp is when the bid was made (event
// time). A record that is not such a bid is dropped and counted in the
// "bad-bids" accumulator. For each auction and window the job produces one
// record, keyed by the auction, whose value is
//
//	{"auction":1001,"start":1700000000000,"end":1700000010000,"bids":3}
//
// and whose timestamp is the window's last millisecond. The sink is
// transactional by default: the counts of a checkpoint are committed when
// it completes, so a read_committed consumer sees each window's count once
// whatever fails (the job needs checkpoints: --checkpoint-interval).
//
// Flags: --brokers host:port[,host:port] (required), --in and --out (the
// topics; bids and bid-counts), --window (10s), --out-of-orderness (2s:
// how late a bid may come behind the newest of its partition), --idle (5s:
// after that long without records a partition stops holding event time
// back; 0 never), --group (a consumer group offsets are committed to after
// each checkpoint, for monitoring), --at-least-once.
package main

import (
	"encoding/binary"
	"encoding/json"
	"flag"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/sluicehq/sluice/sdk/guest"
)

func init() { guest.Job(plan) }

func main() {}

type options struct {
	brokers, in, out, group string
	window, outOfOrder      time.Duration
	idle                    time.Duration
	atLeastOnce             bool
}

func parseArgs(args []string) (options, error) {
	var o options
	fs := flag.NewFlagSet("kafkabids", flag.ContinueOnError)
	fs.StringVar(&o.brokers, "brokers", "", "Kafka seed brokers, host:port, comma-separated (required)")
	fs.StringVar(&o.in, "in", "bids", "the topic of JSON bids")
	fs.StringVar(&o.out, "out", "bid-counts", "the topic the counts go to")
	fs.StringVar(&o.group, "group", "", "consumer group to commit offsets to after each checkpoint (none: no commits)")
	fs.DurationVar(&o.window, "window", 10*time.Second, "tumbling window size")
	fs.DurationVar(&o.outOfOrder, "out-of-orderness", 2*time.Second, "how far behind the newest bid of its partition a bid may be")
	fs.DurationVar(&o.idle, "idle", 5*time.Second, "a partition without records this long stops holding event time back (0: never)")
	fs.BoolVar(&o.atLeastOnce, "at-least-once", false, "produce at once instead of in transactions committed by checkpoints")
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	switch {
	case o.brokers == "":
		return o, fmt.Errorf("--brokers: give the Kafka seed brokers, e.g. --brokers 127.0.0.1:9092")
	case o.window < time.Millisecond:
		return o, fmt.Errorf("--window %v: want at least 1ms", o.window)
	case o.outOfOrder < 0 || o.idle < 0:
		return o, fmt.Errorf("--out-of-orderness and --idle must not be negative")
	}
	return o, nil
}

func plan(env *guest.Env) {
	o, err := parseArgs(env.Args())
	if err != nil {
		env.Fail(err)
		return
	}
	env.SetName("kafkabids")
	kafka := guest.KafkaOptions{Brokers: strings.Split(o.brokers, ",")}
	in := kafka
	in.Group = o.group
	wm := guest.BoundedOutOfOrderness(o.outOfOrder)
	if o.idle > 0 {
		wm = wm.WithIdleness(o.idle)
	}
	out := kafka
	out.AtLeastOnce = o.atLeastOnce
	env.KafkaSource("bids", []string{o.in}, in).
		WithWatermarks(wm).
		FlatMap("parse", parseBid).
		KeyBy("auction", func(r guest.Record) []byte { return r.Key }).
		Window(guest.Tumbling(o.window)).
		Aggregate("count", guest.Aggregator{Add: countBid, Result: formatCount}).
		KafkaSink("counts", o.out, out)
}

// bid is what the job reads of a bid.
type bid struct {
	Auction *int64 `json:"auction"`
}

var auction []byte

// parseBid keys a bid by its auction, keeping its time, and drops (and
// counts) a record that is not a bid.
func parseBid(r guest.Record, out *guest.Collector) {
	var b bid
	if err := json.Unmarshal(r.Value, &b); err != nil || b.Auction == nil {
		guest.Count("bad-bids", 1)
		return
	}
	auction = strconv.AppendInt(auction[:0], *b.Auction, 10)
	out.Emit(guest.Record{Key: auction, HasKey: true, Time: r.Time, HasTime: r.HasTime})
}

// countBid counts a window's bids in an 8-byte accumulator.
func countBid(acc []byte, _ guest.Record) []byte {
	if len(acc) != 8 {
		acc = make([]byte, 8)
	}
	binary.LittleEndian.PutUint64(acc, binary.LittleEndian.Uint64(acc)+1)
	return acc
}

// formatCount is a window's JSON count.
func formatCount(dst, key []byte, w guest.Window, acc []byte) []byte {
	dst = append(append(append(dst, `{"auction":`...), key...), `,"start":`...)
	dst = strconv.AppendInt(dst, w.Start, 10)
	dst = strconv.AppendInt(append(dst, `,"end":`...), w.End, 10)
	dst = strconv.AppendUint(append(dst, `,"bids":`...), binary.LittleEndian.Uint64(acc), 10)
	return append(dst, '}')
}
