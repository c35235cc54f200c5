package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"
	"unicode/utf8"

	"github.com/spf13/cobra"

	"github.com/sluicehq/sluice/internal/jobgraph"
	"github.com/sluicehq/sluice/wasmhost"
)

type planFlags struct {
	json        bool
	parallelism int
	timeout     time.Duration
	memory      uint64
	wasmOpt     string
}

func newPlanCmd() *cobra.Command {
	var f planFlags
	cmd := &cobra.Command{
		Use:   "plan MODULE_OR_SOURCE_DIR [-- ARGS]",
		Short: "Print the job graph a module declares, without a cluster",
		Long: `Run the module's plan export in a local sandbox with ARGS and print the job
graph it declares: operators with their kind, parallelism and connector, the
edges with their partitioner, and how operators chain into tasks at the
default parallelism -p. A source directory (a Go package, or C files) is
built first (cached). Nothing is submitted; no cluster is needed.

The graph is validated as a JobManager would; an invalid graph is printed
along with the problems and the command fails.`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			target, jobArgs := args[0], args[1:]
			if n := cmd.ArgsLenAtDash(); n > 1 {
				return usageErr(fmt.Errorf("one module or package before --, got %d: %q", n, args[:n]))
			} else if n < 0 && len(args) > 1 {
				return usageErr(fmt.Errorf("job arguments go after --: sluice plan %s -- %s", target, strings.Join(args[1:], " ")))
			}
			if f.parallelism < 1 {
				return usageErr(fmt.Errorf("-p %d: parallelism must be at least 1", f.parallelism))
			}
			ctx, cancel := signalContext(cmd.Context())
			defer cancel()
			return planJob(ctx, cmd.OutOrStdout(), cmd.ErrOrStderr(), target, jobArgs, f)
		},
	}
	fl := cmd.Flags()
	fl.BoolVar(&f.json, "json", false, "print the graph and its tasks as JSON")
	fl.IntVarP(&f.parallelism, "parallelism", "p", 1, "default parallelism, for validating and chaining")
	fl.DurationVar(&f.timeout, "timeout", wasmhost.DefaultCallTimeout, "deadline of the guest's plan call")
	fl.Uint64Var(&f.memory, "memory", wasmhost.DefaultMemoryLimitBytes, "memory cap of the sandbox, in bytes")
	wasmOptFlag(cmd, &f.wasmOpt)
	return cmd
}

// planOutput is what --json prints.
type planOutput struct {
	Module string           `json:"module"`
	Graph  *jobgraph.Graph  `json:"graph"`
	Tasks  []jobgraph.Chain `json:"tasks"`
	Errors string           `json:"errors,omitempty"`
}

// planJob loads or builds the module, plans it in a sandbox and prints the
// graph to stdout.
func planJob(ctx context.Context, stdout, stderr io.Writer, target string, jobArgs []string, f planFlags) error {
	wasm, err := loadModule(ctx, target, f.wasmOpt, stderr)
	if err != nil {
		return err
	}
	cfg := wasmhost.NewRuntimeConfig()
	if d, err := os.UserCacheDir(); err == nil {
		cfg = cfg.WithCacheDir(filepath.Join(d, "sluice", "wazero"))
	}
	rt, err := wasmhost.NewRuntime(ctx, cfg)
	if err != nil {
		return err
	}
	defer rt.Close(context.WithoutCancel(ctx))
	mod, err := rt.Compile(ctx, wasm)
	if err != nil {
		return fmt.Errorf("%s: %w", target, err)
	}
	g, err := mod.Plan(ctx, jobArgs, wasmhost.Limits{CallTimeout: f.timeout, MemoryLimitBytes: f.memory})
	if err != nil {
		return fmt.Errorf("plan %s: %w", target, err)
	}
	verr := jobgraph.Validate(g, f.parallelism, 0)
	out := planOutput{Module: mod.Digest(), Graph: g, Tasks: jobgraph.Chains(g, f.parallelism)}
	if verr != nil {
		out.Errors = verr.Error()
	}
	if f.json {
		if err := writeJSON(stdout, out); err != nil {
			return err
		}
	} else {
		printPlan(stdout, out, f.parallelism)
	}
	return verr
}

