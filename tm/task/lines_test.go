package task

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/blob"
	"github.com/sluicehq/sluice/internal/checkpoint"
)

func openStore(t testing.TB) blob.Store {
	t.Helper()
	s, err := blob.Open(context.Background(), "file://"+t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func put(t testing.TB, s blob.Store, key string, data []byte) {
	t.Helper()
	if err := s.Put(context.Background(), key, bytes.NewReader(data), int64(len(data))); err != nil {
		t.Fatal(err)
	}
}

// wantLines is the oracle: the lines of data without "\n" or "\r\n".
func wantLines(data []byte) []string {
	if len(data) == 0 {
		return nil
	}
	s := strings.TrimSuffix(string(data), "\n")
	var out []string
	for _, l := range strings.Split(s, "\n") {
		out = append(out, strings.TrimSuffix(l, "\r"))
	}
	return out
}

// cut splits size bytes into splits of n bytes (the last one shorter).
func cut(key string, size, n int64) []checkpoint.Split {
	var sps []checkpoint.Split
	for off := int64(0); off < size; off += n {
		sps = append(sps, checkpoint.Split{Key: key, Offset: off, Length: min(n, size-off)})
	}
	if size == 0 {
		sps = append(sps, checkpoint.Split{Key: key})
	}
	return sps
}

func readAll(t *testing.T, s blob.Store, sps []checkpoint.Split) []string {
	t.Helper()
	var got []string
	for _, sp := range sps {
		err := readSplit(context.Background(), s, sp, func(l []byte, _ int64) error {
			got = append(got, string(l))
			return nil
		})
		if err != nil {
			t.Fatalf("split %+v: %v", sp, err)
		}
	}
	return got
}

// Every line is read by exactly one split, whatever the split boundaries:
// boundaries on a newline, right after one, inside "\r\n", inside a line.
func TestSplitsReadEveryLineOnce(t *testing.T) {
	s := openStore(t)
	cases := []string{
		"",
		"\n",
		"a",
		"a\n",
		"a\nbb\nccc\n",
		"a\nbb\nccc",
		"\n\n\nx\n\n",
		"one\r\ntwo\r\n\r\nthree",
		"long line without any newline at all, longer than a split",
	}
	rng := rand.New(rand.NewPCG(1, 2))
	for i := 0; i < 40; i++ {
		var b strings.Builder
		for j := rng.IntN(30); j > 0; j-- {
			b.WriteString(strings.Repeat("x", rng.IntN(12)))
			if rng.IntN(4) == 0 {
				b.WriteString("\r")
			}
			b.WriteString("\n")
		}
		if rng.IntN(2) == 0 {
			b.WriteString("tail")
		}
		cases = append(cases, b.String())
	}
	for i, c := range cases {
		key := fmt.Sprintf("in/%d.txt", i)
		put(t, s, key, []byte(c))
		want := wantLines([]byte(c))
		for _, n := range []int64{1, 2, 3, 5, 7, 64, 1 << 20} {
			got := readAll(t, s, cut(key, int64(len(c)), n))
			if strings.Join(got, "|") != strings.Join(want, "|") || len(got) != len(want) {
				t.Fatalf("content %q in splits of %d: got %q, want %q", c, n, got, want)
			}
		}
	}
}

// A line longer than the first range request is finished with further
// range requests; a huge object is not read past the split's last line.
func TestSplitReadsPastItsEndOnlyToFinishTheLine(t *testing.T) {
	s := openStore(t)
	long := strings.Repeat("y", 3*readAhead+17)
	data := "a\n" + long + "\nb\n" + strings.Repeat("z\n", 100)
	put(t, s, "in/long.txt", []byte(data))
	got := readAll(t, s, []checkpoint.Split{{Key: "in/long.txt", Offset: 0, Length: 3}})
	if len(got) != 2 || got[0] != "a" || got[1] != long {
		t.Fatalf("got %d lines", len(got))
	}
	got = readAll(t, s, []checkpoint.Split{{Key: "in/long.txt", Offset: 3, Length: int64(len(data)) - 3}})
	if len(got) != 101 || got[0] != "b" {
		t.Fatalf("second split: %d lines, first %q", len(got), got[0])
	}
}
