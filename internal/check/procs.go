package main

import (
	"context"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"strconv"
	"strings"
)

// procsCheck enforces that host code never sets GOMAXPROCS: a library that
// changes the process's scheduler surprises whoever embeds it, and the CPU
// is shared among tenants by fuel instead (docs/RATIONALE.md, "Why fuel,
// not nice values?"). It looks at every non-test Go file of the module for
// a call of runtime.GOMAXPROCS with an argument other than the constant 0
// (which only reads it).
func procsCheck(_ context.Context, root string) error {
	var found []string
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if n := d.Name(); path != root && (strings.HasPrefix(n, ".") || n == "testdata" || n == "kitex_gen") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		calls, err := setsProcs(path)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, path)
		for _, c := range calls {
			found = append(found, rel+":"+c)
		}
		return nil
	})
	if err != nil {
		return err
	}
	if len(found) > 0 {
		return fmt.Errorf("host code sets GOMAXPROCS (it must only read it, with runtime.GOMAXPROCS(0)):\n\t%s", strings.Join(found, "\n\t"))
	}
	return nil
}

// setsProcs returns the lines of the file at path that call
// runtime.GOMAXPROCS with anything but 0.
func setsProcs(path string) ([]string, error) {
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
	if err != nil {
		return nil, err
	}
	names := map[string]bool{}
	for _, im := range f.Imports {
		if p, _ := strconv.Unquote(im.Path.Value); p == "runtime" {
			n := "runtime"
			if im.Name != nil {
				n = im.Name.Name
			}
			names[n] = true
		}
	}
	if len(names) == 0 {
		return nil, nil
	}
	var out []string
	ast.Inspect(f, func(n ast.Node) bool {
		call, ok := n.(*ast.CallExpr)
		if !ok {
			return true
		}
		sel, ok := call.Fun.(*ast.SelectorExpr)
		if !ok || sel.Sel.Name != "GOMAXPROCS" {
			return true
		}
		if x, ok := sel.X.(*ast.Ident); !ok || !names[x.Name] {
			return true
		}
		if len(call.Args) == 1 {
			if lit, ok := call.Args[0].(*ast.BasicLit); ok && lit.Kind == token.INT && lit.Value == "0" {
				return true
			}
		}
		out = append(out, strconv.Itoa(fset.Position(call.Pos()).Line))
		return true
	})
	return out, nil
}
