package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strconv"
	"time"

	"github.com/spf13/cobra"

	"github.com/sluicehq/sluice/sdk/client"
)

func newLogsCmd() *cobra.Command {
	var jm, task, tm string
	var follow, asJSON bool
	var every time.Duration
	cmd := &cobra.Command{
		Use:   "logs JOB | logs --tm TASKMANAGER",
		Short: "Show the recent log lines of a job's tasks (guest log output and task events), or of a TaskManager",
		Long: `Show the log lines the TaskManagers keep of a job's tasks: what the guests
wrote with the log host call (and to stdout/stderr), and the host's events of each
task (deployed, running, checkpoints, finished or failed with the cause). Each
TaskManager keeps the last 1000 lines (256 KiB) of each task, of its running tasks
and its last 64 ended ones; a gap is shown as "... N lines dropped".

--follow polls for new lines (each shown once) until the job ends or Ctrl-C.
--tm shows a TaskManager's own log instead: all of it on a cluster without
tenants, else only the lines about the caller's tenant.`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if (len(args) == 1) == (tm != "") {
				return usageErr(errors.New("name a job, or a TaskManager with --tm (not both)"))
			}
			if every < 100*time.Millisecond {
				return usageErr(fmt.Errorf("--interval %v: use at least 100ms", every))
			}
			c, err := dial(cmd, jm)
			if err != nil {
				return err
			}
			ctx, stop := signalContext(cmd.Context())
			defer stop()
			f := &logFollower{c: c, job: firstArg(args), tm: tm, task: task, out: cmd.OutOrStdout(), json: asJSON,
				after: map[string]uint64{}}
			return f.run(ctx, follow, every)
		},
	}
	jmFlag(cmd, &jm)
	tokenFlag(cmd)
	cmd.Flags().StringVar(&task, "task", "", "only the task with this name, or with an operator of this name")
	cmd.Flags().StringVar(&tm, "tm", "", "show this TaskManager's own log (its resource id, see `sluice overview`)")
	cmd.Flags().BoolVarP(&follow, "follow", "f", false, "keep polling for new lines until the job ends or Ctrl-C")
	cmd.Flags().DurationVar(&every, "interval", time.Second, "how often --follow polls")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print one JSON object per line")
	return cmd
}

func firstArg(args []string) string {
	if len(args) == 0 {
		return ""
	}
	return args[0]
}

// logFollower prints log lines and remembers, per source, the newest line
// printed: the cursor of the next poll, so no line shows twice.
type logFollower struct {
	c             *client.Client
	job, tm, task string
	out           io.Writer
	json          bool
	after         map[string]uint64
}

func (f *logFollower) poll(ctx context.Context) error {
	var lines []client.LogLine
	var err error
	if f.tm != "" {
		lines, err = f.c.TaskManagerLogs(ctx, f.tm, f.after[""], 0)
	} else {
		lines, err = f.c.Logs(ctx, f.job, client.LogQuery{Task: f.task, After: f.after})
	}
	if err != nil {
		return err
	}
	for _, l := range lines {
		if l.Seq <= f.after[l.Source] {
			continue // a line already printed (an answer raced a retry)
		}
		f.after[l.Source] = l.Seq
		if f.json {
			if err := writeJSON(f.out, l); err != nil {
				return err
			}
			continue
		}
		printLogLine(f.out, l)
	}
	return nil
}

func (f *logFollower) run(ctx context.Context, follow bool, every time.Duration) error {
	if err := f.poll(ctx); err != nil || !follow {
		return err
	}
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil // Ctrl-C ends following, not in error
		case <-t.C:
		}
		if f.job != "" {
			// The last lines of an ended job are there once it ends: one
			// more poll after it, then stop.
			d, err := f.c.GetJob(ctx, f.job)
			if err != nil && ctx.Err() != nil {
				return nil
			}
			if err == nil && client.Terminal(d.State) {
				if err := f.poll(ctx); err != nil && ctx.Err() == nil {
					return err
				}
				return nil
			}
		}
		if err := f.poll(ctx); err != nil {
			if ctx.Err() != nil {
				return nil
			}
			if errors.Is(err, client.ErrUnavailable) || errors.Is(err, client.ErrDeadlineExceeded) {
				continue // the next tick tries again
			}
			return err
		}
	}
}

