package reference_test

import (
	"reflect"
	"testing"

	"github.com/sluicehq/sluice/sdk/nexmark"
	"github.com/sluicehq/sluice/sdk/nexmark/reference"
)

func person(id int64, name, state string, t int64) nexmark.Event {
	return nexmark.Event{Type: nexmark.PersonEvent, Person: nexmark.Person{ID: id, Name: []byte(name), City: []byte("c-" + name), State: []byte(state), DateTime: t}}
}

func auction(id, seller, category, t, expires int64) nexmark.Event {
	return nexmark.Event{Type: nexmark.AuctionEvent, Auction: nexmark.Auction{ID: id, Seller: seller, Category: category, DateTime: t, Expires: expires}}
}

func bid(auction, bidder, price, t int64) nexmark.Event {
	return nexmark.Event{Type: nexmark.BidEvent, Bid: nexmark.Bid{Auction: auction, Bidder: bidder, Price: price, DateTime: t, Extra: []byte("x")}}
}

func check[T any](t *testing.T, name string, got, want T) {
	t.Helper()
	if !reflect.DeepEqual(got, want) {
		t.Errorf("%s:\ngot  %+v\nwant %+v", name, got, want)
	}
}

func TestQ0Q1Q2(t *testing.T) {
	evs := []nexmark.Event{
		person(1, "a", "OR", 0),
		bid(246, 1, 1000, 1),
		auction(7, 1, 10, 2, 9),
		bid(7, 1, 1001, 3),
		bid(123, 2, 999, 4),
	}
	q0 := reference.Q0(evs)
	check(t, "q0", len(q0), 3)
	check(t, "q0[1]", q0[1], evs[3].Bid)
	q1 := reference.Q1(evs)
	// 0.908 × 1000 = 908; × 1001 = 908.908 → 908; × 999 = 907.092 → 907.
	check(t, "q1 prices", []int64{q1[0].Price, q1[1].Price, q1[2].Price}, []int64{908, 908, 907})
	check(t, "q1 rest", q1[2].Auction, int64(123))
	check(t, "q2", reference.Q2(evs), []reference.AuctionPrice{{246, 1000}, {123, 999}})
	// Results are copies: changing the events leaves them.
	evs[3].Bid.Extra[0] = 'y'
	check(t, "q0 copy", string(q0[1].Extra), "x")
}

func TestQ3(t *testing.T) {
	evs := []nexmark.Event{
		auction(20, 2, 10, 0, 9), // seller 2 comes later: still joins
		person(1, "or", "OR", 1),
		person(2, "ca", "CA", 2),
		person(3, "wa", "WA", 3),
		auction(21, 1, 10, 4, 9),
		auction(22, 1, 11, 5, 9), // another category
		auction(23, 3, 10, 6, 9), // seller in WA
		auction(24, 9, 10, 7, 9), // no such seller
	}
	check(t, "q3", reference.Q3(evs), []reference.Q3Row{{"ca", "c-ca", "CA", 20}, {"or", "c-or", "OR", 21}})
}

func TestQ4(t *testing.T) {
	evs := []nexmark.Event{
		auction(1, 0, 10, 100, 200),
		auction(2, 0, 10, 100, 200),
		auction(3, 0, 11, 100, 200),
		auction(4, 0, 12, 100, 200), // no bid in time: no closing price
		bid(1, 0, 50, 100),          // at the opening: counts
		bid(1, 0, 70, 200),          // at the expiry: counts
		bid(1, 0, 90, 201),          // after: does not
		bid(2, 0, 5, 150),
		bid(3, 0, 8, 150),
		bid(4, 0, 1000, 99),
	}
	// Category 10: (70 + 5) / 2 = 37 (truncated); 11: 8.
	check(t, "q4", reference.Q4(evs), []reference.CategoryPrice{{10, 37}, {11, 8}})
}

func TestQ5(t *testing.T) {
	evs := []nexmark.Event{
		bid(1, 0, 1, 1_000),
		bid(1, 0, 1, 1_500),
		bid(2, 0, 1, 3_000),
		bid(2, 0, 1, 11_999),
	}
	// Windows [s, s+10s) for s a multiple of 2 s: 1000 and 1500 lie in
	// those from -8000 to 0; 3000 from -6000 to 2000; 11999 from 2000 to
	// 10000.
	want := []reference.HotItem{
		{-8000, 2000, 1, 2}, {-6000, 4000, 1, 2}, {-4000, 6000, 1, 2}, {-2000, 8000, 1, 2}, {0, 10000, 1, 2},
		{2000, 12000, 2, 2},
		{4000, 14000, 2, 1}, {6000, 16000, 2, 1}, {8000, 18000, 2, 1}, {10000, 20000, 2, 1},
	}
	check(t, "q5", reference.Q5(evs), want)
}

func TestQ7(t *testing.T) {
	evs := []nexmark.Event{
		bid(1, 1, 10, 1_000),
		bid(2, 2, 30, 5_000),
		bid(3, 3, 30, 9_999),
		bid(4, 4, 30, 10_000), // next window's, but at the first's end with its top price
		bid(5, 5, 20, 15_000),
	}
	want := []nexmark.Bid{evs[1].Bid, evs[2].Bid, evs[3].Bid, evs[3].Bid}
	check(t, "q7", reference.Q7(evs), want)
}

func TestQ8(t *testing.T) {
	evs := []nexmark.Event{
		person(1, "a", "OR", 1_000),
		person(2, "b", "OR", 2_000),
		auction(10, 1, 10, 9_999, 0),  // same window as person 1
		auction(11, 1, 10, 9_000, 0),  // twice: once in the result
		auction(12, 2, 10, 10_000, 0), // next window: person 2 is not new there
		person(3, "c", "OR", 12_000),
		auction(13, 3, 10, 19_999, 0),
	}
	check(t, "q8", reference.Q8(evs), []reference.NewUser{{1, "a", 0}, {3, "c", 10_000}})
}

// On a generated stream every query finds something, so the generator
// feeds joins and windows as the benchmark needs.
func TestQueriesOnGeneratedStream(t *testing.T) {
	g, err := nexmark.NewGenerator(nexmark.Config{Seed: 1, Rate: 1000}, nexmark.Range{End: 100_000}, 1, 0)
	if err != nil {
		t.Fatal(err)
	}
	var evs []nexmark.Event
	var e nexmark.Event
	for g.Next(&e) {
		enc := nexmark.AppendEvent(nil, &e)
		var d nexmark.Event
		_ = nexmark.DecodeEvent(enc, &d)
		evs = append(evs, d)
	}
	for name, n := range map[string]int{
		"q0": len(reference.Q0(evs)), "q2": len(reference.Q2(evs)), "q3": len(reference.Q3(evs)),
		"q4": len(reference.Q4(evs)), "q5": len(reference.Q5(evs)), "q7": len(reference.Q7(evs)), "q8": len(reference.Q8(evs)),
	} {
		if n == 0 {
			t.Errorf("%s: no rows", name)
		}
	}
}
