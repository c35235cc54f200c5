//go:build !wasip1

// The word count's oracle test runs on the host (the job itself builds only
// for wasip1): it builds the module, runs it on an embedded cluster at
// parallelism 1, 2 and 4, and compares the counts with the real coreutils.
package main_test

import (
	"testing"

	"github.com/sluicehq/sluice/local/localtest"
)

func TestWordCountMatchesCoreutils(t *testing.T) {
	localtest.CheckWordCount(t, localtest.Guest(t, "examples/wordcount"))
}
