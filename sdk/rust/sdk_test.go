//go:build !wasip1

// Package sluice_test tests the Rust SDK (this directory's crate) beyond
// what examples/wordcount-rs uses: it builds testdata/features with
// Debian's cargo and drives it in wazero as a TaskManager would, through a
// guest source restored from its operator state, a filter, a key_by with a
// built key, a keyed process with keyed state and timers, counters, logs
// and a failure.
package sluice_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/internal/abi"
	"github.com/sluicehq/sluice/internal/jobgraph"
	"github.com/sluicehq/sluice/local/localtest"
	"github.com/sluicehq/sluice/wasmhost"
)

func TestRustSDKFeatures(t *testing.T) {
	wasm := localtest.RustGuest(t, "sdk/rust/testdata/features")
	ctx := context.Background()
	rt, err := wasmhost.NewRuntime(ctx, wasmhost.NewRuntimeConfig())
	if err != nil {
		t.Fatal(err)
	}
	defer rt.Close(ctx)
	mod, err := rt.Compile(ctx, wasm)
	if err != nil {
		t.Fatal(err)
	}
	args := []string{"--n", "100"}
	g, err := mod.Plan(ctx, args, wasmhost.Limits{})
	if err != nil {
		t.Fatal(err)
	}
	if err := jobgraph.Validate(g, 1, 0); err != nil {
		t.Fatal(err)
	}
	var kinds []string
	for _, v := range g.Vertices {
		kinds = append(kinds, string(v.Kind))
	}
	if got, want := strings.Join(kinds, " "), "source filter key_by process sink source key_by reduce map sink"; got != want {
		t.Fatalf("vertex kinds %q, want %q", got, want)
	}
	byID := map[int]jobgraph.Vertex{}
	for _, v := range g.Vertices {
		byID[v.ID] = v
	}
	chain := func(ids ...int) (vs []jobgraph.Vertex) {
		for _, id := range ids {
			vs = append(vs, byID[id])
		}
		return vs
	}

	var out []string
	down, err := mod.Instantiate(ctx, wasmhost.TaskConfig{JobID: "j", TaskName: "sum", Chain: chain(4), Parallelism: 1, Args: args,
		Emit: func(recs []abi.Record) error {
			for _, r := range recs {
				out = append(out, string(r.Value))
			}
			return nil
		}})
	if err != nil {
		t.Fatal(err)
	}
	defer down.Close(ctx)
	if err := down.Open(ctx); err != nil {
		t.Fatal(err)
	}
	source := func(state *wasmhost.State, args []string, logs *bytes.Buffer) *wasmhost.Instance {
		in, err := mod.Instantiate(ctx, wasmhost.TaskConfig{JobID: "j", TaskName: "numbers", Chain: chain(1, 2, 3), Parallelism: 1, Args: args,
			State: state, Logger: slog.New(slog.NewTextHandler(logs, nil)),
			Emit: func(recs []abi.Record) error {
				for _, r := range recs {
					if !r.HasKey || !bytes.HasPrefix(r.Key, []byte("k")) {
						return fmt.Errorf("record %q has key %q, want the key_by's k<n%%3>", r.Value, r.Key)
					}
				}
				return down.Process(ctx, recs)
			}})
		if err != nil {
			t.Fatal(err)
		}
		if err := in.Open(ctx); err != nil {
			t.Fatal(err)
		}
		return in
	}

	// 30 numbers, a checkpoint, and the task "fails": a new instance on
	// the same state resumes the source at 30.
	var logs bytes.Buffer
	up := source(nil, args, &logs)
	if done, err := up.SourcePoll(ctx, 30); done || err != nil {
		t.Fatalf("first poll: done=%v %v", done, err)
	}
	if err := up.Barrier(ctx, 1); err != nil {
		t.Fatal(err)
	}
	if got := up.Counters()["dropped"]; got != 6 {
		t.Errorf("dropped before the checkpoint = %d, want 6 (0, 5, ..., 25)", got)
	}
	state := up.State()
	up.Close(ctx)
	logs.Reset()
	up = source(state, args, &logs)
	defer up.Close(ctx)
	if !strings.Contains(logs.String(), "numbers opened at 30") {
		t.Errorf("the restored source's log: %q, want it to say it opened at 30", logs.String())
	}
	for polls := 0; ; polls++ {
		done, err := up.SourcePoll(ctx, 30)
		if err != nil {
			t.Fatal(err)
		}
		if done {
			break
		}
		if polls > 10 {
			t.Fatal("the source never returned DONE")
		}
	}

	// The timers were registered for now+10 on the virtual clock (0).
	if err := down.FireTimers(ctx, 9); err != nil || len(out) != 0 {
		t.Fatalf("timers before their time: %q %v", out, err)
	}
	if err := down.FireTimers(ctx, 10); err != nil {
		t.Fatal(err)
	}
	sums := map[int]int{}
	for i := 0; i < 100; i++ {
		if i%5 != 0 {
			sums[i%3] += i
		}
	}
	want := []string{fmt.Sprintf("k0=%d at 10", sums[0]), fmt.Sprintf("k1=%d at 10", sums[1]), fmt.Sprintf("k2=%d at 10", sums[2])}
	slices.Sort(out)
	if !slices.Equal(out, want) {
		t.Errorf("timer output %q, want %q (each number once, across the restore)", out, want)
	}
	if got := down.Counters()["timers"]; got != 3 {
		t.Errorf("timers counter = %d, want 3", got)
	}

	// sluice::fail in an operator: the call returns ERROR with the reason.
	failing := source(nil, []string{"--n", "100", "--fail-at", "7"}, &logs)
	defer failing.Close(ctx)
	_, err = failing.SourcePoll(ctx, 30)
	if !errors.Is(err, wasmhost.ErrGuestFailed) || !strings.Contains(err.Error(), "drop5: told to fail at 7") {
		t.Errorf("a failing filter: %v, want %v with its reason", err, wasmhost.ErrGuestFailed)
	}

	// Plan errors come back as the user's message.
	if _, err := mod.Plan(ctx, []string{"--n", "x"}, wasmhost.Limits{}); err == nil || !strings.Contains(err.Error(), "plan: invalid digit") {
		t.Errorf("plan with a bad number: %v", err)
	}
}

// TestRustSDKUnitTests runs the crate's own tests (`cargo test`: the batch
// codec, the JSON reader and writer, the plan's graph and its errors, and
// the examples in the documentation) natively.
func TestRustSDKUnitTests(t *testing.T) {
	localtest.RustGuest(t, "sdk/rust/testdata/features") // skips or fails without the toolchain
	target := filepath.Join(localtest.CompileCache(), "rust-sdk-test")
	cmd := exec.Command("/usr/bin/cargo", "test", "--offline", "--manifest-path", filepath.Join(localtest.ModuleRoot(t), "sdk", "rust", "Cargo.toml"))
	cmd.Env = append(os.Environ(), "RUSTC=/usr/bin/rustc", "RUSTDOC=/usr/bin/rustdoc", "CARGO_TARGET_DIR="+target)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("cargo test: %v\n%s", err, out)
	}
	if !bytes.Contains(out, []byte("test result: ok")) {
		t.Fatalf("cargo test ran no tests:\n%s", out)
	}
}
