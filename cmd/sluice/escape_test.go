package main

import (
	"bytes"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/internal/jobgraph"
	"github.com/sluicehq/sluice/sdk/client"
)

// hostileGraph is a plan a guest chose to attack the terminal of whoever
// runs `sluice plan` or `sluice status`.
func hostileGraph() *jobgraph.Graph {
	return &jobgraph.Graph{
		Name: "clear\x1b[2J\x1b[Hscreen",
		Vertices: []jobgraph.Vertex{
			{ID: 1, Name: "in\nfake line", Kind: jobgraph.KindSource, Connector: "text", Config: map[string]string{"paths": "[\"a\"]\x1b]0;title\x07"}},
			{ID: 2, Name: strings.Repeat("n", 1<<20), Kind: "map\r"},
			{ID: 3, Name: "out\u202e", Kind: jobgraph.KindSink, Connector: "collect\xff"},
		},
		Edges: []jobgraph.Edge{{Source: 1, Target: 2, Partitioner: "forward\x1b[1m"}, {Source: 2, Target: 3, Partitioner: jobgraph.Forward}},
	}
}

// checkNoRawControls fails when out holds a control or format character
// other than the line breaks and tabs of the layout, or any line beyond
// what the layout prints.
func checkNoRawControls(t *testing.T, out string) {
	t.Helper()
	for i, r := range out {
		if r != '\n' && r != '\t' && (r < 0x20 || r == 0x7f || r == 0xfffd || r == '\u202e') {
			t.Fatalf("raw %U at byte %d of the output:\n%q", r, i, out)
		}
	}
	if strings.Contains(out, "\nfake line") {
		t.Errorf("a name started a line of its own:\n%s", out)
	}
}

func TestPlanPrintsGuestStringsEscaped(t *testing.T) {
	g := hostileGraph()
	out := planOutput{Module: "sha256-x", Graph: g, Tasks: jobgraph.Chains(g, 1)}
	if err := jobgraph.Validate(g, 1, 0); err != nil {
		out.Errors = err.Error()
	} else {
		t.Fatal("the hostile graph is valid")
	}
	var b bytes.Buffer
	printPlan(&b, out, 1)
	text := b.String()
	checkNoRawControls(t, text)
	for _, want := range []string{
		`job "clear\x1b[2J\x1b[Hscreen"`,
		`"in\nfake line"`,
		`paths="[\"a\"]\x1b]0;title\a"`,
		`"map\r"`,
		`"out\u202e"`,
		`host connector "collect\xff"`,
		`"forward\x1b[1m"`,
		`(1048576 bytes)`,
		"the name is 1048576 bytes long, above the limit of 256",
	} {
		if !strings.Contains(text, want) {
			t.Errorf("output lacks %s:\n%s", want, text)
		}
	}
	if len(text) > 16<<10 {
		t.Errorf("%d bytes of output for a plan with a 1 MiB name", len(text))
	}
}

func TestStatusPrintsGuestStringsEscaped(t *testing.T) {
	var b bytes.Buffer
	printDetails(&b, client.JobDetails{
		JobSummary: client.JobSummary{ID: "j1", Name: "job\x1b[2J", State: client.StateFailed},
		Vertices:   []client.VertexStatus{{ID: 1, Name: "op\rX", Parallelism: 1}},
		Failure:    "guest sluice_process: guest reported failure: boom\x1b[31m red\nwasm stack trace:\n\tf\x00",
	})
	text := b.String()
	checkNoRawControls(t, text)
	for _, want := range []string{`name      "job\x1b[2J"`, `1 "op\rX" (p=1)`, `boom\x1b[31m red`, "\n  wasm stack trace:\n  \tf\\x00"} {
		if !strings.Contains(text, want) {
			t.Errorf("output lacks %q:\n%s", want, text)
		}
	}
}

func TestSafeTextKeepsPrintableText(t *testing.T) {
	for in, want := range map[string]string{
		"plain\nlines\tand tabs, ünïcode →": "plain\nlines\tand tabs, ünïcode →",
		"esc\x1b[0m":                        `esc\x1b[0m`,
		"bad\xffutf8":                       `bad\xffutf8`,
		"bidi\u202eflip":                    `bidi\u202eflip`,
		"bell\a cr\r":                       `bell\a cr\r`,
	} {
		if got := safeText(in); got != want {
			t.Errorf("safeText(%q) = %q, want %q", in, got, want)
		}
	}
}
