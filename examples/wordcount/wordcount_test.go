//go:build !wasip1

// The word count's oracle test runs on the host (the job itself builds only
// for wasip1): it builds the module, runs it on an embedded cluster at
// parallelism 1, 2 and 4, and compares the counts with the real coreutils.
package main_test

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/cluster"
	"github.com/sluicehq/sluice/internal/cluster/clustertest"
	"github.com/sluicehq/sluice/sdk/client"
)

// inputSize is the generated input: several megabytes, so every subtask of
// the p=4 run reads several splits and the shuffle carries many buffers.
const inputSize = 4 << 20

func TestWordCountMatchesCoreutils(t *testing.T) {
	wasm := clustertest.Guest(t, "examples/wordcount")
	in := filepath.Join(t.TempDir(), "input.txt")
	if err := clustertest.GenerateText(in, inputSize, 1); err != nil {
		t.Fatal(err)
	}
	want := clustertest.CoreutilsWordCount(t, in)
	if len(want) < 1000 {
		t.Fatalf("the oracle found only %d distinct words: the generator is broken", len(want))
	}

	// Two TaskManagers of two slots: p=4 fills both, so records cross the
	// data port between TaskManagers as well as in memory.
	c := clustertest.Start(t, cluster.Config{TaskManagers: 2, Slots: 2})
	cl, err := c.Client()
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range []int{1, 2, 4} {
		t.Run(fmt.Sprintf("p=%d", p), func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
			defer cancel()
			id, r, err := clustertest.RunJob(ctx, cl, c.Blob(), wasm, []string{"--input", in}, p)
			if err != nil {
				t.Fatal(err)
			}
			if r.State != client.StateFinished {
				t.Fatalf("job %s ended %s: %s", id, r.State, r.Failure)
			}
			if d := clustertest.Diff(want, clustertest.Lines(r.Records)); d != "" {
				t.Fatalf("word counts differ from coreutils:\n%s", d)
			}
			t.Logf("p=%d: %d distinct words in %v", p, len(r.Records), r.Duration)
		})
	}
}
