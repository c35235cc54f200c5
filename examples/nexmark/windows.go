package main

import (
	"encoding/binary"
	"math"
	"time"

	"github.com/sluicehq/sluice/sdk/guest"
	"github.com/sluicehq/sluice/sdk/guest/typed"
	"github.com/sluicehq/sluice/sdk/nexmark"
	"github.com/sluicehq/sluice/sdk/nexmark/reference"
)

// The windowed queries: q5 (hot items, sliding windows) and q7 (highest
// bid, tumbling windows), as sdk/nexmark/reference reads them.

// windowOutOfOrderness bounds how far the stream's event times go back: the
// generator's out-of-order groups permute a few events a millisecond or so
// apart, so a second is ample, and no bid is late.
const windowOutOfOrderness = time.Second

// hotItemCodec is q5's output: the auction (key), the sliding window and
// its number of bids in it.
func hotItemCodec() typed.Codec[typed.Windowed[int64, int64]] {
	return typed.WindowedCodec(typed.Int64(), typed.Int64())
}

// countBids counts a window's bids.
type countBids struct{}

func (countBids) CreateAccumulator() int64   { return 0 }
func (countBids) Add(_ int64, n int64) int64 { return n + 1 }
func (countBids) GetResult(n int64) int64    { return n }

// hottest keeps the largest count among a window's auctions and the
// auctions that have it: A the count, B the auctions.
type hottest struct{}

func (hottest) CreateAccumulator() typed.Tuple2[int64, []int64] {
	return typed.Tuple2[int64, []int64]{}
}
func (hottest) GetResult(h typed.Tuple2[int64, []int64]) typed.Tuple2[int64, []int64] { return h }
func (hottest) Add(c typed.Windowed[int64, int64], h typed.Tuple2[int64, []int64]) typed.Tuple2[int64, []int64] {
	switch {
	case c.Value > h.A:
		h.A, h.B = c.Value, append(h.B[:0], c.Key)
	case c.Value == h.A:
		h.B = append(h.B, c.Key)
	}
	return h
}

// q5 counts the bids of each auction in each sliding window (keyed by
// auction, so spread over the subtasks), then, keyed by the window's start,
// keeps the auctions with the largest count: the counts of one window all
// carry its MaxTimestamp as their time, so a tumbling window of the slide
// gathers exactly them, and folds them as they come (a window process
// function would keep them all, rewriting a growing state entry for each).
func q5(events *typed.Stream[[]byte]) *typed.Stream[typed.Windowed[int64, int64]] {
	auctions := typed.FlatMap(events, "q5.bids", typed.Int64(), func(e []byte, out *typed.Emitter[int64]) {
		if nexmark.IsBid(e) {
			out.Emit(int64(binary.LittleEndian.Uint64(e[nexmark.BidAuctionOffset:])))
		}
	})
	byAuction := typed.KeyBy(auctions, "q5.by-auction", typed.Int64(), func(a int64) int64 { return a })
	counts := typed.WindowAggregate(typed.Window(byAuction, guest.Sliding(reference.WindowMs*time.Millisecond, reference.SlideMs*time.Millisecond)),
		"q5.count", typed.AggregateFunction[int64, int64, int64](countBids{}), typed.Int64(), typed.Int64())
	byWindow := typed.KeyBy(counts.Stream, "q5.by-window", typed.Int64(), func(c typed.Windowed[int64, int64]) int64 { return c.Window.Start })
	hc := typed.Pair(typed.Int64(), typed.Slice(typed.Int64()))
	hot := typed.WindowAggregate(typed.Window(byWindow, guest.Tumbling(reference.SlideMs*time.Millisecond)), "q5.hot",
		typed.AggregateFunction[typed.Windowed[int64, int64], typed.Tuple2[int64, []int64], typed.Tuple2[int64, []int64]](hottest{}), hc, hc)
	return typed.FlatMap(hot.Stream, "q5.rows", hotItemCodec(), func(h typed.Windowed[int64, typed.Tuple2[int64, []int64]], out *typed.Emitter[typed.Windowed[int64, int64]]) {
		w := guest.Window{Start: h.Key, End: h.Key + reference.WindowMs}
		for _, a := range h.Value.B {
			out.Emit(typed.Windowed[int64, int64]{Key: a, Window: w, Value: h.Value.A})
		}
	})
}

