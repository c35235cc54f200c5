package main

import (
	"bufio"
	"context"
	_ "embed"
	"fmt"
	"maps"
	"slices"
	"strings"
)

//go:embed layers.txt
var layersFile string

// A rule says which packages the packages matched by from may reach (only
// set) or must not reach (deny set), transitively.
type rule struct {
	line int
	text string
	from []string // patterns; a leading "!" drops what it matches (on both sides)
	only bool     // reaches-only: to lists all that is allowed besides std
	to   []string // patterns
}

// parseRules reads the layers file's grammar (see layers.txt).
func parseRules(src string) ([]rule, error) {
	var rules []rule
	sc := bufio.NewScanner(strings.NewReader(src))
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		fields := strings.Fields(line)
		i := slices.IndexFunc(fields, func(f string) bool { return f == "must-not-reach" || f == "reaches-only" })
		if i < 1 {
			return nil, fmt.Errorf("layers.txt:%d: want `FROM... must-not-reach TO...` or `FROM... reaches-only TO...`, got %q", n, line)
		}
		r := rule{line: n, text: line, from: fields[:i], only: fields[i] == "reaches-only", to: fields[i+1:]}
		if !r.only && len(r.to) == 0 {
			return nil, fmt.Errorf("layers.txt:%d: must-not-reach needs at least one package pattern after it", n)
		}
		rules = append(rules, r)
	}
	return rules, sc.Err()
}

// match reports whether pkg matches pattern, a module-relative path or a
// full one (with a dot in its first element), optionally ending in "/...".
func match(module, pattern, pkg string) bool {
	if first, _, _ := strings.Cut(pattern, "/"); !strings.Contains(first, ".") {
		pattern = module + "/" + pattern
	}
	if base, ok := strings.CutSuffix(pattern, "/..."); ok {
		return pkg == base || strings.HasPrefix(pkg, base+"/")
	}
	return pkg == pattern
}

func matchAny(module string, patterns []string, pkg string) bool {
	return slices.ContainsFunc(patterns, func(p string) bool { return match(module, p, pkg) })
}

// selects reports whether patterns select pkg: it matches one pattern and
// none of the "!" ones.
func selects(module string, patterns []string, pkg string) bool {
	var in, out []string
	for _, p := range patterns {
		if q, ok := strings.CutPrefix(p, "!"); ok {
			out = append(out, q)
		} else {
			in = append(in, p)
		}
	}
	return matchAny(module, in, pkg) && !matchAny(module, out, pkg)
}

// standard reports whether an import path is the standard library's: its
// first element has no dot.
func standard(pkg string) bool {
	first, _, _ := strings.Cut(pkg, "/")
	return !strings.Contains(first, ".")
}

// graph is the module's packages as go list -deps sees them: each one's
// direct imports and transitive deps (non-test code).
type graph struct {
	imports map[string][]string
	deps    map[string][]string
}

// violations checks every package of the module against rules and returns
// one line per broken rule and package, naming one package it must not
// reach (one of the module's own first, as the likelier mistake) and the
// direct import it comes through.
func violations(module string, g graph, rules []rule) []string {
	var bad []string
	for _, pkg := range slices.Sorted(maps.Keys(g.deps)) {
		for _, r := range rules {
			if !selects(module, r.from, pkg) {
				continue
			}
			var offenders []string
			for _, d := range g.deps[pkg] {
				if r.only && !standard(d) && !selects(module, r.to, d) || !r.only && selects(module, r.to, d) {
					offenders = append(offenders, d)
				}
			}
			if len(offenders) == 0 {
				continue
			}
			d := offenders[0]
			if i := slices.IndexFunc(offenders, func(o string) bool { return strings.HasPrefix(o, module+"/") }); i >= 0 {
				d = offenders[i]
			}
			via := ""
			for _, imp := range g.imports[pkg] {
				if imp != d && slices.Contains(g.deps[imp], d) {
					via = " through its import of " + strings.TrimPrefix(imp, module+"/")
					break
				}
			}
			bad = append(bad, fmt.Sprintf("%s reaches %s%s, which layers.txt:%d forbids (%s); move the code to a layer that may import it",
				strings.TrimPrefix(pkg, module+"/"), d, via, r.line, r.text))
		}
	}
	return bad
}

// layersCheck fails when a package's imports break a rule of layers.txt.
func layersCheck(ctx context.Context, root string) error {
	rules, err := parseRules(layersFile)
	if err != nil {
		return err
	}
	out, err := runIn(ctx, root, nil, "go", "list", "-f", "{{.ImportPath}}|{{join .Imports \" \"}}|{{join .Deps \" \"}}", "./...")
	if err != nil {
		return err
	}
	module, err := runIn(ctx, root, nil, "go", "list", "-m")
	if err != nil {
		return err
	}
	g := graph{imports: map[string][]string{}, deps: map[string][]string{}}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		f := strings.Split(line, "|")
		if len(f) != 3 {
			return fmt.Errorf("go list printed %q, want package|imports|deps", line)
		}
		g.imports[f[0]], g.deps[f[0]] = strings.Fields(f[1]), strings.Fields(f[2])
	}
	if bad := violations(strings.TrimSpace(string(module)), g, rules); len(bad) > 0 {
		return fmt.Errorf("%d import(s) break the layer rules:\n%s", len(bad), strings.Join(bad, "\n"))
	}
	return nil
}
