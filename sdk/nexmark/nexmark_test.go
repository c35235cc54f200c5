package nexmark_test

import (
	"bytes"
	"encoding/binary"
	"errors"
	"slices"
	"testing"

	"github.com/sluicehq/sluice/sdk/nexmark"
)

func all(t *testing.T, cfg nexmark.Config, events int64, timelines int) ([]nexmark.Event, [][]byte) {
	t.Helper()
	rs, err := nexmark.Split(events, timelines)
	if err != nil {
		t.Fatal(err)
	}
	var evs []nexmark.Event
	var encs [][]byte
	for _, r := range rs {
		g, err := nexmark.NewGenerator(cfg, r, timelines, r.Start)
		if err != nil {
			t.Fatal(err)
		}
		var e nexmark.Event
		for g.Next(&e) {
			enc := nexmark.AppendEvent(nil, &e)
			var d nexmark.Event
			if err := nexmark.DecodeEvent(enc, &d); err != nil {
				t.Fatal(err)
			}
			evs = append(evs, d)
			encs = append(encs, enc)
		}
	}
	return evs, encs
}

// The stream has the standard shape: 1:3:46 persons, auctions and bids,
// ids from 1000, categories 10-14, most bids on hot auctions, event times
// 1/rate apart from the base time.
func TestGeneratorShape(t *testing.T) {
	cfg := nexmark.Config{BaseTime: 1_000_000, Rate: 1000, Seed: 7}
	evs, _ := all(t, cfg, 50_000, 1)
	if len(evs) != 50_000 {
		t.Fatalf("%d events, want 50000", len(evs))
	}
	count := map[nexmark.EventType]int{}
	hot := map[int64]int{}
	var bids int
	for i, e := range evs {
		count[e.Type]++
		if want := cfg.BaseTime + int64(i); e.Time() != want {
			t.Fatalf("event %d at %d, want %d (1 ms apart at 1000/s)", i, e.Time(), want)
		}
		switch e.Type {
		case nexmark.PersonEvent:
			if e.Person.ID != nexmark.FirstPersonID+int64(i/50) {
				t.Fatalf("person %d has id %d", i, e.Person.ID)
			}
			if len(e.Person.Name) == 0 || !bytes.Contains(e.Person.EmailAddress, []byte("@")) || len(e.Person.CreditCard) != 19 || len(e.Person.State) != 2 {
				t.Fatalf("person %+v", e.Person)
			}
		case nexmark.AuctionEvent:
			a := e.Auction
			if a.Category < nexmark.FirstCategoryID || a.Category >= nexmark.FirstCategoryID+nexmark.NumCategories {
				t.Fatalf("auction category %d", a.Category)
			}
			if a.Expires <= a.DateTime || a.Reserve < a.InitialBid || a.Seller < nexmark.FirstPersonID {
				t.Fatalf("auction %+v", a)
			}
		case nexmark.BidEvent:
			bids++
			hot[e.Bid.Auction]++
			if e.Bid.Price < 100 || e.Bid.Price > 100_000_000 || e.Bid.Bidder < nexmark.FirstPersonID {
				t.Fatalf("bid %+v", e.Bid)
			}
		}
	}
	if count[nexmark.PersonEvent] != 1000 || count[nexmark.AuctionEvent] != 3000 || count[nexmark.BidEvent] != 46000 {
		t.Fatalf("counts %v, want 1000:3000:46000", count)
	}
	// Half the bids go to the hot auction of their batch of 100 auctions
	// (ids 1000, 1100, ...): far more than a uniform pick would give.
	var onHot int
	for a, n := range hot {
		if (a-nexmark.FirstAuctionID)%100 == 0 {
			onHot += n
		}
	}
	if onHot < bids*4/10 {
		t.Fatalf("%d of %d bids on hot auctions, want about half", onHot, bids)
	}
}

