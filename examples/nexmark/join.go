package main

import (
	"encoding/binary"
	"time"

	"github.com/sluicehq/sluice/sdk/guest"
	"github.com/sluicehq/sluice/sdk/guest/typed"
	"github.com/sluicehq/sluice/sdk/nexmark"
	"github.com/sluicehq/sluice/sdk/nexmark/reference"
)

// q8 (new users): the persons who opened an auction in the tumbling window
// of 10 s they were created in, once per person and window, as
// sdk/nexmark/reference reads it. A window join of persons (on their id)
// and auctions (on their seller).

// newUserCodec is q8's output: the person's id (key), the window and the
// person's name.
func newUserCodec() typed.Codec[typed.Windowed[int64, []byte]] {
	return typed.WindowedCodec(typed.Int64(), typed.Bytes())
}

// The join's inputs are small projections of the events, tagged with
// their kind: a person's id and name, an auction's seller.
const (
	q8Person  byte = 'P'
	q8Auction byte = 'A'
)

// q8Key is a projection's id (the person's, or the auction's seller).
func q8Key(r guest.Record) []byte { return r.Value[1:9] }

func q8(env *guest.Env, src *guest.Stream) *typed.Stream[typed.Windowed[int64, []byte]] {
	var e nexmark.Event
	var buf []byte
	// Bids (92% of the events) end here, in the source's task; only the
	// projections cross to the two sides.
	proj := src.FlatMap("q8.project", func(r guest.Record, out *guest.Collector) {
		if len(r.Value) == 0 || nexmark.EventType(r.Value[0]) == nexmark.BidEvent {
			return
		}
		if err := nexmark.DecodeEvent(r.Value, &e); err != nil {
			panic("q8: " + err.Error())
		}
		switch e.Type {
		case nexmark.PersonEvent:
			buf = binary.LittleEndian.AppendUint64(append(buf[:0], q8Person), uint64(e.Person.ID))
			buf = append(buf, e.Person.Name...)
		case nexmark.AuctionEvent:
			buf = binary.LittleEndian.AppendUint64(append(buf[:0], q8Auction), uint64(e.Auction.Seller))
		default:
			return
		}
		out.Emit(guest.Record{Value: buf, Time: r.Time, HasTime: r.HasTime})
	})
	kind := func(k byte) guest.FilterFunc { return func(r guest.Record) bool { return r.Value[0] == k } }
	persons := proj.Filter("q8.persons", kind(q8Person))
	// As the SQL groups the auctions by seller and window before the join,
	// a window keeps one auction per seller: a hot seller's hundreds would
	// otherwise each rewrite the join's growing window state.
	sellers := proj.Filter("q8.auctions", kind(q8Auction)).
		KeyBy("q8.by-seller", q8Key).
		Window(guest.Tumbling(reference.WindowMs*time.Millisecond)).
		Reduce("q8.sellers", func(first, _ []byte) []byte { return first })
	codec := newUserCodec()
	var row []byte
	joined := persons.Join(sellers, q8Key, q8Key).
		Window(guest.Tumbling(reference.WindowMs*time.Millisecond)).
		CoGroup("q8.join", func(ctx *guest.KeyedContext, w guest.Window, ps, as []guest.Record, out *guest.Collector) {
			if len(as) == 0 {
				return
			}
			for _, p := range ps {
				id := int64(binary.LittleEndian.Uint64(p.Value[1:9]))
				row = codec.Append(row[:0], typed.Windowed[int64, []byte]{Key: id, Window: w, Value: p.Value[9:]})
				out.EmitValue(row)
			}
		})
	return typed.Of(env, joined, codec)
}

// q3 (local item suggestion): every auction of category 10 with its
// seller's name, city and state, when the seller lives in OR, ID or CA,
// as sdk/nexmark/reference reads it. An incremental, unwindowed join:
// keyed by person id, a person is kept in keyed state once seen, and an
// auction that comes before its seller waits in keyed state for it; so
// the result is every matching pair whichever came first.

// localItemCodec is q3's output: the auction and the seller's name, city
// and state.
func localItemCodec() typed.Codec[typed.Tuple2[int64, typed.Tuple3[string, string, string]]] {
	return typed.Pair(typed.Int64(), typed.Triple(typed.String(), typed.String(), typed.String()))
}

// q3Category and q3State are q3's filters.
const q3Category = 10

