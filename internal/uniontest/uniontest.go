// Package uniontest computes what the union test guest
// (sdk/guest/internal/unionjob) must
// emit, in plain Go, for the tests that run it: one oracle for the
// harness's tests and the cluster's.
package uniontest

import (
	"fmt"
	"sort"
	"strings"
)

// Base is the first event's time (the job's Base).
const Base = 1_700_000_000_000

type window struct {
	key   string
	start int64
}

func key(i int64, keys int) string { return fmt.Sprintf("k%d", (i/2)%int64(keys)) }

// each calls fn for the events [0, n) of the job with keys keys in
// tumbling windows of size ms, in order.
func each(n int64, keys int, size int64, fn func(i int64, w window)) {
	eachSliding(n, keys, size, size, fn)
}

// eachSliding calls fn for each event and each sliding window (size,
// every slide ms) it is in.
func eachSliding(n int64, keys int, size, slide int64, fn func(i int64, w window)) {
	for i := int64(0); i < n; i++ {
		t := Base + 10*i
		for s := t - t%slide; s > t-size; s -= slide {
			fn(i, window{key(i, keys), s})
		}
	}
}

// Union is --mode union's output: "key start end sum" per key and window,
// sorted.
func Union(n int64, keys int, size int64) []string {
	sums := map[window]int64{}
	each(n, keys, size, func(i int64, w window) { sums[w] += i })
	var out []string
	for w, s := range sums {
		out = append(out, fmt.Sprintf("%s %d %d %d", w.key, w.start, w.start+size, s))
	}
	sort.Strings(out)
	return out
}

// sides returns each key and window's even (source a) and odd (b) events.
func sides(n int64, keys int, size, slide int64) map[window][2][]string {
	m := map[window][2][]string{}
	eachSliding(n, keys, size, slide, func(i int64, w window) {
		s := m[w]
		s[i%2] = append(s[i%2], fmt.Sprint(i))
		m[w] = s
	})
	return m
}

// Join is --mode join's output: "key start a b" per pair, sorted; slide
// is the windows' (size for tumbling ones).
func Join(n int64, keys int, size, slide int64) []string {
	var out []string
	for w, s := range sides(n, keys, size, slide) {
		for _, a := range s[0] {
			for _, b := range s[1] {
				out = append(out, fmt.Sprintf("%s %d %s %s", w.key, w.start, a, b))
			}
		}
	}
	sort.Strings(out)
	return out
}

// CoGroup is --mode cogroup's output: "key start as bs" per key and
// window, sorted.
func CoGroup(n int64, keys int, size, slide int64) []string {
	list := func(vs []string) string {
		if len(vs) == 0 {
			return "-"
		}
		return strings.Join(vs, ",")
	}
	var out []string
	for w, s := range sides(n, keys, size, slide) {
		out = append(out, fmt.Sprintf("%s %d %s %s", w.key, w.start, list(s[0]), list(s[1])))
	}
	sort.Strings(out)
	return out
}

// Interval is --mode interval's output: "key a b" for each a (even) and b
// (odd) event of one key with b's time in [a's+lower, a's+upper], sorted.
func Interval(n int64, keys int, lower, upper int64) []string {
	var out []string
	for a := int64(0); a < n; a += 2 {
		for b := a + lower/10 - 1; b <= a+upper/10+1; b++ {
			if b < 0 || b >= n || b%2 == 0 {
				continue
			}
			if d := 10 * (b - a); d >= lower && d <= upper && key(a, keys) == key(b, keys) {
				out = append(out, fmt.Sprintf("%s %d %d", key(a, keys), a, b))
			}
		}
	}
	sort.Strings(out)
	return out
}
