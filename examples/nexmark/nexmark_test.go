//go:build !wasip1

// The Nexmark queries run on an embedded cluster at parallelism 2 over a
// small generated stream; each query's collected output equals the plain-Go
// reference's (sdk/nexmark/reference) over the same stream.
package main_test

import (
	"bytes"
	"context"
	"fmt"
	"slices"
	"testing"

	"github.com/sluicehq/sluice/local"
	"github.com/sluicehq/sluice/local/localtest"
	"github.com/sluicehq/sluice/sdk/client"
	"github.com/sluicehq/sluice/sdk/guest"
	"github.com/sluicehq/sluice/sdk/guest/typed"
	"github.com/sluicehq/sluice/sdk/nexmark"
	"github.com/sluicehq/sluice/sdk/nexmark/reference"
)

const (
	events   = 20_000
	parallel = 2 // the source's subtasks, so the stream's timelines
	seed     = 42
)

// stream is the events the job's source generates: its timelines, one
// per source subtask, each in emission order.
func stream(t *testing.T, baseTime int64) []nexmark.Event {
	t.Helper()
	cfg := nexmark.Config{Seed: seed, OutOfOrderGroup: 7, BaseTime: baseTime}
	rs, err := nexmark.Split(events, parallel)
	if err != nil {
		t.Fatal(err)
	}
	var out []nexmark.Event
	for _, r := range rs {
		g, err := nexmark.NewGenerator(cfg, r, parallel, r.Start)
		if err != nil {
			t.Fatal(err)
		}
		var e nexmark.Event
		for g.Next(&e) {
			var d nexmark.Event
			if err := nexmark.DecodeEvent(nexmark.AppendEvent(nil, &e), &d); err != nil {
				t.Fatal(err)
			}
			out = append(out, d)
		}
	}
	return out
}

func runQuery(t *testing.T, c *localtest.InProcess, wasm []byte, query, sink string, extra ...string) client.JobResult {
	t.Helper()
	ctx := context.Background()
	cl := c.Client()
	digest, err := cl.UploadModule(ctx, wasm)
	if err != nil {
		t.Fatal(err)
	}
	id, err := cl.SubmitJob(ctx, client.JobSpec{ModuleDigest: digest, Parallelism: parallel, Args: append([]string{
		"--query", query, "--sink", sink, "--events", fmt.Sprint(events), "--seed", fmt.Sprint(seed), "--out-of-order", "7",
	}, extra...)})
	if err != nil {
		t.Fatal(err)
	}
	return localtest.WaitFinished(t, c, id)
}

func sorted(b [][]byte) [][]byte {
	b = slices.Clone(b)
	slices.SortFunc(b, bytes.Compare)
	return b
}

// sameRecords fails t unless got and want hold the same records, in any
// order.
func sameRecords(t *testing.T, query string, got, want [][]byte) {
	t.Helper()
	got, want = sorted(got), sorted(want)
	if !slices.EqualFunc(got, want, bytes.Equal) {
		t.Fatalf("%s: %d records, the reference has %d (first differing at %d)", query, len(got), len(want),
			slices.IndexFunc(got, func(b []byte) bool {
				return !slices.ContainsFunc(want, func(w []byte) bool { return bytes.Equal(w, b) })
			}))
	}
}

func encodeBids(bids []nexmark.Bid) [][]byte {
	var out [][]byte
	for i := range bids {
		out = append(out, nexmark.AppendBid(nil, &bids[i]))
	}
	return out
}

func TestQueriesMatchReference(t *testing.T) {
	wasm := localtest.Guest(t, "examples/nexmark")
	c := localtest.Start(t, local.Config{Slots: 4})
	evs := stream(t, 0)
	pair := typed.Pair(typed.Int64(), typed.Int64())
	var q2 [][]byte
	for _, r := range reference.Q2(evs) {
		q2 = append(q2, pair.Append(nil, typed.Tuple2[int64, int64]{A: r.Auction, B: r.Price}))
	}
	local := typed.Pair(typed.Int64(), typed.Triple(typed.String(), typed.String(), typed.String()))
	var q3 [][]byte
	for _, r := range reference.Q3(evs) {
		q3 = append(q3, local.Append(nil, typed.Tuple2[int64, typed.Tuple3[string, string, string]]{
			A: r.Auction, B: typed.Tuple3[string, string, string]{A: r.Name, B: r.City, C: r.State}}))
	}
	for _, q := range []struct {
		name string
		want [][]byte
	}{
		{"q0", encodeBids(reference.Q0(evs))},
		{"q1", encodeBids(reference.Q1(evs))},
		{"q2", q2},
		{"q3", q3},
	} {
		t.Run(q.name, func(t *testing.T) {
			if len(q.want) == 0 {
				t.Fatal("the reference has no rows: the test would prove nothing")
			}
			sameRecords(t, q.name, runQuery(t, c, wasm, q.name, "collect").Records, q.want)
		})
	}
	t.Run("text", func(t *testing.T) {
		r := runQuery(t, c, wasm, "q2", "collect", "--text")
		var want []string
		for _, row := range reference.Q2(evs) {
			want = append(want, fmt.Sprintf("%d\t%d", row.Auction, row.Price))
		}
		slices.Sort(want)
		if d := localtest.Diff(want, localtest.Lines(r.Records)); d != "" {
			t.Fatalf("q2 --text:\n%s", d)
		}
		r = runQuery(t, c, wasm, "q3", "collect", "--text")
		want = nil
		for _, row := range reference.Q3(evs) {
			want = append(want, fmt.Sprintf("%d\t%s\t%s\t%s", row.Auction, row.Name, row.City, row.State))
		}
		slices.Sort(want)
		if d := localtest.Diff(want, localtest.Lines(r.Records)); d != "" {
			t.Fatalf("q3 --text:\n%s", d)
		}
	})
	t.Run("blackhole", func(t *testing.T) {
		if r := runQuery(t, c, wasm, "q1", "blackhole"); len(r.Records) != 0 {
			t.Fatalf("a blackhole returned %d records", len(r.Records))
		}
	})
}