func q3State(s []byte) bool {
	return string(s) == "OR" || string(s) == "ID" || string(s) == "CA"
}

func q3(env *guest.Env, src *guest.Stream) *typed.Stream[typed.Tuple2[int64, typed.Tuple3[string, string, string]]] {
	var e nexmark.Event
	var buf []byte
	// One stream of tagged projections, keyed by the person: a person's
	// name, city and state (as the output's Triple encodes them), an
	// auction's id.
	place := typed.Triple(typed.String(), typed.String(), typed.String())
	proj := src.FlatMap("q3.project", func(r guest.Record, out *guest.Collector) {
		if len(r.Value) == 0 || nexmark.EventType(r.Value[0]) == nexmark.BidEvent {
			return
		}
		if err := nexmark.DecodeEvent(r.Value, &e); err != nil {
			panic("q3: " + err.Error())
		}
		var id int64
		switch {
		case e.Type == nexmark.PersonEvent && q3State(e.Person.State):
			id = e.Person.ID
			buf = place.Append(append(buf[:0], q8Person), typed.Tuple3[string, string, string]{
				A: string(e.Person.Name), B: string(e.Person.City), C: string(e.Person.State)})
		case e.Type == nexmark.AuctionEvent && e.Auction.Category == q3Category:
			id = e.Auction.Seller
			buf = binary.LittleEndian.AppendUint64(append(buf[:0], q8Auction), uint64(e.Auction.ID))
		default:
			return
		}
		out.EmitKeyValue(guest.Int64(id), buf)
	})
	codec := localItemCodec()
	var row, waiting []byte
	emit := func(out *guest.Collector, auction int64, person []byte) {
		p, err := place.Decode(person)
		if err != nil {
			panic("q3: a person in keyed state: " + err.Error())
		}
		row = codec.Append(row[:0], typed.Tuple2[int64, typed.Tuple3[string, string, string]]{A: auction, B: p})
		out.EmitValue(row)
	}
	joined := proj.KeyBy("q3.by-person", func(r guest.Record) []byte { return r.Key }).
		Process("q3.join", func(ctx *guest.KeyedContext, r guest.Record, out *guest.Collector) {
			if r.Value[0] == q8Person {
				person := r.Value[1:]
				ctx.Put("person", person)
				if w, ok := ctx.Get("waiting"); ok {
					waiting = append(waiting[:0], w...)
					for ; len(waiting) >= 8; waiting = waiting[8:] {
						emit(out, int64(binary.LittleEndian.Uint64(waiting)), person)
					}
					ctx.Delete("waiting")
				}
				return
			}
			auction := int64(binary.LittleEndian.Uint64(r.Value[1:]))
			if p, ok := ctx.Get("person"); ok {
				emit(out, auction, p)
				return
			}
			w, _ := ctx.Get("waiting")
			ctx.Put("waiting", binary.LittleEndian.AppendUint64(append(waiting[:0], w...), uint64(auction)))
		})
	return typed.Of(env, joined, codec)
}

// q4 (average closing price per category): an auction's closing price is
// its highest bid between its opening and its expiry, both included; each
// category's result is the average of its auctions' closing prices, as
// sdk/nexmark/reference reads it. The SQL's result is an updating table,
// so this stream is its changelog: a row each time an auction of the
// category closes, with the number of auctions closed so far and their
// average; a category's last row (the most auctions) is its result.
//
// Keyed by auction id, a Process keeps the auction and its highest bid so
// far, and closes it on an event-time timer at its expiry: once the
// watermark reaches it, no bid at or before it is still to come. A bid
// that comes before its auction (another source subtask's, or reordered)
// waits in keyed state until the watermark passes its time, when its
// auction, which opened no later, must have come. Keyed by category, a
// Process keeps the sum and number of closing prices.

// categoryPriceCodec is q4's output: the category, its auctions closed
// with a bid so far and the average of their closing prices (an integer,
// truncated, as SQL's AVG of a BIGINT).
func categoryPriceCodec() typed.Codec[typed.Tuple3[int64, int64, int64]] {
	return typed.Triple(typed.Int64(), typed.Int64(), typed.Int64())
}

// q4's projections: an auction's opening, expiry and category, a bid's
// time and price, after the kind.
const (
	q4Auction byte = 'A'
	q4Bid     byte = 'B'
)

