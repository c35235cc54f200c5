//go:build !wasip1

// Package oracle_test holds the C word count's tests (Go refuses a package
// directory with C files, so they live here). They build the module with
// clang, run it on an embedded cluster and compare the counts with the
// real coreutils, at several parallelisms and across a savepoint.
package oracle_test

import (
	"testing"

	"github.com/sluicehq/sluice/local/localtest"
)

func TestWordCountCMatchesCoreutils(t *testing.T) {
	localtest.CheckWordCount(t, localtest.CGuest(t, "examples/wordcount-c"))
}

// TestWordCountCPlan: the plan names its inputs (escaped into JSON), and
// bad arguments fail the plan with a message that says what was wrong.
func TestWordCountCPlan(t *testing.T) {
	localtest.CheckWordCountPlan(t, localtest.CGuest(t, "examples/wordcount-c"), "wordcount-c")
}

// TestWordCountCSavepoint stops a p=2 run with a savepoint part-way (the
// count's barrier export writes its accumulators to keyed state) and
// resumes it at p=3: the resumed job restores the counts through
// state_scan and reads only the splits that were left, so the result is
// still exact.
func TestWordCountCSavepoint(t *testing.T) {
	localtest.CheckWordCountSavepoint(t, localtest.CGuest(t, "examples/wordcount-c"))
}
