// Command nexmark runs queries of the Nexmark benchmark over the host's
// generated Nexmark stream (the "nexmark" source connector), written with
// the typed Go SDK (sdk/guest/typed) and the event codec of sdk/nexmark.
//
// Queries (the SQL texts of github.com/nexmark/nexmark define them):
//
//   - q0: pass-through, every bid as it is;
//   - q1: currency conversion, every bid with its price × 0.908 (integer
//     cents, truncated);
//   - q2: selection, the auction and price of every bid on an auction whose
//     id is a multiple of 123;
//   - q3: local item suggestion, every auction of category 10 with its
//     seller's name, city and state when the seller lives in OR, ID or CA,
//     an incremental keyed join (join.go);
//   - q4: average closing price per category, the changelog of an
//     updating result: an auction closes at its expiry in event time with
//     its highest bid, and each close gives its category's new average
//     (join.go);
//   - q5: hot items, in each sliding window (10 s every 2 s) the auctions
//     with the most bids (windows.go);
//   - q7: highest bid, in each tumbling window of 10 s the bids at its
//     highest price (windows.go);
//   - q8: new users, the persons who opened an auction in the tumbling
//     window of 10 s they were created in, a window join (join.go).
//
// Arguments (after `--` on the sluice command line):
//
//	--query q0|q1|q2|q3|q4|q5|q7|q8
//	                       the query (default q0)
//	--sink collect|blackhole
//	                       where results go (default collect)
//	--events N             the stream's events (default 100000; 0: unbounded)
//	--rate R               events per second (default 0: as fast as possible)
//	--seed S               the stream's seed (default 0)
//	--base-time MS         the first event's time (default 0)
//	--out-of-order G       permute groups of G events (default 1: in order)
//	--text                 results as lines of text
//	--out PATH             results through the transactional file sink to
//	                       part files under PATH (needs --text), committed
//	                       as checkpoints complete
//
// The results of q0, q1 and q7 are bids in sdk/nexmark's encoding
// (nexmark.BidCodec); those of q2 are typed.Pair(typed.Int64(),
// typed.Int64()) of auction and price. With --text they are lines:
// "auction<TAB>bidder<TAB>price<TAB>time" for q0, q1 and q7, "auction<TAB>price"
// for q2, "auction<TAB>start<TAB>end<TAB>count" for q5, "id<TAB>name<TAB>start"
// for q8, "auction<TAB>name<TAB>city<TAB>state" for q3,
// "category<TAB>auctions<TAB>average" for q4. Those of q5 are typed.WindowedCodec(typed.Int64(),
// typed.Int64()) of auction, window and count; those of q8
// typed.WindowedCodec(typed.Int64(), typed.Bytes()) of person id, window and
// name; those of q3 typed.Pair(typed.Int64(), typed.Triple(typed.String(),
// typed.String(), typed.String())) of auction, name, city and state; those
// of q4 typed.Triple(typed.Int64(), typed.Int64(), typed.Int64()) of
// category, auctions closed and average closing price.
package main

import (
	"encoding/binary"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/sluicehq/sluice/sdk/guest"
	"github.com/sluicehq/sluice/sdk/guest/typed"
	"github.com/sluicehq/sluice/sdk/nexmark"
)

func init() { guest.Job(plan) }

func main() {}

// options are the parsed arguments.
type options struct {
	query, sink string
	text        bool   // results as lines of text
	out         string // the file sink's path, "" for sink
	source      guest.NexmarkOptions
}

func plan(env *guest.Env) {
	o, err := parseArgs(env.Args())
	if err != nil {
		env.Fail(err)
		return
	}
	env.SetName("nexmark-" + o.query)
	// The events stay bytes: a bid's fields have fixed offsets in its
	// encoding (sdk/nexmark), so q0 keeps the bids as they are (a bid
	// event's encoding is nexmark.BidCodec's), q1 rewrites the price of a
	// copy in place and q2 reads two fields, none decoding the event.
	src := env.NexmarkSource("events", o.source)
	if o.query == "q4" || o.query == "q5" || o.query == "q7" || o.query == "q8" {
		src = src.WithWatermarks(guest.BoundedOutOfOrderness(windowOutOfOrderness))
	}
	events := typed.Of(env, src, typed.Bytes())
	var out sink
	switch o.query {
	case "q0":
		out = bidLines(o, events.Filter("q0", nexmark.IsBid))
	case "q1":
		var buf []byte // the SDK copies what is emitted
		out = bidLines(o, typed.FlatMap(events, "q1", typed.Bytes(), func(e []byte, out *typed.Emitter[[]byte]) {
			if nexmark.IsBid(e) {
				buf = append(buf[:0], e...)
				price := int64(binary.LittleEndian.Uint64(e[nexmark.BidPriceOffset:]))
				binary.LittleEndian.PutUint64(buf[nexmark.BidPriceOffset:], uint64(toEuro(price)))
				out.Emit(buf)
			}
		}))
	case "q5":
		hot := q5(events)
		out = hot
		if o.text {
			out = typed.Format(hot, "text", func(line []byte, h typed.Windowed[int64, int64]) []byte {
				for i, v := range []int64{h.Key, h.Window.Start, h.Window.End, h.Value} {
					if i > 0 {
						line = append(line, '\t')
					}
					line = strconv.AppendInt(line, v, 10)
				}
				return line
			})
		}
	case "q7":
		out = bidLines(o, q7(events))
	case "q3":
		q3 := q3(env, src)
		out = q3
		if o.text {
			out = typed.Format(q3, "text", func(line []byte, r typed.Tuple2[int64, typed.Tuple3[string, string, string]]) []byte {
				line = strconv.AppendInt(line, r.A, 10)
				for _, f := range []string{r.B.A, r.B.B, r.B.C} {
					line = append(append(line, '\t'), f...)
				}
				return line
			})
		}
	case "q4":
		q4 := q4(env, src)
		out = q4
		if o.text {
			out = typed.Format(q4, "text", func(line []byte, r typed.Tuple3[int64, int64, int64]) []byte {
				for i, v := range []int64{r.A, r.B, r.C} {
					if i > 0 {
						line = append(line, '\t')
					}
					line = strconv.AppendInt(line, v, 10)
				}
				return line
			})
		}
	case "q8":
		q8 := q8(env, src)
		out = q8
		if o.text {
			out = typed.Format(q8, "text", func(line []byte, r typed.Windowed[int64, []byte]) []byte {
				line = append(append(strconv.AppendInt(line, r.Key, 10), '\t'), r.Value...)
				return strconv.AppendInt(append(line, '\t'), r.Window.Start, 10)
			})
		}
	case "q2":
		q2 := typed.FlatMap(events, "q2", typed.Pair(typed.Int64(), typed.Int64()),
			func(e []byte, out *typed.Emitter[typed.Tuple2[int64, int64]]) {
				if !nexmark.IsBid(e) {
					return
				}
				if auction := int64(binary.LittleEndian.Uint64(e[nexmark.BidAuctionOffset:])); auction%123 == 0 {
					out.Emit(typed.Tuple2[int64, int64]{A: auction, B: int64(binary.LittleEndian.Uint64(e[nexmark.BidPriceOffset:]))})
				}
			})
		out = q2
		if o.text {
			out = typed.Format(q2, "text", func(line []byte, r typed.Tuple2[int64, int64]) []byte {
				return strconv.AppendInt(append(strconv.AppendInt(line, r.A, 10), '\t'), r.B, 10)
			})
		}
	}
	switch {
	case o.out != "":
		out.WriteFiles("out", o.out)
	case o.sink == "blackhole":
		out.Blackhole("out")
	default:
		out.Collect("out")
	}
}

