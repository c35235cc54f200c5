package main

import (
	"context"
	"log/slog"
	"os"
	"os/signal"
	"syscall"

	"github.com/sluicehq/sluice/internal/auth"
	"github.com/sluicehq/sluice/jm"
)

// reloadTenantsOnHangup reloads the tenants file on every SIGHUP until ctx
// ends, and returns a function that waits for it to stop. A file that does
// not read or parse changes nothing: the error says what and where, and
// the running tenants stay. Without a tenants file SIGHUP is only logged
// (it would otherwise end the process).
func reloadTenantsOnHangup(ctx context.Context, log *slog.Logger, path string, srv *jm.Server) (wait func()) {
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	done := make(chan struct{})
	go func() {
		defer close(done)
		defer signal.Stop(hup)
		for {
			select {
			case <-ctx.Done():
				return
			case <-hup:
				reloadTenants(ctx, log, path, srv)
			}
		}
	}()
	return func() { <-done }
}

func reloadTenants(ctx context.Context, log *slog.Logger, path string, srv *jm.Server) {
	if path == "" {
		log.Warn("SIGHUP: no --tenants file to reload; every client stays tenant \"default\" (restart with --tenants to add tenants)")
		return
	}
	next, err := auth.LoadTenants(path)
	if err != nil {
		log.Error("tenants file not reloaded: nothing changed; fix the file and send SIGHUP again", "file", path, "err", err)
		return
	}
	ch, err := srv.ReloadTenants(ctx, next)
	if err != nil {
		log.Error("tenants file reload failed", "file", path, "err", err)
		return
	}
	log.Info("tenants file reloaded", "file", path, "tenants", len(next.Names()), "added", ch.Added, "removed", ch.Removed, "changed", ch.Changed)
}
