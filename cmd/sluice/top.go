package main

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/sluicehq/sluice/sdk/client"
)

func newTopCmd() *cobra.Command {
	var jm string
	var every time.Duration
	var once bool
	cmd := &cobra.Command{
		Use:   "top",
		Short: "Show live rates of the running jobs: records per second in and out of each vertex",
		Long: `Show the running jobs of the caller's tenant with, for each vertex, the
records and bytes per second in and out (summed over its subtasks) and the busiest
subtask's busy and back-pressured milliseconds per second, refreshed every
--interval until Ctrl-C. Rates are the change of the TaskManagers' counters between
two of their reports; "-" until a vertex has two. --once prints one table after
one interval.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if every < 200*time.Millisecond {
				return usageErr(fmt.Errorf("--interval %v: use at least 200ms", every))
			}
			c, err := dial(cmd, jm)
			if err != nil {
				return err
			}
			ctx, stop := signalContext(cmd.Context())
			defer stop()
			out := cmd.OutOrStdout()
			clearScreen := isTerminal(out) && !once
			var prev map[string]client.JobDetails
			t := time.NewTicker(every)
			defer t.Stop()
			for n := 0; ; n++ {
				cur, err := runningJobs(ctx, c)
				if err != nil {
					if ctx.Err() != nil {
						return nil
					}
					return err
				}
				if !once || n == 1 {
					if clearScreen {
						fmt.Fprint(out, "\033[H\033[2J")
					} else if n > 0 && !once {
						fmt.Fprintln(out)
					}
					printTop(out, topRows(prev, cur), time.Now())
					if once {
						return nil
					}
				}
				prev = cur
				select {
				case <-ctx.Done():
					return nil
				case <-t.C:
				}
			}
		},
	}
	jmFlag(cmd, &jm)
	tokenFlag(cmd)
	cmd.Flags().DurationVar(&every, "interval", 2*time.Second, "time between refreshes")
	cmd.Flags().BoolVar(&once, "once", false, "print one table (after one interval) and exit")
	return cmd
}

// runningJobs returns the details of the tenant's jobs that have not ended,
// by id.
func runningJobs(ctx context.Context, c *client.Client) (map[string]client.JobDetails, error) {
	jobs, err := c.ListJobs(ctx)
	if err != nil {
		return nil, err
	}
	out := map[string]client.JobDetails{}
	for _, j := range jobs {
		if client.Terminal(j.State) {
			continue
		}
		d, err := c.GetJob(ctx, j.ID)
		if err != nil {
			continue // ended and expired meanwhile
		}
		out[j.ID] = d
	}
	return out, nil
}

// topRow is one vertex of a running job with its rates; a rate below 0
// is not known yet.
type topRow struct {
	Job, JobName, State     string
	Vertex                  string
	Parallelism             int
	Running                 int
	InRate, OutRate         float64 // records per second
	InBytes, OutBytes       float64 // bytes per second
	BusyMs, BackPressuredMs int64   // per second, the busiest subtask's
}

// vertexTotals sums a vertex's subtask counters; reported is the newest
// report among them, zero when none reported yet.
func vertexTotals(v client.VertexStatus) (in, out, bin, bout int64, reported time.Time) {
	for _, s := range v.Subtasks {
		if m := s.Metrics; m != nil {
			in, out, bin, bout = in+m.RecordsIn, out+m.RecordsOut, bin+m.BytesIn, bout+m.BytesOut
			if m.Reported.After(reported) {
				reported = m.Reported
			}
		}
	}
	return
}

// topRows computes each vertex's rates from two snapshots of the running
// jobs: the change of its counters over the change of its newest report
// time. Jobs are ordered by start, vertices as the job lists them.
func topRows(prev, cur map[string]client.JobDetails) []topRow {
	ids := make([]string, 0, len(cur))
	for id := range cur {
		ids = append(ids, id)
	}
	slices.SortFunc(ids, func(a, b string) int {
		if c := cur[a].Start.Compare(cur[b].Start); c != 0 {
			return c
		}
		return strings.Compare(a, b)
	})
	var rows []topRow
	for _, id := range ids {
		d := cur[id]
		before := map[int]client.VertexStatus{}
		if p, ok := prev[id]; ok {
			for _, v := range p.Vertices {
				before[v.ID] = v
			}
		}
		for _, v := range d.Vertices {
			r := topRow{Job: cmp.Or(d.ID, id), JobName: d.Name, State: d.State, Vertex: v.Name, Parallelism: v.Parallelism,
				InRate: -1, OutRate: -1, InBytes: -1, OutBytes: -1}
			for _, s := range v.Subtasks {
				if s.State == client.StateRunning {
					r.Running++
				}
				if m := s.Metrics; m != nil {
					r.BusyMs = max(r.BusyMs, m.BusyMsPerSecond)
					r.BackPressuredMs = max(r.BackPressuredMs, m.BackPressuredMsPerSecond)
				}
			}
			in, out, bin, bout, at := vertexTotals(v)
			if pv, ok := before[v.ID]; ok {
				pin, pout, pbin, pbout, pat := vertexTotals(pv)
				if dt := at.Sub(pat).Seconds(); !pat.IsZero() && dt > 0 {
					rate := func(a, b int64) float64 { return float64(max(a-b, 0)) / dt }
					r.InRate, r.OutRate, r.InBytes, r.OutBytes = rate(in, pin), rate(out, pout), rate(bin, pbin), rate(bout, pbout)
				}
			}
			rows = append(rows, r)
		}
	}
	return rows
}

// printTop writes the table; names come from guests, so they are escaped.
func printTop(w io.Writer, rows []topRow, now time.Time) {
	fmt.Fprintf(w, "sluice top  %s  %d vertices of running jobs\n\n", now.Format("15:04:05"), len(rows))
	if len(rows) == 0 {
		fmt.Fprintln(w, "no running jobs")
		return
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "JOB\tNAME\tVERTEX\tRUNNING\tIN REC/S\tOUT REC/S\tIN B/S\tOUT B/S\tBUSY MS/S\tBACKPR MS/S\t")
	for _, r := range rows {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d/%d\t%s\t%s\t%s\t%s\t%d\t%d\t\n", shortID(r.Job), quoteName(r.JobName), quoteName(r.Vertex),
			r.Running, r.Parallelism, fmtRate(r.InRate), fmtRate(r.OutRate), fmtRate(r.InBytes), fmtRate(r.OutBytes), r.BusyMs, r.BackPressuredMs)
	}
	tw.Flush()
}

func shortID(id string) string {
	if len(id) > 8 {
		return id[:8]
	}
	return id
}

// fmtRate writes a rate with k/M suffixes, "-" when unknown.
func fmtRate(r float64) string {
	switch {
	case r < 0:
		return "-"
	case r >= 1e6:
		return fmt.Sprintf("%.1fM", r/1e6)
	case r >= 1e4:
		return fmt.Sprintf("%.1fk", r/1e3)
	}
	return fmt.Sprintf("%.0f", r)
}
