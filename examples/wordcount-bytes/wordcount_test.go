//go:build !wasip1

// The byte-level word count's tests run on the host (the job itself builds
// only for wasip1): they build the module, run it on an embedded cluster at
// parallelism 1, 2 and 4 and across a savepoint, and compare the counts with
// the real coreutils.
package main_test

import (
	"testing"

	"github.com/sluicehq/sluice/local/localtest"
)

func TestWordCountBytesMatchesCoreutils(t *testing.T) {
	localtest.CheckWordCount(t, localtest.Guest(t, "examples/wordcount-bytes"))
}

// TestWordCountBytesPlan: the plan names its inputs (escaped into JSON), and
// bad arguments fail the plan with a message that says what was wrong.
func TestWordCountBytesPlan(t *testing.T) {
	localtest.CheckWordCountPlan(t, localtest.Guest(t, "examples/wordcount-bytes"), "wordcount-bytes")
}

// TestWordCountBytesSavepoint stops a p=2 run with a savepoint part-way (the
// reduce writes its cached counts to keyed state at the barrier) and resumes
// it at p=3: the counts are restored and only the splits left are read, so
// the result is still exact.
func TestWordCountBytesSavepoint(t *testing.T) {
	localtest.CheckWordCountSavepoint(t, localtest.Guest(t, "examples/wordcount-bytes"))
}
