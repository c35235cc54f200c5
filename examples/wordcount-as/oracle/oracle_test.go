//go:build !wasip1

// Package oracle_test holds the AssemblyScript word count's tests. They
// build the module with the SDK and the pinned compiler, run it on an
// embedded cluster and compare the counts with the real coreutils, at
// several parallelisms and across a savepoint.
package oracle_test

import (
	"testing"

	"github.com/sluicehq/sluice/local/localtest"
)

const guestDir = "examples/wordcount-as"

func TestWordCountASMatchesCoreutils(t *testing.T) {
	localtest.CheckWordCount(t, localtest.ASGuest(t, guestDir))
}

// TestWordCountASPlan: the plan names its inputs (escaped into JSON), and
// bad arguments fail the plan with a message that says what was wrong.
func TestWordCountASPlan(t *testing.T) {
	localtest.CheckWordCountPlan(t, localtest.ASGuest(t, guestDir), "wordcount-as")
}

// TestWordCountASSavepoint stops a p=2 run with a savepoint part-way (the
// SDK's reduce writes its accumulators to keyed state at the barrier) and
// resumes it at p=3: the resumed job reads the counts back from keyed state
// and reads only the splits that were left, so the result is still exact.
func TestWordCountASSavepoint(t *testing.T) {
	localtest.CheckWordCountSavepoint(t, localtest.ASGuest(t, guestDir))
}
