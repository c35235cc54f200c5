package main

import (
	"errors"
	"fmt"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/sluicehq/sluice/sdk/client"
)

func newSavepointCmd() *cobra.Command {
	var jm, dispose string
	var timeout time.Duration
	cmd := &cobra.Command{
		Use:   "savepoint JOB | savepoint --dispose ID",
		Short: "Take a savepoint of a running job (printing its id), or delete one with --dispose",
		Long: `Take a savepoint of a running job: a checkpoint the user owns, kept under the
tenant's savepoints after the job is gone. It prints the savepoint id; resume
with sluice run --from-savepoint ID (at any parallelism up to the job's max
parallelism). --dispose ID deletes a savepoint.`,
		Args: func(cmd *cobra.Command, args []string) error {
			if dispose != "" {
				return cobra.NoArgs(cmd, args)
			}
			return cobra.ExactArgs(1)(cmd, args)
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := dial(cmd, jm)
			if err != nil {
				return err
			}
			ctx, stop := signalContext(cmd.Context())
			defer stop()
			if dispose != "" {
				if err := c.DisposeSavepoint(ctx, dispose); err != nil {
					return err
				}
				fmt.Fprintf(cmd.OutOrStdout(), "savepoint %s disposed\n", dispose)
				return nil
			}
			sp, err := c.TriggerSavepoint(ctx, args[0], false, timeout)
			if err != nil {
				return err
			}
			printSavepoint(cmd, sp)
			return nil
		},
	}
	jmFlag(cmd, &jm)
	tokenFlag(cmd)
	cmd.Flags().StringVar(&dispose, "dispose", "", "delete the savepoint with this id")
	cmd.Flags().DurationVar(&timeout, "timeout", 5*time.Minute, "how long the savepoint may take")
	return cmd
}

func newStopCmd() *cobra.Command {
	var jm string
	var savepoint, drain bool
	var timeout time.Duration
	cmd := &cobra.Command{
		Use:   "stop [--drain] JOB",
		Short: "Stop a job with a savepoint: take the savepoint, then end the job FINISHED",
		Long: `Stop a job gracefully, as Flink's stop-with-savepoint: the sources emit nothing
after the savepoint's barrier, the savepoint completes (committing the file
sink's output up to it), then the job ends FINISHED. It prints the savepoint
id to resume from. With --drain the sources first send the maximum
watermark, so every event-time timer (every open window) fires before the
savepoint: for ending an unbounded job for good. Without a savepoint, use
sluice cancel.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if !savepoint {
				return usageErr(errors.New("stop always takes a savepoint (--savepoint); to end a job without one, use sluice cancel"))
			}
			c, err := dial(cmd, jm)
			if err != nil {
				return err
			}
			ctx, stop := signalContext(cmd.Context())
			defer stop()
			var sp client.Checkpoint
			if drain {
				sp, err = c.StopWithDrain(ctx, args[0], timeout)
			} else {
				sp, err = c.TriggerSavepoint(ctx, args[0], true, timeout)
			}
			if err != nil {
				return err
			}
			printSavepoint(cmd, sp)
			return waitEnded(cmd, c, args[0])
		},
	}
	jmFlag(cmd, &jm)
	tokenFlag(cmd)
	cmd.Flags().BoolVar(&savepoint, "savepoint", true, "take a savepoint before stopping (always)")
	cmd.Flags().BoolVar(&drain, "drain", false, "send the maximum watermark first, so every event-time timer fires")
	cmd.Flags().DurationVar(&timeout, "timeout", 5*time.Minute, "how long the savepoint may take")
	return cmd
}

// waitEnded waits for a stopped job to end and reports its state.
func waitEnded(cmd *cobra.Command, c *client.Client, id string) error {
	r, err := c.WaitJob(cmd.Context(), id)
	if err != nil {
		return err
	}
	fmt.Fprintf(cmd.ErrOrStderr(), "job %s %s\n", id, r.State)
	if r.State != client.StateFinished {
		return &exitError{code: exitFailed, err: fmt.Errorf("job %s ended %s after its savepoint: %s", id, r.State, r.Failure)}
	}
	return nil
}

func printSavepoint(cmd *cobra.Command, sp client.Checkpoint) {
	fmt.Fprintf(cmd.ErrOrStderr(), "savepoint %s: checkpoint %d, %s in %v, at %s\n",
		sp.SavepointID, sp.ID, fmtBytes(sp.Size), sp.Duration.Round(time.Millisecond), sp.Location)
	fmt.Fprintln(cmd.OutOrStdout(), sp.SavepointID)
}

func newCheckpointsCmd() *cobra.Command {
	var jm string
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "checkpoints JOB",
		Short: "List a job's checkpoints and savepoints: status, size, duration, and how to resume from them",
		Long: `List a job's checkpoints and savepoints, newest first. A checkpoint whose
metadata is in the blob store is retained: resume from it with
sluice run --from-checkpoint JOB/N (at any parallelism up to the job's max
parallelism). A job keeps its last state.checkpoints.num-retained completed
checkpoints while it runs and when it FAILED; when it is canceled only with
-C execution.checkpointing.externalized-checkpoint-retention=RETAIN_ON_CANCELLATION;
never once it FINISHED. A job the JobManager no longer knows (its result
expired, or it ran on a JobManager that is gone) is listed from the blob
store: its retained checkpoints only.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := dial(cmd, jm)
			if err != nil {
				return err
			}
			cps, err := c.ListCheckpoints(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			if asJSON {
				return writeJSON(out, cps)
			}
			tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "ID\tTYPE\tSTATUS\tTRIGGERED\tDURATION\tSIZE\tRESUME WITH / REASON")
			for _, cp := range cps {
				kind, note := "checkpoint", cp.Reason
				switch {
				case cp.Savepoint && cp.Status == "COMPLETED":
					kind, note = "savepoint", "--from-savepoint "+cp.SavepointID
				case cp.Savepoint:
					kind = "savepoint"
				case cp.Retained && cp.Status == "COMPLETED":
					note = "--from-checkpoint " + client.CheckpointRef(args[0], cp.ID)
				}
				fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%v\t%s\t%s\n", cp.ID, kind, cp.Status, fmtTime(cp.Triggered),
					cp.Duration.Round(time.Millisecond), fmtBytes(cp.Size), note)
			}
			return tw.Flush()
		},
	}
	jmFlag(cmd, &jm)
	tokenFlag(cmd)
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	return cmd
}

// fmtBytes prints a size with a binary unit.
func fmtBytes(n int64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	div, exp := int64(unit), 0
	for m := n / unit; m >= unit; m /= unit {
		div *= unit
		exp++
	}
	return fmt.Sprintf("%.1f %ciB", float64(n)/float64(div), "KMGTPE"[exp])
}
