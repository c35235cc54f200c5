package main

import (
	"errors"
	"fmt"
	"os"

	"github.com/cloudwego/kitex/pkg/klog"
	"github.com/spf13/cobra"
)

func main() {
	if err := newRootCmd().Execute(); err != nil {
		fmt.Fprintln(os.Stderr, "sluice:", err)
		os.Exit(exitCode(err))
	}
}

func newRootCmd() *cobra.Command {
	root := &cobra.Command{
		Use:           "sluice",
		Short:         "Run sandboxed WebAssembly dataflow jobs on a Flink-style cluster",
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.PersistentFlags().String("log-level", "", "log level on stderr: debug, info, warn, error (default: info for servers, warn for client commands)")
	root.PersistentPreRun = func(cmd *cobra.Command, _ []string) {
		// Kitex logs through its own logger (klog) at info by default;
		// only its warnings matter unless the user asked for debug.
		if lvl, _ := cmd.Flags().GetString("log-level"); lvl != "debug" {
			klog.SetLevel(klog.LevelWarn)
		}
	}
	root.AddCommand(commands()...)
	return root
}

// exitError carries a process exit code other than 1.
type exitError struct {
	code int
	err  error
}

func (e *exitError) Error() string { return e.err.Error() }
func (e *exitError) Unwrap() error { return e.err }

func exitCode(err error) int {
	var e *exitError
	if errors.As(err, &e) {
		return e.code
	}
	return exitFailed
}
