package keygroup

import (
	"fmt"
	"testing"
)

// Every key group belongs to exactly one subtask, and Range and Subtask agree.
func TestRangesPartitionKeyGroups(t *testing.T) {
	for _, maxP := range []int{1, 7, 128, 1000} {
		for p := 1; p <= maxP && p <= 40; p++ {
			next := 0
			for i := 0; i < p; i++ {
				start, end := Range(i, p, maxP)
				if start != next {
					t.Fatalf("maxP %d p %d subtask %d starts at %d, want %d", maxP, p, i, start, next)
				}
				for kg := start; kg <= end; kg++ {
					if s := Subtask(kg, p, maxP); s != i {
						t.Fatalf("maxP %d p %d: key group %d in range of %d but Subtask says %d", maxP, p, kg, i, s)
					}
				}
				next = end + 1
			}
			if next != maxP {
				t.Fatalf("maxP %d p %d: ranges end at %d", maxP, p, next)
			}
		}
	}
}

func TestOfSpreadsKeys(t *testing.T) {
	const maxP, n = 128, 128 * 200
	counts := make([]int, maxP)
	for i := 0; i < n; i++ {
		counts[Of([]byte(fmt.Sprintf("word%d", i)), maxP)]++
	}
	for kg, c := range counts {
		if c < n/maxP/2 || c > n/maxP*2 {
			t.Errorf("key group %d got %d of %d keys; want near %d", kg, c, n, n/maxP)
		}
	}
}