// Every event draws its own values: no two bids share their random extra
// (neighbouring ids must not reuse each other's draws).
func TestGeneratorEventsIndependent(t *testing.T) {
	evs, _ := all(t, nexmark.Config{Seed: 5}, 50_000, 2)
	seen := map[string]int64{}
	for i, e := range evs {
		if e.Type != nexmark.BidEvent {
			continue
		}
		if j, dup := seen[string(e.Bid.Extra)]; dup {
			t.Fatalf("events %d and %d drew the same extra %q", j, i, e.Bid.Extra)
		}
		seen[string(e.Bid.Extra)] = int64(i)
	}
}

// The same config gives the same bytes; another seed another stream; the
// split into timelines keeps the events (by id) but not their times.
func TestGeneratorDeterministic(t *testing.T) {
	cfg := nexmark.Config{BaseTime: 5000, Seed: 1}
	_, a := all(t, cfg, 2000, 2)
	_, b := all(t, cfg, 2000, 2)
	if !slices.EqualFunc(a, b, bytes.Equal) {
		t.Fatal("same config, different streams")
	}
	cfg.Seed = 2
	_, c := all(t, cfg, 2000, 2)
	if slices.EqualFunc(a, c, bytes.Equal) {
		t.Fatal("another seed gave the same stream")
	}
	rs, _ := nexmark.Split(2000, 2)
	if rs[0] != (nexmark.Range{Start: 0, End: 1000}) || rs[1] != (nexmark.Range{Start: 1000, End: 2000}) {
		t.Fatalf("split %v", rs)
	}
	evs, _ := all(t, nexmark.Config{BaseTime: 5000, Rate: 1000}, 2000, 2)
	// Two timelines at 1000/s together: each event 2 ms after the previous
	// of its timeline, both timelines from the base time.
	if evs[0].Time() != 5000 || evs[1].Time() != 5002 || evs[1000].Time() != 5000 || evs[1999].Time() != 5000+999*2 {
		t.Fatalf("times %d %d %d %d", evs[0].Time(), evs[1].Time(), evs[1000].Time(), evs[1999].Time())
	}
}

// A generator resumed at a position continues the same emission order.
func TestGeneratorResume(t *testing.T) {
	cfg := nexmark.Config{BaseTime: 0, Seed: 3, OutOfOrderGroup: 10}
	r := nexmark.Range{Start: 100, End: 355}
	g, _ := nexmark.NewGenerator(cfg, r, 3, r.Start)
	var whole [][]byte
	var e nexmark.Event
	for g.Next(&e) {
		whole = append(whole, nexmark.AppendEvent(nil, &e))
	}
	for _, at := range []int64{100, 107, 250, 351, 355} {
		g, err := nexmark.NewGenerator(cfg, r, 3, at)
		if err != nil {
			t.Fatal(err)
		}
		var rest [][]byte
		for g.Next(&e) {
			rest = append(rest, nexmark.AppendEvent(nil, &e))
		}
		if !slices.EqualFunc(rest, whole[at-r.Start:], bytes.Equal) {
			t.Fatalf("resumed at %d: a different rest", at)
		}
	}
	if _, err := nexmark.NewGenerator(cfg, r, 3, 356); err == nil {
		t.Fatal("a position past the end was accepted")
	}
}

// Out-of-order groups permute each full group of a timeline: every event
// once, times not monotonic, each group's times within the group's span.
func TestGeneratorOutOfOrder(t *testing.T) {
	cfg := nexmark.Config{BaseTime: 0, Rate: 1000, OutOfOrderGroup: 8}
	evs, _ := all(t, cfg, 1003, 1) // the last 3 events are a partial group, in order
	seen := map[int64]bool{}
	var back int
	for i, e := range evs {
		if seen[e.Time()] {
			t.Fatalf("time %d twice", e.Time())
		}
		seen[e.Time()] = true
		if g := int64(i) / 8 * 8; e.Time() < g || e.Time() >= g+8 {
			t.Fatalf("event %d at %d: outside its group", i, e.Time())
		}
		if i > 0 && e.Time() < evs[i-1].Time() {
			back++
		}
	}
	if len(seen) != 1003 || back == 0 {
		t.Fatalf("%d distinct times, %d steps back", len(seen), back)
	}
}

