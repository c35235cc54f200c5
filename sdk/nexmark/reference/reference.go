// Package reference holds plain-Go implementations of Nexmark queries q0,
// q1, q2, q3, q4, q5, q7 and q8 over a whole, finite event stream: the
// test oracles of the Sluice queries and the native baseline of their
// benchmark. The SQL texts of the Nexmark benchmark
// (github.com/nexmark/nexmark, nexmark-flink/src/main/resources/queries)
// define them; each function says how it reads its query. Results hold
// copies, never aliases of the events.
//
// It imports the standard library and package nexmark only.
package reference

import (
	"cmp"
	"slices"

	"github.com/sluicehq/sluice/sdk/nexmark"
)

// WindowMs is the size of q5's, q7's and q8's windows (10 s); SlideMs is
// q5's slide (2 s).
const (
	WindowMs = 10_000
	SlideMs  = 2_000
)

// Q1Price converts a price in cents to euro cents as q1 does (0.908 × price),
// in integer arithmetic, truncated toward zero.
func Q1Price(price int64) int64 { return price * 908 / 1000 }

// Q2Modulus is q2's filter: bids on auctions whose id is a multiple of it.
const Q2Modulus = 123

// CloneBid returns b with its own copy of Extra.
func CloneBid(b nexmark.Bid) nexmark.Bid {
	b.Extra = slices.Clone(b.Extra)
	return b
}

func bids(events []nexmark.Event) []nexmark.Bid {
	var out []nexmark.Bid
	for i := range events {
		if events[i].Type == nexmark.BidEvent {
			out = append(out, CloneBid(events[i].Bid))
		}
	}
	return out
}

// Q0 is the pass-through: every bid, as it is, in stream order
// (SELECT auction, bidder, price, dateTime, extra FROM bid).
func Q0(events []nexmark.Event) []nexmark.Bid { return bids(events) }

// Q1 is every bid with its price converted to euros by Q1Price, in stream
// order.
func Q1(events []nexmark.Event) []nexmark.Bid {
	out := bids(events)
	for i := range out {
		out[i].Price = Q1Price(out[i].Price)
	}
	return out
}

// AuctionPrice is a row of q2.
type AuctionPrice struct{ Auction, Price int64 }

// Q2 is the auction and price of every bid on an auction whose id is a
// multiple of Q2Modulus, in stream order
// (SELECT auction, price FROM bid WHERE MOD(auction, 123) = 0).
func Q2(events []nexmark.Event) []AuctionPrice {
	var out []AuctionPrice
	for i := range events {
		if b := &events[i].Bid; events[i].Type == nexmark.BidEvent && b.Auction%Q2Modulus == 0 {
			out = append(out, AuctionPrice{b.Auction, b.Price})
		}
	}
	return out
}

// Q3Row is a row of q3.
type Q3Row struct {
	Name, City, State string
	Auction           int64
}

// Q3 is the local item suggestion: every auction of category 10 joined
// with its seller, when the seller lives in OR, ID or CA (SELECT P.name,
// P.city, P.state, A.id FROM auction A JOIN person P ON A.seller = P.id
// WHERE A.category = 10 AND P.state IN ('OR', 'ID', 'CA')). The join is
// incremental and unwindowed, so its result is every matching pair,
// whichever came first; sorted by auction, then name.
func Q3(events []nexmark.Event) []Q3Row {
	persons := map[int64]*nexmark.Person{}
	var auctions []*nexmark.Auction
	for i := range events {
		switch e := &events[i]; e.Type {
		case nexmark.PersonEvent:
			switch string(e.Person.State) {
			case "OR", "ID", "CA":
				persons[e.Person.ID] = &e.Person
			}
		case nexmark.AuctionEvent:
			if e.Auction.Category == 10 {
				auctions = append(auctions, &e.Auction)
			}
		}
	}
	var out []Q3Row
	for _, a := range auctions {
		if p, ok := persons[a.Seller]; ok {
			out = append(out, Q3Row{string(p.Name), string(p.City), string(p.State), a.ID})
		}
	}
	slices.SortFunc(out, func(a, b Q3Row) int {
		return cmp.Or(cmp.Compare(a.Auction, b.Auction), cmp.Compare(a.Name, b.Name))
	})
	return out
}

// CategoryPrice is a row of q4.
type CategoryPrice struct{ Category, Avg int64 }

