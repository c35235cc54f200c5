//go:build !wasip1

package jobtest_test

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/sdk/guest"
	"github.com/sluicehq/sluice/sdk/guest/jobtest"
)

// routes is this test binary's job, for the native mode: lines go
// round-robin to two "tag" subtasks, then to every one of three "copy"
// subtasks, each naming itself in the record.
func init() {
	guest.Job(func(env *guest.Env) {
		env.TextSource("lines", env.Args()...).
			Rebalance().
			Map("tag", func(r guest.Record) guest.Record {
				return guest.Record{Value: fmt.Appendf(nil, "%s tag=%d", r.Value, tagSubtask)}
			}).SetParallelism(2).
			OnOpen(func(ctx *guest.Context) { tagSubtask = ctx.Subtask() }).
			Broadcast().
			FlatMap("copy", func(r guest.Record, out *guest.Collector) {
				out.EmitValue(fmt.Appendf(nil, "%s copy=%d", r.Value, copySubtask))
			}).SetParallelism(3).
			OnOpen(func(ctx *guest.Context) { copySubtask = ctx.Subtask() }).
			Collect("out")
	})
}

// The subtask of the running task, set by its open hook: a native task
// runs alone in the process (and a Wasm task has its own variables), so
// each task reads its own.
var tagSubtask, copySubtask int

// RunJob routes records by the edges' partitioners: round robin for a
// rebalance, to every subtask for a broadcast.
func TestRunJobRoutes(t *testing.T) {
	res, err := jobtest.Native().RunJob(context.Background(), jobtest.JobConfig{
		Args:   []string{"in.txt"},
		Inputs: map[string]string{"in.txt": "a\nb\nc\r\nd\n\ne"},
	})
	if err != nil {
		t.Fatal(err)
	}
	var want []string
	for i, line := range []string{"a", "b", "c", "d", "", "e"} {
		for c := 0; c < 3; c++ {
			want = append(want, fmt.Sprintf("%s tag=%d copy=%d", line, i%2, c))
		}
	}
	slices.Sort(want)
	if got := slices.Sorted(slices.Values(res.Collected)); !slices.Equal(got, want) {
		t.Errorf("got\n%q\nwant\n%q", got, want)
	}
}

func TestRunJobInputs(t *testing.T) {
	_, err := jobtest.Native().RunJob(context.Background(), jobtest.JobConfig{Args: []string{"testdata/no-such-*.txt"}})
	if err == nil || !strings.Contains(err.Error(), `input "testdata/no-such-*.txt": no such file; create it or give its contents in JobConfig.Inputs`) {
		t.Errorf("a missing input: %v", err)
	}
	// A glob reads every match, in order; the collect sink gets the
	// records task by task.
	dir := t.TempDir()
	for name, text := range map[string]string{"b.txt": "2\n", "a.txt": "1\n"} {
		if err := writeFile(dir+"/"+name, text); err != nil {
			t.Fatal(err)
		}
	}
	res, err := jobtest.Native().RunJob(context.Background(), jobtest.JobConfig{Args: []string{dir + "/*.txt"}})
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(res.Collected, ","); got != "1 tag=0 copy=0,2 tag=1 copy=0,1 tag=0 copy=1,2 tag=1 copy=1,1 tag=0 copy=2,2 tag=1 copy=2" {
		t.Errorf("collected %s", got)
	}
}

// Open names a chain of guest operators that follow one another.
func TestOpenChecksTheChain(t *testing.T) {
	ctx := context.Background()
	for ops, want := range map[string]string{
		"":         "no operators",
		"nope":     `the job has no operator "nope"`,
		"lines":    `"lines" is the host's "text" connector`,
		"copy,tag": `"tag" does not read "copy"`,
		"tag,copy": "",
		"tag":      "",
		"copy,out": `"out" is the host's "collect" connector`,
	} {
		var names []string
		if ops != "" {
			names = strings.Split(ops, ",")
		}
		task, err := jobtest.Native().Open(ctx, jobtest.TaskConfig{Args: []string{"x"}, Operators: names})
		if want == "" {
			if err != nil {
				t.Errorf("%s: %v", ops, err)
				continue
			}
			task.Close()
			continue
		}
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: error %v, want %q", ops, err, want)
		}
	}
}

func writeFile(path, text string) error { return os.WriteFile(path, []byte(text), 0o644) }