// printLogLine writes one line: time, level, task, message and attributes,
// guest text escaped so it stays one line and cannot drive the terminal.
func printLogLine(w io.Writer, l client.LogLine) {
	who := l.TaskManager
	if l.Task != "" {
		who = fmt.Sprintf("%s[%d]", quoteName(l.Task), l.Subtask)
		if l.Attempt > 0 {
			who += fmt.Sprintf(" attempt %d", l.Attempt)
		}
	}
	if l.Dropped > 0 {
		fmt.Fprintf(w, "... %d lines of %s dropped (the task manager keeps the newest)\n", l.Dropped, who)
	}
	msg := escapeLine(l.Message)
	if l.Attrs != "" {
		msg += "  " + escapeLine(l.Attrs)
	}
	fmt.Fprintf(w, "%s %-5s %s  %s\n", l.Time.UTC().Format("2006-01-02T15:04:05.000Z"), l.Level, who, msg)
}

// escapeLine returns s as it is when it is printable, else as a Go string
// literal: one line, no terminal control.
func escapeLine(s string) string {
	if printable(s) {
		return s
	}
	return strconv.Quote(s)
}

func newStackCmd() *cobra.Command {
	var jm, task string
	var sample, every time.Duration
	var folded, asJSON bool
	cmd := &cobra.Command{
		Use:   "stack JOB",
		Short: "Show the Wasm call stack of each running task of a job, or sample them for a flame graph",
		Long: `Show where each running task's guest is: its Wasm call stack, innermost
function first, with the names from the module's name section. A task waiting for
input runs no guest code and shows none.

--sample D samples the stacks every --interval for D (at most 1m) and prints the
most frequent ones per task; with --folded it prints them as folded stacks
("outer;inner count" lines, all tasks added up), the input of flamegraph.pl:

  sluice stack JOB --sample 10s --folded | flamegraph.pl > job.svg

Samples are taken at the guest's fuel checks (loop headers and function entries),
so they show where the guest spends its work; time it spends blocked in host calls
is not sampled.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if folded && sample <= 0 {
				return usageErr(errors.New("--folded needs --sample DURATION (e.g. --sample 5s)"))
			}
			c, err := dial(cmd, jm)
			if err != nil {
				return err
			}
			ctx, stop := signalContext(cmd.Context())
			defer stop()
			ts, err := c.Stacks(ctx, args[0], client.StackQuery{Task: task, Duration: sample, Interval: every})
			if err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			switch {
			case asJSON:
				return writeJSON(out, ts)
			case folded:
				for _, l := range client.FoldedStacks(ts) {
					fmt.Fprintln(out, l)
				}
				return nil
			}
			printStacks(out, ts, sample > 0)
			return nil
		},
	}
	jmFlag(cmd, &jm)
	tokenFlag(cmd)
	cmd.Flags().StringVar(&task, "task", "", "only the task with this name, or with an operator of this name")
	cmd.Flags().DurationVar(&sample, "sample", 0, "sample for this long instead of taking one stack (at most 1m)")
	cmd.Flags().DurationVar(&every, "interval", 10*time.Millisecond, "time between samples with --sample (at least 1ms)")
	cmd.Flags().BoolVar(&folded, "folded", false, "with --sample, print folded stacks for flame graph tools")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	return cmd
}

// maxShownStacks bounds the stacks printed per task of a sample.
const maxShownStacks = 10

// printStacks writes each task's stack (or its most frequent sampled
// stacks), innermost frame first, as a thread dump reads.
func printStacks(w io.Writer, ts []client.TaskStack, sampled bool) {
	if len(ts) == 0 {
		fmt.Fprintln(w, "no running tasks")
		return
	}
	for i, t := range ts {
		if i > 0 {
			fmt.Fprintln(w)
		}
		fmt.Fprintf(w, "%s  subtask %d  attempt %d  on %s\n", quoteName(t.Task), t.Subtask, t.Attempt, t.TaskManager)
		if len(t.Samples) == 0 {
			fmt.Fprintln(w, "  (no guest code running: waiting for input or in a host call)")
			continue
		}
		for j, s := range t.Samples {
			if j == maxShownStacks {
				fmt.Fprintf(w, "  ... %d more stacks\n", len(t.Samples)-j)
				break
			}
			if sampled {
				fmt.Fprintf(w, "  %d of %d samples (%.1f%%):\n", s.Count, t.Total, 100*float64(s.Count)/float64(max(t.Total, 1)))
			}
			for k := len(s.Frames) - 1; k >= 0; k-- {
				fmt.Fprintf(w, "    %s\n", quoteName(s.Frames[k]))
			}
		}
	}
}
