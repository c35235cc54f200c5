package main

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/internal/jobgraph"
)

func TestPlanWordCount(t *testing.T) {
	ctx := context.Background()
	dir := "../../examples/wordcount"
	args := []string{"--input", "examples/wordcount/testdata/hamlet.txt"}
	var out, errOut bytes.Buffer
	if err := planJob(ctx, &out, &errOut, dir, args, planFlags{parallelism: 2}); err != nil {
		t.Fatalf("plan: %v\n%s", err, errOut.String())
	}
	text := out.String()
	for _, want := range []string{
		"job wordcount",
		"module sha256-",
		"lines     source    2 (default)  host connector text",
		`paths=["examples/wordcount/testdata/hamlet.txt"]`,
		"count     reduce",
		"emit=final",
		"word(3)      ->  count(4)     hash",
		"task 1  x2  lines(1) -> tokenize(2) -> word(3)",
		"task 2  x2  count(4) -> format(5) -> out(6)",
	} {
		if !strings.Contains(text, want) {
			t.Errorf("output lacks %q:\n%s", want, text)
		}
	}

	out.Reset()
	if err := planJob(ctx, &out, &errOut, dir, args, planFlags{parallelism: 1, json: true}); err != nil {
		t.Fatal(err)
	}
	var p planOutput
	if err := json.Unmarshal(out.Bytes(), &p); err != nil {
		t.Fatalf("--json output: %v\n%s", err, out.String())
	}
	if len(p.Graph.Vertices) != 6 || len(p.Tasks) != 2 || p.Graph.Vertices[3].Kind != jobgraph.KindReduce {
		t.Errorf("--json graph %+v tasks %+v", p.Graph, p.Tasks)
	}

	// The job's own argument check reaches the user.
	err := planJob(ctx, &out, &errOut, dir, nil, planFlags{parallelism: 1})
	if err == nil || !strings.Contains(err.Error(), "no input: pass -- --input PATH") {
		t.Errorf("plan without --input: %v", err)
	}
}

func TestPlanCommandArgs(t *testing.T) {
	cmd := newRootCmd()
	cmd.SetArgs([]string{"plan", "../../examples/wordcount", "input.txt"})
	var out bytes.Buffer
	cmd.SetOut(&out)
	cmd.SetErr(&out)
	err := cmd.Execute()
	if err == nil || !strings.Contains(err.Error(), "job arguments go after --") {
		t.Errorf("arguments without --: %v", err)
	}
}
