//go:build !wasip1

package main

import (
	"slices"
	"testing"

	"github.com/sluicehq/sluice/sdk/nexmark"
)

func bidAt(price, time int64) []byte {
	return nexmark.AppendBid(nil, &nexmark.Bid{Auction: 1, Bidder: 2, Price: price, DateTime: time})
}

// A window's top keeps its bids at its highest price and the boundary
// copies at or above it, whatever the order they come in.
func TestHighestBidsAdd(t *testing.T) {
	var h highestBids
	tie, above, below := candidate{A: true, B: bidAt(50, 10_000)}, candidate{A: true, B: bidAt(70, 10_000)}, candidate{A: true, B: bidAt(10, 10_000)}
	low, high, high2 := candidate{B: bidAt(20, 9_000)}, candidate{B: bidAt(50, 9_100)}, candidate{B: bidAt(50, 9_200)}
	for _, order := range [][]candidate{
		{tie, above, below, low, high, high2},
		{low, high, tie, below, high2, above},
		{above, high2, low, tie, high, below},
	} {
		top := h.CreateAccumulator()
		for _, c := range order {
			top = h.Add(c, top)
		}
		if top.A != 50 {
			t.Fatalf("%v: highest price %d, want 50 (a boundary copy does not count toward it)", order, top.A)
		}
		for _, want := range []candidate{tie, above, high, high2} {
			if !slices.ContainsFunc(top.B, func(c candidate) bool { return c.A == want.A && slices.Equal(c.B, want.B) }) {
				t.Errorf("the top lacks the candidate at %d (boundary %v)", bidPrice(want.B), want.A)
			}
		}
		if len(top.B) != 4 {
			t.Errorf("the top keeps %d candidates, want 4 (not those below its price)", len(top.B))
		}
	}
}
