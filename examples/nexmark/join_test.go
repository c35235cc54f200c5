//go:build !wasip1

package main

import (
	"context"
	"encoding/binary"
	"fmt"
	"slices"
	"testing"

	"github.com/sluicehq/sluice/sdk/guest"
	"github.com/sluicehq/sluice/sdk/guest/jobtest"
	"github.com/sluicehq/sluice/sdk/guest/typed"
)

// q3's join emits an auction with its seller whichever comes first: an
// auction before its seller waits in keyed state, one after it is joined
// at once; a seller's auctions all join, each once.
func TestQ3JoinsWhicheverComesFirst(t *testing.T) {
	jobtest.Run(t, ".", func(t *testing.T, m *jobtest.Mode) {
		task, err := m.Open(context.Background(), jobtest.TaskConfig{Args: []string{"--query", "q3"}, Operators: []string{"q3.join"}})
		if err != nil {
			t.Fatal(err)
		}
		defer task.Close()
		place := typed.Triple(typed.String(), typed.String(), typed.String())
		person := func(id int64, name string) jobtest.Record {
			v := place.Append([]byte{q8Person}, typed.Tuple3[string, string, string]{A: name, B: "c", C: "OR"})
			return jobtest.Record{Key: guest.Int64(id), HasKey: true, Value: v}
		}
		auction := func(id, seller int64) jobtest.Record {
			return jobtest.Record{Key: guest.Int64(seller), HasKey: true, Value: binary.LittleEndian.AppendUint64([]byte{q8Auction}, uint64(id))}
		}
		codec := localItemCodec()
		step := func(r jobtest.Record, want ...string) {
			t.Helper()
			if err := task.Process(r); err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, o := range task.TakeOutput() {
				row, err := codec.Decode(o.Value)
				if err != nil {
					t.Fatal(err)
				}
				got = append(got, fmt.Sprintf("%d %s", row.A, row.B.A))
			}
			if !slices.Equal(got, want) {
				t.Fatalf("after %v: %q, want %q", r.Value, got, want)
			}
		}
		step(auction(1, 7))
		step(auction(2, 7))
		step(person(7, "p7"), "1 p7", "2 p7")
		step(auction(3, 7), "3 p7")
		step(auction(4, 8))
		step(person(9, "p9"))
	})
}

// q4's close keeps an auction's highest bid between its opening and its
// expiry, both included, with bids that came before the auction, and
// emits it (keyed by category) once the watermark reaches the expiry; an
// auction without such a bid emits nothing, and bids whose auction never
// comes are dropped once the watermark passes them.
func TestQ4ClosesAuctionsAtExpiry(t *testing.T) {
	jobtest.Run(t, ".", func(t *testing.T, m *jobtest.Mode) {
		task, err := m.Open(context.Background(), jobtest.TaskConfig{Args: []string{"--query", "q4"}, Operators: []string{"q4.close"}})
		if err != nil {
			t.Fatal(err)
		}
		defer task.Close()
		rec := func(kind byte, id int64, fields ...int64) jobtest.Record {
			v := []byte{kind}
			for _, f := range fields {
				v = binary.LittleEndian.AppendUint64(v, uint64(f))
			}
			return jobtest.Record{Key: guest.Int64(id), HasKey: true, Value: v}
		}
		auction := func(id, opens, expires, category int64) jobtest.Record {
			return rec(q4Auction, id, opens, expires, category)
		}
		bid := func(id, time, price int64) jobtest.Record { return rec(q4Bid, id, time, price) }
		check := func(step string, err error, want ...string) {
			t.Helper()
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, o := range task.TakeOutput() {
				got = append(got, fmt.Sprintf("%d:%d", guest.AsInt64(o.Key), guest.AsInt64(o.Value)))
			}
			slices.Sort(got) // timers at one time fire in no set order of keys
			if !slices.Equal(got, want) {
				t.Fatalf("%s: %q, want %q", step, got, want)
			}
		}
		check("bids before their auction", task.Process(bid(1, 150, 60), bid(1, 90, 99), bid(1, 210, 98)))
		check("the auctions", task.Process(auction(1, 100, 200, 10), auction(2, 300, 400, 11), auction(4, 100, 200, 13)))
		check("bids after them", task.Process(bid(1, 200, 50), bid(1, 120, 45), bid(4, 99, 90), bid(4, 200, 50), bid(4, 201, 80), bid(4, 150, 20)))
		check("the watermark before the expiry", task.SetWatermark(199))
		check("the watermark at the expiry", task.SetWatermark(200), "10:60", "13:50")
		check("no bid", task.SetWatermark(400))
		check("a bid whose auction never comes", task.Process(bid(3, 500, 70)))
		if _, ok := task.NextEventTimer(); !ok {
			t.Fatal("no timer for the waiting bid")
		}
		check("past it", task.SetWatermark(500))
		if ms, ok := task.NextEventTimer(); ok {
			t.Fatalf("a timer at %d is left", ms)
		}
		check("the auction after all its bids were dropped", task.Process(auction(3, 450, 600, 12)))
		check("its expiry", task.SetWatermark(600))
	})
}
