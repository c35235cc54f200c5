package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"slices"
	"sort"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/bytedance/sonic"
	"github.com/spf13/cobra"

	"github.com/sluicehq/sluice/sdk/client"
)

func newListCmd() *cobra.Command {
	var jm string
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "list",
		Short: "List the jobs of a cluster",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := dial(cmd, jm)
			if err != nil {
				return err
			}
			jobs, err := c.ListJobs(cmd.Context())
			if err != nil {
				return err
			}
			sort.Slice(jobs, func(i, j int) bool { return jobs[i].Start.After(jobs[j].Start) })
			out := cmd.OutOrStdout()
			if asJSON {
				return writeJSON(out, jobs)
			}
			tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "JOB\tNAME\tSTATE\tSTARTED\tDURATION")
			for _, j := range jobs {
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", j.ID, quoteName(j.Name), j.State, fmtTime(j.Start), fmtDuration(j.Start, j.End))
			}
			return tw.Flush()
		},
	}
	jmFlag(cmd, &jm)
	tokenFlag(cmd)
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	return cmd
}

func newStatusCmd() *cobra.Command {
	var jm string
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "status JOB",
		Short: "Show a job: its state, accumulators, each vertex's subtasks and where they run, its restarts' causes and the failure if any",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := dial(cmd, jm)
			if err != nil {
				return err
			}
			d, err := c.GetJob(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			if asJSON {
				return writeJSON(cmd.OutOrStdout(), d)
			}
			printDetails(cmd.OutOrStdout(), d)
			return nil
		},
	}
	jmFlag(cmd, &jm)
	tokenFlag(cmd)
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	return cmd
}

func newCancelCmd() *cobra.Command {
	var jm string
	var wait time.Duration
	cmd := &cobra.Command{
		Use:   "cancel JOB",
		Short: "Cancel a job and wait until it is CANCELED",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			log, err := logger(cmd, slog.LevelWarn)
			if err != nil {
				return err
			}
			c, err := dial(cmd, jm)
			if err != nil {
				return err
			}
			ctx, stop := signalContext(cmd.Context())
			defer stop()
			if err := c.CancelJob(ctx, args[0]); err != nil {
				return err
			}
			if wait <= 0 {
				fmt.Fprintf(cmd.OutOrStdout(), "job %s: cancel requested\n", args[0])
				return nil
			}
			log.Info("cancel requested; waiting", "job", args[0])
			return waitCanceled(ctx, c, args[0], wait, cmd.OutOrStdout())
		},
	}
	jmFlag(cmd, &jm)
	tokenFlag(cmd)
	cmd.Flags().DurationVar(&wait, "wait", time.Minute, "how long to wait for the job to end (0: do not wait)")
	return cmd
}

func waitCanceled(ctx context.Context, c *client.Client, id string, wait time.Duration, out io.Writer) error {
	deadline := time.Now().Add(wait)
	for {
		r, err := c.PollJob(ctx, id, min(time.Until(deadline), 5*time.Second))
		if err != nil {
			return err
		}
		if client.Terminal(r.State) {
			fmt.Fprintf(out, "job %s: %s\n", id, r.State)
			if r.State != client.StateCanceled {
				return &exitError{code: exitFailed, err: fmt.Errorf("job %s ended %s before the cancel took effect", id, r.State)}
			}
			return nil
		}
		if time.Now().After(deadline) {
			return &exitError{code: exitFailed, err: fmt.Errorf("job %s is still %s after %v", id, r.State, wait)}
		}
	}
}