func printPlan(w io.Writer, p planOutput, parallelism int) {
	g := p.Graph
	name := quoteName(g.Name)
	if g.Name == "" {
		name = "(unnamed)"
	}
	fmt.Fprintf(w, "job %s\n", name)
	fmt.Fprintf(w, "module %s\n", p.Module)
	fmt.Fprintf(w, "max parallelism %d, default parallelism %d\n\n", jobgraph.MaxParallelismOf(g), parallelism)

	byID := make(map[int]*jobgraph.Vertex, len(g.Vertices))
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tOPERATOR\tKIND\tPARALLELISM\tRUNS IN\tCONFIG")
	for i := range g.Vertices {
		v := &g.Vertices[i]
		byID[v.ID] = v
		p := fmt.Sprint(jobgraph.ParallelismOf(v, parallelism))
		if v.Parallelism == 0 {
			p += " (default)"
		}
		where := "guest"
		if v.Connector != "" {
			where = "host connector " + quoteName(v.Connector)
		}
		fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%s\t%s\n", v.ID, quoteName(v.Name), quoteName(string(v.Kind)), p, where, configString(v.Config))
	}
	tw.Flush()

	fmt.Fprintln(w, "\nedges:")
	tw = tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	for _, e := range g.Edges {
		fmt.Fprintf(tw, "  %s\t->\t%s\t%s\n", vertexLabel(byID, e.Source), vertexLabel(byID, e.Target), quoteName(string(e.Partitioner)))
	}
	tw.Flush()

	fmt.Fprintln(w, "\ntasks (chained operators):")
	for i, c := range p.Tasks {
		names := make([]string, len(c.Vertices))
		for j, id := range c.Vertices {
			names[j] = vertexLabel(byID, id)
		}
		fmt.Fprintf(w, "  task %d  x%d  %s\n", i+1, c.Parallelism, strings.Join(names, " -> "))
	}
	if p.Errors != "" {
		fmt.Fprintf(w, "\ninvalid: %s\n", safeText(p.Errors))
	}
}

func vertexLabel(byID map[int]*jobgraph.Vertex, id int) string {
	if v, ok := byID[id]; ok && v.Name != "" {
		return fmt.Sprintf("%s(%d)", quoteName(v.Name), id)
	}
	return fmt.Sprint(id)
}

func configString(c map[string]string) string {
	keys := make([]string, 0, len(c))
	for k := range c {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = quoteName(k) + "=" + quoteName(c[k])
	}
	return strings.Join(parts, " ")
}

// The job graph's names and config come from the guest: printed raw, a name
// could clear the screen, fake lines of output or hide in a megabyte.

// maxShownName is how much of a guest-chosen string a table shows.
const maxShownName = 2 * jobgraph.MaxNameBytes

// quoteName returns a guest-chosen string as it is when every character of
// it is printable and it is short, else as a Go string literal (with
// control characters and invalid UTF-8 escaped), cut to maxShownName bytes.
func quoteName(s string) string {
	if len(s) > maxShownName {
		return fmt.Sprintf("%s... (%d bytes)", strconv.Quote(s[:maxShownName]), len(s))
	}
	if printable(s) {
		return s
	}
	return strconv.Quote(s)
}

// printable reports whether s is valid UTF-8 made of printable characters
// and the ASCII space only.
func printable(s string) bool {
	for i, r := range s {
		if r == utf8.RuneError {
			if _, n := utf8.DecodeRuneInString(s[i:]); n == 1 {
				return false
			}
		}
		if !strconv.IsPrint(r) {
			return false
		}
	}
	return true
}

// safeText escapes the characters of guest-supplied text (a failure with
// the guest's own message, its stderr) that a terminal would act on, as
// strconv.Quote does, and keeps its line breaks and tabs.
func safeText(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); {
		r, n := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && n == 1:
			fmt.Fprintf(&b, "\\x%02x", s[i])
		case r == '\n' || r == '\t' || strconv.IsPrint(r):
			b.WriteString(s[i : i+n])
		default:
			q := strconv.QuoteRune(r)
			b.WriteString(q[1 : len(q)-1])
		}
		i += n
	}
	return b.String()
}