func q4(env *guest.Env, src *guest.Stream) *typed.Stream[typed.Tuple3[int64, int64, int64]] {
	var e nexmark.Event
	var buf, key []byte
	proj := src.FlatMap("q4.project", func(r guest.Record, out *guest.Collector) {
		var id int64
		if nexmark.IsBid(r.Value) {
			id = int64(binary.LittleEndian.Uint64(r.Value[nexmark.BidAuctionOffset:]))
			buf = append(append(buf[:0], q4Bid), r.Value[nexmark.BidDateTimeOffset:nexmark.BidDateTimeOffset+8]...)
			buf = append(buf, r.Value[nexmark.BidPriceOffset:nexmark.BidPriceOffset+8]...)
		} else {
			if len(r.Value) == 0 || nexmark.EventType(r.Value[0]) != nexmark.AuctionEvent {
				return
			}
			if err := nexmark.DecodeEvent(r.Value, &e); err != nil {
				panic("q4: " + err.Error())
			}
			id = e.Auction.ID
			buf = append(buf[:0], q4Auction)
			for _, v := range []int64{e.Auction.DateTime, e.Auction.Expires, e.Auction.Category} {
				buf = binary.LittleEndian.AppendUint64(buf, uint64(v))
			}
		}
		key = binary.LittleEndian.AppendUint64(key[:0], uint64(id))
		out.Emit(guest.Record{Key: key, HasKey: true, Value: buf, Time: r.Time, HasTime: r.HasTime})
	})
	i64 := func(b []byte, i int) int64 { return int64(binary.LittleEndian.Uint64(b[8*i:])) }
	// The state "auction" is the auction's opening, expiry, category and
	// highest bid so far (-1 before one: prices are positive); "early" the
	// times and prices of the bids that came before it.
	var auction, early []byte
	closing := proj.KeyBy("q4.by-auction", func(r guest.Record) []byte { return r.Key }).
		Process("q4.close", func(ctx *guest.KeyedContext, r guest.Record, out *guest.Collector) {
			v := r.Value[1:]
			if r.Value[0] == q4Auction {
				opens, expires := i64(v, 0), i64(v, 1)
				highest := int64(-1)
				if w, ok := ctx.Get("early"); ok {
					for ; len(w) >= 16; w = w[16:] {
						if t, p := i64(w, 0), i64(w, 1); t >= opens && t <= expires {
							highest = max(highest, p)
						}
					}
					ctx.Delete("early")
				}
				ctx.Put("auction", binary.LittleEndian.AppendUint64(append(auction[:0], v...), uint64(highest)))
				ctx.RegisterEventTimer(expires)
				return
			}
			t, p := i64(v, 0), i64(v, 1)
			a, ok := ctx.Get("auction")
			if !ok {
				w, _ := ctx.Get("early")
				early = append(append(early[:0], w...), v...)
				ctx.Put("early", early)
				ctx.RegisterEventTimer(t)
				return
			}
			if t >= i64(a, 0) && t <= i64(a, 1) && p > i64(a, 3) {
				auction = append(auction[:0], a...)
				binary.LittleEndian.PutUint64(auction[24:], uint64(p))
				ctx.Put("auction", auction)
			}
		}).
		OnEventTimer(func(ctx *guest.KeyedContext, timeMs int64, out *guest.Collector) {
			a, ok := ctx.Get("auction")
			if !ok {
				// The bids that came before their auction: it never came.
				ctx.Delete("early")
				return
			}
			if timeMs != i64(a, 1) {
				return // an early bid's timer, its auction since come
			}
			if highest := i64(a, 3); highest >= 0 {
				out.EmitKeyValue(a[16:24], a[24:32])
			}
			ctx.Delete("auction")
		})
	codec := categoryPriceCodec()
	var row []byte
	averages := closing.KeyBy("q4.by-category", func(r guest.Record) []byte { return r.Key }).
		Process("q4.average", func(ctx *guest.KeyedContext, r guest.Record, out *guest.Collector) {
			sum, _ := ctx.GetInt64("sum")
			n, _ := ctx.GetInt64("n")
			sum, n = sum+i64(r.Value, 0), n+1
			ctx.PutInt64("sum", sum)
			ctx.PutInt64("n", n)
			row = codec.Append(row[:0], typed.Tuple3[int64, int64, int64]{A: guest.AsInt64(r.Key), B: n, C: sum / n})
			out.EmitValue(row)
		})
	return typed.Of(env, averages, codec)
}
