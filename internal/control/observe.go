package control

import (
	"sort"
	"strconv"
	"strings"
	"time"
)

// LogLine is one line of a task's log or of a TaskManager's own log, as a
// TaskManager keeps it (tm/executor) and the Dispatcher serves it.
//
// Message and Attrs may hold anything a guest wrote: print them escaped.
type LogLine struct {
	// Source names the buffer the line comes from: the task's execution id,
	// or "" for the TaskManager's own log. Seq counts the lines of one
	// source from 1, with no gaps; a reader asks for the lines after the
	// last Seq it saw of each source (LogQuery.After).
	Source string
	Seq    uint64
	// Dropped is how many lines of this source, after the reader's cursor,
	// left the bounded buffer before they could be read: they came just
	// before this line.
	Dropped uint64

	Time    time.Time
	Level   string // DEBUG, INFO, WARN, ERROR
	Message string
	Attrs   string // the record's other attributes, "key=value" separated by spaces

	TaskManager string // resource id of the TaskManager that kept the line
	Tenant      string // the tenant the line was logged for; "" for none
	JobID       string // "" for a TaskManager line without a job
	Task        string // the task's name (its chain); "" for a TaskManager line
	Subtask     int
	Attempt     int
}

// LogQuery selects log lines.
type LogQuery struct {
	// Task keeps only the tasks whose name or head operator name is Task
	// (case-sensitive); "" keeps every task.
	Task string
	// After maps a Source to the last Seq of it the reader has; the lines
	// of other sources come from their oldest kept line.
	After map[string]uint64
	// Limit bounds the lines returned per source, the newest ones kept
	// (what is skipped is in Dropped); 0 means MaxLogLines.
	Limit int
}

// MaxLogLines bounds the lines one answer carries per source.
const MaxLogLines = 1000

// TaskLogsRequest asks a TaskManager for the lines of one job's tasks.
type TaskLogsRequest struct {
	JobID  string
	Tenant string // the job's tenant: a TaskManager answers only its tasks
	Query  LogQuery
}

// TaskManagerLogsRequest asks a TaskManager for its own log.
type TaskManagerLogsRequest struct {
	// Tenant, unless All, keeps only the lines logged for that tenant (with
	// a tenant attribute of that value).
	Tenant string
	All    bool
	After  uint64
	Limit  int
}

// StackQuery asks for the Wasm call stacks of a job's running tasks.
type StackQuery struct {
	// Task keeps only the tasks with that name or head operator name; ""
	// keeps every task.
	Task string
	// Duration, when positive, samples the stacks for that long (at most
	// MaxStackDuration) at every Interval; zero takes one current stack of
	// each task.
	Duration time.Duration
	// Interval between samples; 0 means DefaultStackInterval.
	Interval time.Duration
}

// Bounds of stack sampling.
const (
	MaxStackDuration     = 60 * time.Second
	DefaultStackInterval = 10 * time.Millisecond
	MinStackInterval     = time.Millisecond
	// MaxStackFrames bounds one stack; deeper stacks keep their innermost
	// frames under a "[truncated]" root.
	MaxStackFrames = 128
	// MaxStacks bounds the distinct stacks of one task's profile; more are
	// counted under "[other]".
	MaxStacks = 4096
)

// TaskStacksRequest asks a TaskManager to sample one job's tasks.
type TaskStacksRequest struct {
	JobID  string
	Tenant string
	Query  StackQuery
}

// StackCount is one distinct call stack and how many samples found it.
// Frames go from the outermost call to the innermost; each is the
// function's name from the module's name section, or "$<index>" without
// one.
type StackCount struct {
	Frames []string
	Count  int64
}

// TaskStack is what sampling found in one task.
type TaskStack struct {
	ExecutionID string
	TaskManager string
	Task        string
	Subtask     int
	Attempt     int
	// Samples is every distinct stack with its count, most frequent first;
	// empty when the guest ran no code while it was sampled (it was waiting
	// for input, or had no instance).
	Samples []StackCount
	Total   int64 // samples taken, Samples' counts added up
}

// Folded renders stacks in Brendan Gregg's folded format, one
// "frame;frame;frame count" line per distinct stack (counts of equal
// stacks of several tasks added up), sorted. A frame's ';', spaces and
// control characters are written as '_' so every line parses.
func Folded(tasks []TaskStack) []string {
	sum := map[string]int64{}
	for _, t := range tasks {
		for _, s := range t.Samples {
			fs := make([]string, len(s.Frames))
			for i, f := range s.Frames {
				fs[i] = foldFrame(f)
			}
			sum[strings.Join(fs, ";")] += s.Count
		}
	}
	out := make([]string, 0, len(sum))
	for k, n := range sum {
		out = append(out, k+" "+strconv.FormatInt(n, 10))
	}
	sort.Strings(out)
	return out
}

func foldFrame(f string) string {
	if f == "" {
		return "_"
	}
	return strings.Map(func(r rune) rune {
		if r == ';' || r <= ' ' || r == 0x7f {
			return '_'
		}
		return r
	}, f)
}