// sink is a query's result stream, ready for its sink.
type sink interface {
	Collect(name string) *guest.Stream
	Blackhole(name string) *guest.Stream
	WriteFiles(name, path string) *guest.Stream
}

// bidLines turns encoded bids into lines "auction<TAB>bidder<TAB>price<TAB>time"
// when --text asks for them, and leaves them as they are otherwise.
func bidLines(o options, bids *typed.Stream[[]byte]) sink {
	if !o.text {
		return bids
	}
	return typed.Format(bids, "text", func(line []byte, b []byte) []byte {
		for i, off := range []int{nexmark.BidAuctionOffset, nexmark.BidBidderOffset, nexmark.BidPriceOffset, nexmark.BidDateTimeOffset} {
			if i > 0 {
				line = append(line, '\t')
			}
			line = strconv.AppendInt(line, int64(binary.LittleEndian.Uint64(b[off:])), 10)
		}
		return line
	})
}

// toEuro is q1's conversion, 0.908 × price, in integer cents.
func toEuro(price int64) int64 { return price * 908 / 1000 }

const usage = "usage: nexmark [--query q0|q1|q2|q3|q4|q5|q7|q8] [--sink collect|blackhole] [--events N] [--rate R] [--seed S] [--base-time MS] [--out-of-order G] [--text] [--out PATH]"

func parseArgs(args []string) (options, error) {
	o := options{query: "q0", sink: "collect", source: guest.NexmarkOptions{Events: 100_000}}
	for i := 0; i < len(args); i++ {
		arg := args[i]
		if arg == "--text" { // a switch: no value
			o.text = true
			continue
		}
		name, val, inline := strings.Cut(arg, "=")
		if !inline {
			if i+1 == len(args) {
				return o, fmt.Errorf("%s needs a value\n%s", name, usage)
			}
			i++
			val = args[i]
		}
		var err error
		switch name {
		case "--query":
			o.query = val
			if val != "q0" && val != "q1" && val != "q2" && val != "q3" && val != "q4" && val != "q5" && val != "q7" && val != "q8" {
				err = errors.New("--query: this example has q0, q1, q2, q3, q4, q5, q7 and q8")
			}
		case "--sink":
			o.sink = val
			if val != "collect" && val != "blackhole" {
				err = errors.New("--sink: collect or blackhole")
			}
		case "--events":
			o.source.Events, err = nonNegative(name, val)
		case "--rate":
			o.source.Rate, err = nonNegative(name, val)
		case "--base-time":
			o.source.BaseTime, err = nonNegative(name, val)
		case "--out-of-order":
			o.source.OutOfOrderGroup, err = nonNegative(name, val)
		case "--text":
			o.text, err = strconv.ParseBool(val)
		case "--out":
			o.out = val
			if val == "" {
				err = errors.New("--out: give the file sink's path")
			}
		case "--seed":
			o.source.Seed, err = strconv.ParseUint(val, 10, 64)
			if err != nil {
				err = fmt.Errorf("--seed %q: want an unsigned integer", val)
			}
		default:
			err = fmt.Errorf("unknown argument %q", arg)
		}
		if err != nil {
			return o, fmt.Errorf("%w\n%s", err, usage)
		}
	}
	if o.out != "" && !o.text {
		return o, fmt.Errorf("--out writes lines of text: add --text\n%s", usage)
	}
	return o, nil
}

func nonNegative(name, val string) (int64, error) {
	n, err := strconv.ParseInt(val, 10, 64)
	if err != nil || n < 0 {
		return 0, fmt.Errorf("%s %q: want a non-negative integer", name, val)
	}
	return n, nil
}
