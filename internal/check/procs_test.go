package main

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"testing"
)

func TestSetsProcsFindsWrites(t *testing.T) {
	src := `package p

import (
	"runtime"
	rt "runtime"
)

func f() {
	_ = runtime.GOMAXPROCS(0)
	runtime.GOMAXPROCS(4)
	rt.GOMAXPROCS(runtime.GOMAXPROCS(0) + 1)
}
`
	path := filepath.Join(t.TempDir(), "p.go")
	if err := os.WriteFile(path, []byte(src), 0o600); err != nil {
		t.Fatal(err)
	}
	got, err := setsProcs(path)
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"10", "11"}; !slices.Equal(got, want) {
		t.Fatalf("lines %v, want %v", got, want)
	}
}

// Host code never sets GOMAXPROCS (the test command checks this too; here
// it also runs under plain go test).
func TestRepositoryNeverSetsGOMAXPROCS(t *testing.T) {
	root, err := moduleRoot()
	if err != nil {
		t.Fatal(err)
	}
	if err := procsCheck(context.Background(), root); err != nil {
		t.Fatal(err)
	}
}
