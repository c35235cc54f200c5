package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"sync"
	"syscall"

	"github.com/sluicehq/sluice/internal/auth"
	"github.com/sluicehq/sluice/jm"
)

// reloadTenantsOnHangup reloads the tenants file on every SIGHUP until ctx
// ends, and returns a function that waits for it to stop. A file that does
// not read or parse changes nothing: the error says what and where, and
// the running tenants stay. Without a tenants file SIGHUP is only logged
// (it would otherwise end the process). reload applies a file read
// (jm.Server.ReloadTenants, or haReload's).
func reloadTenantsOnHangup(ctx context.Context, log *slog.Logger, path string, reload func(context.Context, *auth.Tenants) (auth.Changes, error)) (wait func()) {
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
				reloadTenants(ctx, log, path, reload)
			}
		}
	}()
	return func() { <-done }
}

func reloadTenants(ctx context.Context, log *slog.Logger, path string, reload func(context.Context, *auth.Tenants) (auth.Changes, error)) {
	if path == "" {
		log.Warn("SIGHUP: no --tenants file to reload; every client stays tenant \"default\" (restart with --tenants to add tenants)")
		return
	}
	next, err := auth.LoadTenants(path)
	if err != nil {
		log.Error("tenants file not reloaded: nothing changed; fix the file and send SIGHUP again", "file", path, "err", err)
		return
	}
	ch, err := reload(ctx, next)
	if err != nil {
		log.Error("tenants file reload failed", "file", path, "err", err)
		return
	}
	log.Info("tenants file reloaded", "file", path, "tenants", len(next.Names()), "added", ch.Added, "removed", ch.Removed, "changed", ch.Changed)
}

// haReload is the reload of `sluice jm --ha`: the leading server's
// ReloadTenants (which also cancels a removed tenant's jobs), or, while it
// stands by, the tenants every later term starts with.
type haReload struct {
	tenants *auth.Tenants
	mu      sync.Mutex
	leading *jm.Server
}

func (h *haReload) lead(srv *jm.Server) {
	h.mu.Lock()
	h.leading = srv
	h.mu.Unlock()
}

func (h *haReload) reload(ctx context.Context, next *auth.Tenants) (auth.Changes, error) {
	h.mu.Lock()
	srv := h.leading
	h.mu.Unlock()
	if srv != nil && !srv.Closed() {
		return srv.ReloadTenants(ctx, next)
	}
	if h.tenants == nil {
		return auth.Changes{}, errors.New("reload tenants: this job manager was started without a tenants file: restart it with --tenants")
	}
	ch, err := h.tenants.Replace(next)
	if err != nil {
		return auth.Changes{}, fmt.Errorf("reload tenants: %w", err)
	}
	return ch, nil
}