// q7's candidates are bids, each with whether it is a boundary copy: a bid
// at exactly a window's end is a candidate of that window as well (the
// SQL's BETWEEN includes the end) without counting toward its highest
// price, so it goes to that window again, at End-1, marked.
type candidate = typed.Tuple2[bool, []byte]

// top is a window's (or part of a window's) highest price, noPrice when it
// has no bid of its own yet, and its candidates: its bids at that price and
// the boundary copies at or above it (the highest price of the whole window
// is at least this part's, so no candidate it could need is dropped).
type top = typed.Tuple2[int64, []candidate]

const noPrice = math.MinInt64

func bidPrice(b []byte) int64 { return int64(binary.LittleEndian.Uint64(b[nexmark.BidPriceOffset:])) }

func topCodec() typed.Codec[top] {
	return typed.Pair(typed.Int64(), typed.Slice(typed.Pair(typed.Bool(), typed.Bytes())))
}

// highestBids keeps a window's top.
type highestBids struct{}

func (highestBids) CreateAccumulator() top { return top{A: noPrice} }
func (highestBids) GetResult(t top) top    { return t }
func (highestBids) Add(c candidate, t top) top {
	p := bidPrice(c.B)
	switch {
	case c.A: // a boundary copy
		if p >= t.A {
			t.B = append(t.B, c)
		}
	case p > t.A:
		t.A = p
		kept := t.B[:0]
		for _, o := range t.B {
			if o.A && bidPrice(o.B) >= p {
				kept = append(kept, o)
			}
		}
		t.B = append(kept, c)
	case p == t.A:
		t.B = append(t.B, c)
	}
	return t
}

// q7 finds each tumbling window's top per auction (spread over the
// subtasks), then, keyed by the window's start, merges them into the
// window's, and emits the candidates at its highest price as bids
// (sdk/nexmark's encoding).
func q7(events *typed.Stream[[]byte]) *typed.Stream[[]byte] {
	cands := typed.FlatMap(events, "q7.bids", typed.Pair(typed.Bool(), typed.Bytes()), func(e []byte, out *typed.Emitter[candidate]) {
		if !nexmark.IsBid(e) {
			return
		}
		out.Emit(candidate{B: e})
		if t := int64(binary.LittleEndian.Uint64(e[nexmark.BidDateTimeOffset:])); t%reference.WindowMs == 0 {
			out.EmitAt(candidate{A: true, B: e}, t-1)
		}
	})
	byAuction := typed.KeyBy(cands, "q7.by-auction", typed.Int64(), func(c candidate) int64 {
		return int64(binary.LittleEndian.Uint64(c.B[nexmark.BidAuctionOffset:]))
	})
	tops := typed.WindowAggregate(typed.Window(byAuction, guest.Tumbling(reference.WindowMs*time.Millisecond)),
		"q7.top", typed.AggregateFunction[candidate, top, top](highestBids{}), topCodec(), topCodec())
	byWindow := typed.KeyBy(tops.Stream, "q7.by-window", typed.Int64(), func(t typed.Windowed[int64, top]) int64 { return t.Window.Start })
	highest := typed.WindowAggregate(typed.Window(byWindow, guest.Tumbling(reference.WindowMs*time.Millisecond)), "q7.highest",
		typed.AggregateFunction[typed.Windowed[int64, top], top, top](mergeTops{}), topCodec(), topCodec())
	return typed.FlatMap(highest.Stream, "q7.rows", typed.Bytes(), func(t typed.Windowed[int64, top], out *typed.Emitter[[]byte]) {
		if t.Value.A == noPrice {
			return // boundary copies only: the window has no bid
		}
		for _, c := range t.Value.B {
			if bidPrice(c.B) == t.Value.A {
				out.Emit(c.B)
			}
		}
	})
}

// mergeTops folds the tops of a window's parts into the window's: its
// highest price is theirs, and its candidates those at or above it (the
// ones above are boundary copies, dropped when the rows are emitted).
type mergeTops struct{}

func (mergeTops) CreateAccumulator() top { return top{A: noPrice} }
func (mergeTops) GetResult(t top) top    { return t }
func (mergeTops) Add(part typed.Windowed[int64, top], t top) top {
	if part.Value.A > t.A {
		t.A = part.Value.A
		kept := t.B[:0]
		for _, c := range t.B {
			if bidPrice(c.B) >= t.A {
				kept = append(kept, c)
			}
		}
		t.B = kept
	}
	for _, c := range part.Value.B {
		if bidPrice(c.B) >= t.A {
			t.B = append(t.B, c)
		}
	}
	return t
}
