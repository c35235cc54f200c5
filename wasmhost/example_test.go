package wasmhost_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"os"
	"time"

	"github.com/sluicehq/sluice/internal/abi"
	"github.com/sluicehq/sluice/internal/guestbuild"
	"github.com/sluicehq/sluice/wasmhost"
)

// guestWasm builds the test guest (testdata/testguest, a Go program on
// sdk/guest) to a module; a real caller reads the module a user uploaded.
func guestWasm(ctx context.Context) []byte {
	path, err := guestbuild.Build(ctx, "testdata/testguest")
	if err != nil {
		log.Fatal(err)
	}
	wasm, err := os.ReadFile(path)
	if err != nil {
		log.Fatal(err)
	}
	return wasm
}

// Compile refuses what is not a Sluice guest, saying why.
func ExampleRuntime_Compile() {
	ctx := context.Background()
	rt, err := wasmhost.NewRuntime(ctx, wasmhost.NewRuntimeConfig().WithMaxModuleBytes(16<<20))
	if err != nil {
		log.Fatal(err)
	}
	defer rt.Close(ctx)

	_, err = rt.Compile(ctx, []byte("(module)"))
	fmt.Println(errors.Is(err, wasmhost.ErrInvalidModule))
	fmt.Println(err)
	// Output:
	// true
	// invalid module: not a WebAssembly module (no \0asm magic)
}

// Plan runs the guest's plan export in a sandbox with limits and returns the
// job graph it declares.
func ExampleModule_Plan() {
	ctx := context.Background()
	rt, err := wasmhost.NewRuntime(ctx, wasmhost.NewRuntimeConfig())
	if err != nil {
		log.Fatal(err)
	}
	defer rt.Close(ctx)
	mod, err := rt.Compile(ctx, guestWasm(ctx))
	if err != nil {
		log.Fatal(err)
	}

	lim := wasmhost.Limits{MemoryLimitBytes: 64 << 20, CallTimeout: 5 * time.Second}
	g, err := mod.Plan(ctx, []string{"bench"}, lim)
	if err != nil {
		log.Fatal(err)
	}
	for _, v := range g.Vertices {
		who := "guest code"
		if v.Connector != "" {
			who = "host connector " + v.Connector
		}
		fmt.Printf("%d %s %q: %s\n", v.ID, v.Kind, v.Name, who)
	}
	// Output:
	// 1 source "in": host connector text
	// 2 map "upper": guest code
	// 3 sink "out": host connector collect
}

// A task runs the guest operators of its chain in one instance: each batch
// is one call into the guest, and what the chain's tail emits reaches Emit
// during that call.
func ExampleInstance_Process() {
	ctx := context.Background()
	rt, err := wasmhost.NewRuntime(ctx, wasmhost.NewRuntimeConfig())
	if err != nil {
		log.Fatal(err)
	}
	defer rt.Close(ctx)
	mod, err := rt.Compile(ctx, guestWasm(ctx))
	if err != nil {
		log.Fatal(err)
	}
	args := []string{"bench"}
	g, err := mod.Plan(ctx, args, wasmhost.Limits{})
	if err != nil {
		log.Fatal(err)
	}

	in, err := mod.Instantiate(ctx, wasmhost.TaskConfig{
		JobID: "example", TaskName: "upper", Args: args,
		Chain:       g.Vertices[1:2], // the guest's map; source and sink are host connectors
		Parallelism: 1,
		Limits:      wasmhost.Limits{MemoryLimitBytes: 64 << 20, CallTimeout: time.Second},
		Emit: func(recs []abi.Record) error {
			for _, r := range recs {
				fmt.Println(string(r.Value)) // r aliases guest memory: copy what you keep
			}
			return nil
		},
	})
	if err != nil {
		log.Fatal(err)
	}
	defer in.Close(ctx)
	if err := in.Open(ctx); err != nil {
		log.Fatal(err)
	}
	batch := []abi.Record{{Value: []byte("hello")}, {Value: []byte("wasm")}}
	if err := in.Process(ctx, batch); err != nil {
		log.Fatal(err)
	}
	// Output:
	// HELLO
	// WASM
}