// The windowed queries run over a stream from 9 s to 11 s (at the
// generator's 10,000 events a second): it crosses q7's and q8's window end
// at 10 s, with bids at exactly that time, and q5's windows that slide
// there. (A
// bid at the end that ties the highest price is rare in a generated
// stream: windows_test.go covers it.)
func TestWindowQueriesMatchReference(t *testing.T) {
	const base = 9_000
	wasm := localtest.Guest(t, "examples/nexmark")
	c := localtest.Start(t, local.Config{Slots: 4})
	evs := stream(t, base)
	hot := typed.WindowedCodec(typed.Int64(), typed.Int64())
	var q5 [][]byte
	for _, r := range reference.Q5(evs) {
		q5 = append(q5, hot.Append(nil, typed.Windowed[int64, int64]{Key: r.Auction, Window: guest.Window{Start: r.Start, End: r.End}, Value: r.Num}))
	}
	q7 := reference.Q7(evs)
	newUser := typed.WindowedCodec(typed.Int64(), typed.Bytes())
	var q8 [][]byte
	for _, r := range reference.Q8(evs) {
		q8 = append(q8, newUser.Append(nil, typed.Windowed[int64, []byte]{Key: r.ID, Window: guest.Window{Start: r.Start, End: r.Start + reference.WindowMs}, Value: []byte(r.Name)}))
	}
	if !slices.ContainsFunc(evs, func(e nexmark.Event) bool {
		return e.Type == nexmark.BidEvent && e.Bid.DateTime%reference.WindowMs == 0
	}) {
		t.Fatal("the stream has no bid at a window's end: the test would not cover q7's boundary")
	}
	for _, q := range []struct {
		name string
		want [][]byte
	}{{"q5", q5}, {"q7", encodeBids(q7)}, {"q8", q8}} {
		t.Run(q.name, func(t *testing.T) {
			if len(q.want) == 0 {
				t.Fatal("the reference has no rows: the test would prove nothing")
			}
			sameRecords(t, q.name, runQuery(t, c, wasm, q.name, "collect", "--base-time", fmt.Sprint(base)).Records, q.want)
		})
	}
	t.Run("q4", func(t *testing.T) {
		want := reference.Q4(evs)
		if len(want) == 0 {
			t.Fatal("the reference has no rows: the test would prove nothing")
		}
		r := runQuery(t, c, wasm, "q4", "collect", "--base-time", fmt.Sprint(base))
		checkQ4(t, r.Records, want)
		r = runQuery(t, c, wasm, "q4", "collect", "--base-time", fmt.Sprint(base), "--text")
		var rows [][]byte
		for _, l := range localtest.Lines(r.Records) {
			var row typed.Tuple3[int64, int64, int64]
			if _, err := fmt.Sscanf(l, "%d\t%d\t%d", &row.A, &row.B, &row.C); err != nil {
				t.Fatalf("q4 --text: line %q: %v", l, err)
			}
			rows = append(rows, q4Codec.Append(nil, row))
		}
		checkQ4(t, rows, want)
	})
	t.Run("q8 text", func(t *testing.T) {
		r := runQuery(t, c, wasm, "q8", "collect", "--base-time", fmt.Sprint(base), "--text")
		var want []string
		for _, u := range reference.Q8(evs) {
			want = append(want, fmt.Sprintf("%d\t%s\t%d", u.ID, u.Name, u.Start))
		}
		slices.Sort(want)
		if d := localtest.Diff(want, localtest.Lines(r.Records)); d != "" {
			t.Fatalf("q8 --text:\n%s", d)
		}
	})
}

var q4Codec = typed.Triple(typed.Int64(), typed.Int64(), typed.Int64())

// checkQ4 fails t unless rows, q4's changelog, hold for each category one
// row per auction closed, numbered 1 to n, and the row numbered n has the
// reference's average.
func checkQ4(t *testing.T, rows [][]byte, want []reference.CategoryPrice) {
	t.Helper()
	seen := map[int64][]bool{} // category, closes seen by number
	final := map[int64]int64{}
	for _, b := range rows {
		r, err := q4Codec.Decode(b)
		if err != nil {
			t.Fatal(err)
		}
		n := seen[r.A]
		if int64(len(n)) < r.B {
			n = append(n, make([]bool, r.B-int64(len(n)))...)
		}
		if r.B < 1 || n[r.B-1] {
			t.Fatalf("q4: category %d has the row numbered %d twice, or a number below 1", r.A, r.B)
		}
		n[r.B-1] = true
		seen[r.A] = n
		if r.B == int64(len(n)) {
			final[r.A] = r.C
		}
	}
	var got []reference.CategoryPrice
	for c, n := range seen {
		if i := slices.Index(n, false); i >= 0 {
			t.Fatalf("q4: category %d has no row numbered %d of %d", c, i+1, len(n))
		}
		got = append(got, reference.CategoryPrice{Category: c, Avg: final[c]})
	}
	slices.SortFunc(got, func(a, b reference.CategoryPrice) int { return int(a.Category - b.Category) })
	if !slices.Equal(got, want) {
		t.Fatalf("q4: the last averages are %v, the reference's %v", got, want)
	}
}