func TestSplitKey(t *testing.T) {
	k := nexmark.SplitKey(nexmark.Range{Start: 42, End: 99}, 3)
	start, n, err := nexmark.ParseSplitKey(k)
	if err != nil || start != 42 || n != 3 {
		t.Fatalf("%q: %d %d %v", k, start, n, err)
	}
	for _, bad := range []string{"", "nexmark/", "nexmark/0/1", "nexmark/2/-1", "text/2/1", "nexmark/x/1"} {
		if _, _, err := nexmark.ParseSplitKey(bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
	if _, err := nexmark.Split(-1, 2); err == nil {
		t.Error("negative events accepted")
	}
	if _, err := nexmark.Split(10, 0); err == nil {
		t.Error("0 timelines accepted")
	}
}

func TestDecodeErrors(t *testing.T) {
	bid := nexmark.AppendBid(nil, &nexmark.Bid{Auction: 1, Bidder: 2, Price: 3, DateTime: 4, Extra: []byte("x")})
	var e nexmark.Event
	for _, bad := range [][]byte{nil, {9}, bid[:len(bid)-1], append(slices.Clone(bid), 0)} {
		if err := nexmark.DecodeEvent(bad, &e); !errors.Is(err, nexmark.ErrMalformed) {
			t.Errorf("%x: %v", bad, err)
		}
	}
	if err := nexmark.DecodeEvent(bid, &e); err != nil || e.Bid.Price != 3 || string(e.Bid.Extra) != "x" {
		t.Fatalf("%+v %v", e, err)
	}
	if !nexmark.IsBid(bid) || nexmark.IsBid(bid[:36]) || nexmark.IsBid([]byte{byte(nexmark.PersonEvent)}) {
		t.Fatal("IsBid")
	}
	for off, want := range map[int]uint64{nexmark.BidAuctionOffset: 1, nexmark.BidBidderOffset: 2, nexmark.BidPriceOffset: 3, nexmark.BidDateTimeOffset: 4} {
		if got := binary.LittleEndian.Uint64(bid[off:]); got != want {
			t.Errorf("field at %d: %d, want %d", off, got, want)
		}
	}
	var b nexmark.Bid
	if ok, err := nexmark.DecodeBid([]byte{byte(nexmark.PersonEvent)}, &b); ok || err != nil {
		t.Fatalf("a person decoded as a bid: %v %v", ok, err)
	}
	if _, err := (nexmark.BidCodec{}).Decode([]byte{byte(nexmark.PersonEvent)}); !errors.Is(err, nexmark.ErrMalformed) {
		t.Fatalf("BidCodec on a person: %v", err)
	}
}

// Whatever the bytes, DecodeEvent returns an event or ErrMalformed, never
// panics, and what it accepts encodes back to the same bytes.
func FuzzDecodeEvent(f *testing.F) {
	evs, encs := all(&testing.T{}, nexmark.Config{Seed: 9}, 60, 1)
	_ = evs
	for _, e := range encs {
		f.Add(e)
	}
	f.Add([]byte{})
	f.Add([]byte{2, 0xff, 0xff, 0xff, 0xff})
	f.Fuzz(func(t *testing.T, b []byte) {
		var e nexmark.Event
		if err := nexmark.DecodeEvent(b, &e); err != nil {
			if !errors.Is(err, nexmark.ErrMalformed) {
				t.Fatalf("error %v does not wrap ErrMalformed", err)
			}
			return
		}
		if again := nexmark.AppendEvent(nil, &e); !bytes.Equal(again, b) {
			t.Fatalf("re-encoded %x, was %x", again, b)
		}
	})
}

func BenchmarkGenerate(b *testing.B) {
	g, _ := nexmark.NewGenerator(nexmark.Config{}, nexmark.Range{Start: 0, End: 1 << 50}, 1, 0)
	var e nexmark.Event
	var buf []byte
	b.ReportAllocs()
	for range b.N {
		g.Next(&e)
		buf = nexmark.AppendEvent(buf[:0], &e)
	}
}