// Q4 is the average closing price per category: an auction's closing
// price is its highest bid made between its opening and its expiry, both
// included; auctions without such a bid have none and do not count. The
// average is of BIGINTs, so an integer, truncated (as SQL's AVG of BIGINT).
// Sorted by category.
func Q4(events []nexmark.Event) []CategoryPrice {
	auctions := map[int64]*nexmark.Auction{}
	for i := range events {
		if e := &events[i]; e.Type == nexmark.AuctionEvent {
			auctions[e.Auction.ID] = &e.Auction
		}
	}
	final := map[int64]int64{}
	for i := range events {
		e := &events[i]
		if e.Type != nexmark.BidEvent {
			continue
		}
		a, ok := auctions[e.Bid.Auction]
		if !ok || e.Bid.DateTime < a.DateTime || e.Bid.DateTime > a.Expires {
			continue
		}
		if p, ok := final[a.ID]; !ok || e.Bid.Price > p {
			final[a.ID] = e.Bid.Price
		}
	}
	sum, n := map[int64]int64{}, map[int64]int64{}
	for id, p := range final {
		c := auctions[id].Category
		sum[c] += p
		n[c]++
	}
	var out []CategoryPrice
	for c, s := range sum {
		out = append(out, CategoryPrice{c, s / n[c]})
	}
	slices.SortFunc(out, func(a, b CategoryPrice) int { return cmp.Compare(a.Category, b.Category) })
	return out
}

// floorTo is the largest multiple of size not above t.
func floorTo(t, size int64) int64 {
	r := t % size
	if r < 0 {
		r += size
	}
	return t - r
}

// HotItem is a row of q5, with the window it is hot in.
type HotItem struct{ Start, End, Auction, Num int64 }

// Q5 is hot items: in each sliding window (WindowMs long, every SlideMs,
// start included, end excluded) the auctions with the most bids, with
// their count; several when tied. Sorted by window, then auction.
func Q5(events []nexmark.Event) []HotItem {
	counts := map[[2]int64]int64{} // window start, auction
	for i := range events {
		e := &events[i]
		if e.Type != nexmark.BidEvent {
			continue
		}
		t := e.Bid.DateTime
		for s := floorTo(t, SlideMs); s > t-WindowMs; s -= SlideMs {
			counts[[2]int64{s, e.Bid.Auction}]++
		}
	}
	top := map[int64]int64{}
	for k, n := range counts {
		top[k[0]] = max(top[k[0]], n)
	}
	var out []HotItem
	for k, n := range counts {
		if n >= top[k[0]] {
			out = append(out, HotItem{k[0], k[0] + WindowMs, k[1], n})
		}
	}
	slices.SortFunc(out, func(a, b HotItem) int {
		return cmp.Or(cmp.Compare(a.Start, b.Start), cmp.Compare(a.Auction, b.Auction))
	})
	return out
}

// Q7 is the highest bid: for each tumbling window of WindowMs, the bids
// whose price is the window's highest and whose time lies between the
// window's end minus WindowMs and its end, both included (the SQL's
// BETWEEN, so a bid at exactly the end with that price counts as well).
// Sorted by time, then auction, bidder and price.
func Q7(events []nexmark.Event) []nexmark.Bid {
	maxPrice := map[int64]int64{} // window end
	for i := range events {
		if e := &events[i]; e.Type == nexmark.BidEvent {
			end := floorTo(e.Bid.DateTime, WindowMs) + WindowMs
			if p, ok := maxPrice[end]; !ok || e.Bid.Price > p {
				maxPrice[end] = e.Bid.Price
			}
		}
	}
	var out []nexmark.Bid
	for i := range events {
		e := &events[i]
		if e.Type != nexmark.BidEvent {
			continue
		}
		// The windows whose [end-WindowMs, end] holds the bid: its own, and
		// the one ending at its time when it falls on a boundary.
		own := floorTo(e.Bid.DateTime, WindowMs) + WindowMs
		for _, end := range []int64{own, own - WindowMs} {
			if p, ok := maxPrice[end]; ok && p == e.Bid.Price && e.Bid.DateTime >= end-WindowMs && e.Bid.DateTime <= end {
				out = append(out, CloneBid(e.Bid))
			}
		}
	}
	slices.SortFunc(out, func(a, b nexmark.Bid) int {
		return cmp.Or(cmp.Compare(a.DateTime, b.DateTime), cmp.Compare(a.Auction, b.Auction),
			cmp.Compare(a.Bidder, b.Bidder), cmp.Compare(a.Price, b.Price))
	})
	return out
}

// NewUser is a row of q8.
type NewUser struct {
	ID    int64
	Name  string
	Start int64 // the window's start
}

// Q8 is new users who opened an auction: the persons created in a tumbling
// window of WindowMs who also opened an auction in that same window, once
// per person and window. Sorted by window, then id.
func Q8(events []nexmark.Event) []NewUser {
	persons := map[[2]int64]string{} // window start, id
	sellers := map[[2]int64]bool{}
	for i := range events {
		switch e := &events[i]; e.Type {
		case nexmark.PersonEvent:
			persons[[2]int64{floorTo(e.Person.DateTime, WindowMs), e.Person.ID}] = string(e.Person.Name)
		case nexmark.AuctionEvent:
			sellers[[2]int64{floorTo(e.Auction.DateTime, WindowMs), e.Auction.Seller}] = true
		}
	}
	var out []NewUser
	for k, name := range persons {
		if sellers[k] {
			out = append(out, NewUser{k[1], name, k[0]})
		}
	}
	slices.SortFunc(out, func(a, b NewUser) int { return cmp.Or(cmp.Compare(a.Start, b.Start), cmp.Compare(a.ID, b.ID)) })
	return out
}
