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

	"github.com/sluicehq/sluice/internal/tlsconf"
	"github.com/sluicehq/sluice/sdk/client"
)

// Environment variables holding the TLS files (the flags win).
const (
	envTLSCA   = "SLUICE_TLS_CA"
	envTLSCert = "SLUICE_TLS_CERT"
	envTLSKey  = "SLUICE_TLS_KEY"
)

// tlsFlags adds the TLS flags every command shares.
func tlsFlags(cmd *cobra.Command) {
	f := cmd.PersistentFlags()
	f.String("tls-ca", os.Getenv(envTLSCA), "PEM file of the CA that signs the cluster's certificates; turns TLS on (default $"+envTLSCA+"; see docs/SECURITY.md)")
	f.String("tls-cert", os.Getenv(envTLSCert), "PEM certificate of this process: required by jm and tm (it must name the host others dial), optional for client commands (default $"+envTLSCert+")")
	f.String("tls-key", os.Getenv(envTLSKey), "PEM private key of --tls-cert (default $"+envTLSKey+")")
	f.String("tls-server-name", "", "client commands: the name the JobManager's certificate must hold (default: the --jm host)")
}

func tlsFiles(cmd *cobra.Command) tlsconf.Files {
	var f tlsconf.Files
	f.CA, _ = cmd.Flags().GetString("tls-ca")
	f.Cert, _ = cmd.Flags().GetString("tls-cert")
	f.Key, _ = cmd.Flags().GetString("tls-key")
	return f
}

// serverTLS loads the TLS files of jm or tm, or returns nil when none is
// named. Until ctx ends it re-reads them when they change and on SIGHUP,
// so a renewed certificate needs no restart.
func serverTLS(ctx context.Context, cmd *cobra.Command, log *slog.Logger) (*tlsconf.Source, error) {
	files := tlsFiles(cmd)
	if !files.Enabled() {
		return nil, nil
	}
	if files.Cert == "" {
		return nil, usageErr(fmt.Errorf("--tls-ca without --tls-cert and --tls-key: a %s serves TLS with a certificate of its own", cmd.Name()))
	}
	src, err := tlsconf.Load(files)
	if err != nil {
		return nil, usageErr(err)
	}
	src.LogLoaded(log, "tls on")
	go src.Watch(ctx, 0, log)
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	go func() {
		defer signal.Stop(hup)
		for {
			select {
			case <-ctx.Done():
				return
			case <-hup:
				if err := src.Reload(); err != nil {
					log.Warn("SIGHUP: cannot reload the tls files; keeping the previous ones", "err", err)
					continue
				}
				src.LogLoaded(log, "SIGHUP: tls files reloaded")
			}
		}
	}()
	return src, nil
}

// clientTLS is the client option of the command's TLS flags, or nil when
// none is named.
func clientTLS(cmd *cobra.Command) (client.Option, error) {
	files := tlsFiles(cmd)
	if !files.Enabled() {
		return nil, nil
	}
	src, err := tlsconf.Load(files)
	if err != nil {
		return nil, usageErr(err)
	}
	name, _ := cmd.Flags().GetString("tls-server-name")
	return client.WithTLS(src.ClientConfig(name)), nil
}

// warnPlaintext warns that what listens on addr, off loopback, speaks no
// TLS.
func warnPlaintext(w io.Writer, what, addr string) {
	if !isLoopback(addr) {
		fmt.Fprintf(w, "WARNING: no TLS (--tls-ca, --tls-cert, --tls-key): %s on %s is plaintext; tokens, the cluster secret's proofs and records can be read on the network\n", what, addr)
	}
}

// plaintextHint is a hint for a client command that could not reach the
// JobManager without TLS: a JobManager with TLS hangs up on a plaintext
// client, which reads as a network error.
func plaintextHint(root *cobra.Command, args []string, err error) string {
	cmd, _, ferr := root.Find(args)
	if ferr != nil || cmd.Flags().Lookup("jm") == nil || tlsFiles(cmd).Enabled() || !errors.Is(err, client.ErrUnavailable) {
		return ""
	}
	return "sluice: if the JobManager runs with TLS, pass --tls-ca (or set " + envTLSCA + ") with the CA that signed its certificate"
}
