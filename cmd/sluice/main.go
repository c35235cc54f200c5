package main

import (
	"errors"
	"fmt"
	"log/slog"
	"os"

	"github.com/spf13/cobra"
)

func main() {
	root := newRootCmd()
	if err := root.Execute(); err != nil {
		fmt.Fprintln(os.Stderr, "sluice:", err)
		if hint := plaintextHint(root, os.Args[1:], err); hint != "" {
			fmt.Fprintln(os.Stderr, hint)
		}
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
	tlsFlags(root)
	root.PersistentPreRunE = func(cmd *cobra.Command, _ []string) error {
		// Kitex's logs go to the command's stderr logger (servers replace
		// it with their own when they build it), at warn unless asked.
		_, err := logger(cmd, slog.LevelWarn)
		return err
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
