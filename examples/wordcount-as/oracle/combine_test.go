//go:build !wasip1

package oracle_test

import (
	"testing"

	"github.com/sluicehq/sluice/local/localtest"
)

// TestWordCountASCombineMatchesCoreutils: with --combine (the key_by
// is a per-call combiner, an SDK feature) the counts are still exactly
// coreutils', at parallelism 1, 2 and 4.
func TestWordCountASCombineMatchesCoreutils(t *testing.T) {
	localtest.CheckWordCount(t, localtest.ASGuest(t, guestDir), "--combine")
}

// TestWordCountASCombineSavepoint: a combined run stopped with a savepoint
// and resumed at another parallelism is exact: the combiner holds nothing
// between calls, so no count is in flight at a barrier.
func TestWordCountASCombineSavepoint(t *testing.T) {
	localtest.CheckWordCountSavepoint(t, localtest.ASGuest(t, guestDir), "--combine")
}

// TestWordCountASCombinerEmitsCountsPerCall runs the tokenize chain alone in
// wazero, with and without --combine, over the same batches: without it
// the chain emits one record per word; with it, one per distinct word of
// each call, valued with the word's count in that call, which add up to
// the same totals.
func TestWordCountASCombinerEmitsCountsPerCall(t *testing.T) {
	localtest.CheckCombinerEmitsCountsPerCall(t, localtest.ASGuest(t, guestDir))
}
