package main

import (
	"encoding/binary"
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

// q5 counts the bids of each auction in each sliding window (keyed by
// auction, so spread over the subtasks), then, keyed by the window's start,
// keeps the auctions with the largest count. The counts of one window all
// carry its MaxTimestamp as their time, so a tumbling window of the slide
// gathers exactly them.
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
	return typed.WindowProcess(typed.Window(byWindow, guest.Tumbling(reference.SlideMs*time.Millisecond)), "q5.hot", hotItemCodec(),
		func(_ *typed.KeyedContext[int64], _ guest.Window, cs []typed.Windowed[int64, int64], out *typed.Emitter[typed.Windowed[int64, int64]]) {
			var top int64
			for _, c := range cs {
				top = max(top, c.Value)
			}
			for _, c := range cs {
				if c.Value == top {
					out.Emit(c)
				}
			}
		}).Stream
}
