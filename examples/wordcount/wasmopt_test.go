//go:build !wasip1

package main_test

import (
	"bytes"
	"testing"

	"github.com/sluicehq/sluice/internal/guestbuild"
	"github.com/sluicehq/sluice/local/localtest"
)

// TestWordCountWasmOptMatchesCoreutils: the word count as `sluice run
// --wasm-opt` builds it (wasm-opt at the default level) is a different
// module that gives exactly the coreutils counts at p=1, 2 and 4, as the
// plain one does.
func TestWordCountWasmOptMatchesCoreutils(t *testing.T) {
	opt := localtest.WasmOptGuest(t, "examples/wordcount", guestbuild.DefaultWasmOptLevel)
	if bytes.Equal(opt, localtest.Guest(t, "examples/wordcount")) {
		t.Fatal("wasm-opt left the module unchanged")
	}
	localtest.CheckWordCount(t, opt)
}
