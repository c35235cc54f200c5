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