// writeJSON prints v as --json output: indented, one value a line, and
// encoded with sonic's encoding/json-compatible config (sorted map keys,
// HTML escaped) so scripts see the output they always saw.
func writeJSON(w io.Writer, v any) error {
	enc := sonic.ConfigStd.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

func fmtTime(t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return t.Local().Format("2006-01-02 15:04:05")
}

func fmtDuration(start, end time.Time) string {
	if start.IsZero() {
		return "-"
	}
	if end.IsZero() {
		end = time.Now()
	}
	return end.Sub(start).Round(time.Millisecond).String()
}

// printDetails writes a job's details for a person.
func printDetails(w io.Writer, d client.JobDetails) {
	fmt.Fprintf(w, "job       %s\n", d.ID)
	if d.Name != "" {
		fmt.Fprintf(w, "name      %s\n", quoteName(d.Name))
	}
	fmt.Fprintf(w, "state     %s\n", d.State)
	fmt.Fprintf(w, "started   %s\n", fmtTime(d.Start))
	if !d.End.IsZero() {
		fmt.Fprintf(w, "ended     %s\n", fmtTime(d.End))
	}
	fmt.Fprintf(w, "duration  %s\n", fmtDuration(d.Start, d.End))
	if d.ModuleDigest != "" {
		fmt.Fprintf(w, "module    %s\n", d.ModuleDigest)
	}
	fmt.Fprintf(w, "restarts  %d\n", d.Restarts)
	if f := d.Fuel; f > 0 {
		fmt.Fprintf(w, "fuel      %d\n", f)
	}
	printAccumulators(w, d.Accumulators)
	if len(d.Vertices) > 0 {
		fmt.Fprintln(w)
		tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "VERTEX\tSUBTASK\tSTATE\tTASK MANAGER\tATTEMPT\tFUEL")
		for _, v := range d.Vertices {
			fmt.Fprintf(tw, "%d %s (p=%d)\t\t%s\t\t\t\n", v.ID, quoteName(v.Name), v.Parallelism, vertexState(v))
			for _, s := range v.Subtasks {
				tmName := s.TaskManager
				if tmName == "" {
					tmName = "-"
				}
				fuel := "-"
				if s.Metrics != nil {
					fuel = strconv.FormatInt(s.Metrics.Fuel, 10)
				}
				fmt.Fprintf(tw, "\t%d\t%s\t%s\t%d\t%s\n", s.Index, s.State, tmName, s.Attempt, fuel)
			}
		}
		tw.Flush()
	}
	if len(d.History) > 0 {
		fmt.Fprintln(w)
		printHistory(w, d.History)
	}
	if d.Failure != "" && d.State == client.StateFailed {
		fmt.Fprintln(w)
		fmt.Fprintln(w, "failure:")
		printIndented(w, "", d.Failure)
	}
}

// printHistory writes the failures that ended attempts, with their times:
// the causes of the restarts are history, not the job's failure.
func printHistory(w io.Writer, h []client.FailureRecord) {
	if len(h) == 0 {
		return
	}
	fmt.Fprintln(w, "history:")
	for _, f := range h {
		printIndented(w, fmtTime(f.Time)+"  ", f.Cause)
	}
}

// printIndented writes guest-supplied text, escaped, indented by two
// spaces, its first line after head and the others under it.
func printIndented(w io.Writer, head, text string) {
	pad := strings.Repeat(" ", len(head))
	for line := range strings.SplitSeq(strings.TrimRight(safeText(text), "\n"), "\n") {
		fmt.Fprintln(w, "  "+head+line)
		head = pad
	}
}

// printAccumulators writes the accumulators under a heading, one
// "  NAME VALUE" line each, sorted by name (one space, so a script can
// split the line).
func printAccumulators(w io.Writer, acc map[string]int64) {
	if len(acc) == 0 {
		return
	}
	fmt.Fprintln(w, "accumulators:")
	for _, n := range slices.Sorted(maps.Keys(acc)) {
		fmt.Fprintf(w, "  %s %d\n", quoteName(n), acc[n]) // names come from the guest
	}
}

// vertexState summarizes a vertex's subtasks: "RUNNING 3/4" style counts.
func vertexState(v client.VertexStatus) string {
	counts := map[string]int{}
	for _, s := range v.Subtasks {
		counts[s.State]++
	}
	states := make([]string, 0, len(counts))
	for s := range counts {
		states = append(states, s)
	}
	sort.Strings(states)
	parts := make([]string, len(states))
	for i, s := range states {
		parts[i] = fmt.Sprintf("%s %d/%d", s, counts[s], len(v.Subtasks))
	}
	return strings.Join(parts, ", ")
}

func newOverviewCmd() *cobra.Command {
	var jm string
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "overview",
		Short: "Show the cluster: TaskManagers, slots, jobs by state",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := dial(cmd, jm)
			if err != nil {
				return err
			}
			ov, err := c.Overview(cmd.Context())
			if err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			if asJSON {
				return writeJSON(out, ov)
			}
			fmt.Fprintf(out, "slots  %d free of %d\n", ov.SlotsFree, ov.SlotsTotal)
			states := make([]string, 0, len(ov.JobsByState))
			for s := range ov.JobsByState {
				states = append(states, s)
			}
			sort.Strings(states)
			for _, s := range states {
				fmt.Fprintf(out, "jobs   %d %s\n", ov.JobsByState[s], s)
			}
			fmt.Fprintln(out)
			tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "TASK MANAGER\tADDRESS\tDATA\tSLOTS FREE")
			for _, t := range ov.TaskManagers {
				fmt.Fprintf(tw, "%s\t%s\t%s\t%d/%d\n", t.ResourceID, t.Address, t.DataAddress, t.SlotsFree, t.SlotsTotal)
			}
			return tw.Flush()
		},
	}
	jmFlag(cmd, &jm)
	tokenFlag(cmd)
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	return cmd
}
