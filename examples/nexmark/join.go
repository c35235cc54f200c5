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
