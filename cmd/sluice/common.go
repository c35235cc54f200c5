package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/sluicehq/sluice/internal/rpcserver/kitexlog"
	"github.com/sluicehq/sluice/sdk/client"
)

// Environment variables holding defaults.
const (
	envJM   = "SLUICE_JM"   // the JobManager address
	envBlob = "SLUICE_BLOB" // the blob store URL
	// envToken holds the tenant token of client commands.
	envToken = "SLUICE_TOKEN"
	// envSecret holds the cluster secret of jm and tm (--secret-file wins).
	envSecret = "SLUICE_CLUSTER_SECRET"
)

// Exit codes.
const (
	exitFailed = 1 // the job did not finish, or the command failed
	exitUsage  = 2 // bad flags or arguments
)

// logger returns the stderr logger of a command: text, at the --log-level
// the user chose or the command's default. Kitex's process-wide logger
// writes to it from then on (kitexlog.Install).
func logger(cmd *cobra.Command, def slog.Level) (*slog.Logger, error) {
	lvl := def
	if s, _ := cmd.Flags().GetString("log-level"); s != "" {
		if err := lvl.UnmarshalText([]byte(s)); err != nil {
			return nil, usageErr(fmt.Errorf("--log-level %q: use debug, info, warn or error", s))
		}
	}
	l := slog.New(slog.NewTextHandler(cmd.ErrOrStderr(), &slog.HandlerOptions{Level: lvl}))
	kitexlog.Install(l)
	return l, nil
}

// jmFlag adds --jm with SLUICE_JM as its default.
func jmFlag(cmd *cobra.Command, addr *string) {
	cmd.Flags().StringVar(addr, "jm", os.Getenv(envJM), "JobManager address host:port, a list host:port,host:port of an HA cluster's JobManagers, or its etcd://HOST:PORT[/CLUSTER] (default $"+envJM+")")
}

// tokenFlag adds --token to a client command.
func tokenFlag(cmd *cobra.Command) {
	cmd.Flags().String("token", "", "tenant token for a JobManager with tenants (default $"+envToken+")")
}

// dial returns a client for addr carrying the command's --token (or
// $SLUICE_TOKEN), or a usage error when there is no address.
func dial(cmd *cobra.Command, addr string) (*client.Client, error) {
	if addr == "" {
		return nil, usageErr(errors.New("no JobManager address: pass --jm HOST:PORT or set " + envJM))
	}
	tok, _ := cmd.Flags().GetString("token")
	if tok == "" {
		tok = os.Getenv(envToken)
	}
	given := addr
	addr, err := resolveJM(cmd.Context(), given)
	if err != nil {
		return nil, err
	}
	opts := []client.Option{client.WithToken(tok)}
	if addr != given {
		// HA: a command that outlives the leader (an attached run,
		// logs --follow) follows it to the next one.
		opts = append(opts, client.WithLeaderLookup(func(ctx context.Context) (string, error) { return resolveJM(ctx, given) }))
	}
	tlsOpt, err := clientTLS(cmd)
	if err != nil {
		return nil, err
	}
	if tlsOpt != nil {
		opts = append(opts, tlsOpt)
	}
	return client.New(addr, opts...)
}

// signalContext is canceled on SIGINT or SIGTERM.
func signalContext(ctx context.Context) (context.Context, context.CancelFunc) {
	return signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
}

func usageErr(err error) error { return &exitError{code: exitUsage, err: err} }

// isTerminal reports whether f is a character device (a terminal).
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}
