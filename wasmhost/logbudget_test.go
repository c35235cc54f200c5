package wasmhost

import (
	"context"
	"log/slog"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/sluicehq/sluice/internal/abi"
	"github.com/sluicehq/sluice/internal/jobgraph"
)

// countingWriter counts what a log handler writes and keeps the lines that
// are not guest output (the host's notices).
type countingWriter struct {
	mu      sync.Mutex
	bytes   int64
	lines   int64
	notices []string
}

func (w *countingWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.bytes += int64(len(p))
	w.lines++
	if !strings.Contains(string(p), "stream=") {
		w.notices = append(w.notices, string(p))
	}
	return len(p), nil
}

// taskManagerLogger is a logger with the attributes a TaskManager puts on
// a guest's lines (tm, then the executor's and the task's job, task and
// tenant, and subtask), as `sluice run --local` writes them.
func taskManagerLogger(w *countingWriter) *slog.Logger {
	job, task := "b9e0f8a021f97411", "b9e0f8a021f97411.a0.t1.s0"
	return slog.New(slog.NewTextHandler(w, nil)).
		With("component", "taskmanager", "tm", "local-tm-0").
		With("job", job, "task", task, "tenant", "default").
		With("job", job, "task", task, "tenant", "default", "subtask", 0)
}

const floodLines = 10_000_000

// TestEmptyLinesAreCutOffAtTheLogBudget: ten million empty lines, through
// the log import and as bare newlines on stdout, cost their attributes, so
// the guest is cut off at its budget with a notice and what the host writes
// stays near the budget. Before, an empty line cost nothing and such a
// guest wrote gigabytes of TaskManager log.
func TestEmptyLinesAreCutOffAtTheLogBudget(t *testing.T) {
	const budget = 1 << 20
	loop := func(body []byte) []byte {
		// for i := 0; i < floodLines; i++ { body }
		return cat([]byte{0x03, 0x40}, body,
			[]byte{0x20, 0x02}, i32const(1), []byte{0x6a, 0x22, 0x02}, // local 2: after the two params
			i32const(floodLines), []byte{0x49, 0x0d, 0x00, 0x0b})
	}
	const newlines = 1 << 20 // where stdout's bytes start
	cases := []struct {
		name string
		m    hModule
	}{
		{"log import", abiModule(
			[]hImport{{module: abi.HostModule, name: abi.ImportLog, params: []byte{tI32, tI32, tI32}}},
			"log_empty_lines",
			cat(loop(cat(i32const(abi.LevelInfo), i32const(0), i32const(0), call(0))), i32const(0)),
		)},
		{"stdout", func() hModule {
			// memory.fill with '\n', one iovec at 64, then one fd_write of
			// ten million bare newlines.
			body := cat(i32const(newlines), i32const('\n'), i32const(floodLines), []byte{0xfc, 0x0b, 0x00},
				i32store(64, newlines), i32store(68, floodLines),
				i32const(1), i32const(64), i32const(1), i32const(80), call(0), []byte{0x1a}, // drop the errno
				i32const(0))
			m := abiModule([]hImport{{module: abi.WASIModule, name: "fd_write",
				params: []byte{tI32, tI32, tI32, tI32}, results: []byte{tI32}}}, "print_newlines", body)
			m.memPages = (newlines+floodLines)/65536 + 1
			return m
		}()},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			tc.m.funcs[5].localCount = 1 // the loop counter of sluice_process
			var w countingWriter
			ctx := context.Background()
			mod, err := handRuntime(t).Compile(ctx, tc.m.bytes())
			if err != nil {
				t.Fatal(err)
			}
			in, err := mod.Instantiate(ctx, TaskConfig{
				TaskName: "flood", Parallelism: 1, Chain: []jobgraph.Vertex{{ID: 1, Name: "op", Kind: jobgraph.KindMap}},
				Logger: taskManagerLogger(&w),
				Limits: Limits{MaxLogBytes: budget, CallTimeout: limitTimeout},
				Emit:   func([]abi.Record) error { return nil },
			})
			if err != nil {
				t.Fatal(err)
			}
			if err := in.Open(ctx); err != nil {
				t.Fatal(err)
			}
			if err := in.Process(ctx, textRecords("x")); err != nil {
				t.Fatal(err)
			}
			if err := in.Close(ctx); err != nil {
				t.Fatal(err)
			}
			t.Logf("%d lines, %d bytes written for a budget of %d bytes; notices:\n%s", w.lines, w.bytes, budget, strings.Join(w.notices, ""))
			// Near the budget: the notices are two short lines.
			if w.bytes > budget+budget/10 {
				t.Errorf("%d bytes written for a budget of %d", w.bytes, budget)
			}
			if w.bytes < budget/2 {
				t.Errorf("only %d bytes written for a budget of %d: lines cost more than they write", w.bytes, budget)
			}
			all := strings.Join(w.notices, "")
			if !strings.Contains(all, "guest output dropped from here on: the instance used up its log budget") {
				t.Errorf("no notice that output is dropped:\n%s", all)
			}
			m := regexp.MustCompile(`msg="guest output dropped" .* lines=(\d+)`).FindStringSubmatch(all)
			if m == nil {
				t.Fatalf("no count of dropped lines at close:\n%s", all)
			}
			dropped, _ := strconv.ParseInt(m[1], 10, 64)
			if written := w.lines - int64(len(w.notices)); written+dropped != floodLines {
				t.Errorf("%d lines written + %d dropped, want %d in all", written, dropped, floodLines)
			}
		})
	}
}
