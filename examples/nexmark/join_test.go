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
