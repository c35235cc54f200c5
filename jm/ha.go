package jm

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"time"

	"github.com/sluicehq/sluice/blob"
	"github.com/sluicehq/sluice/internal/control"
	"github.com/sluicehq/sluice/jm/dispatcher"
	"github.com/sluicehq/sluice/jm/ha"
	"github.com/sluicehq/sluice/wasmhost"
)

// RunHA runs a JobManager that stands by until elected: it campaigns with
// el, serves as cfg describes while it leads (New with cfg.Leadership),
// and when the leadership is lost — its lease expired because the process
// was paused or cut off from etcd, or a guarded write found another
// leader — it stops at once (every job SUSPENDED, the port closed) and
// campaigns again. onLeader, when set, is told each new server. It returns
// when ctx ends, resigning so a standby takes over without waiting for
// the lease.
//
//	   ┌────────────┐ elected ┌─────────┐
//	──▶│ standing by│────────▶│ leading │──┐ ctx ends: Close, Resign
//	   └────────────┘         └─────────┘  ▼
//	          ▲ lease lost: Close    │
//	          └──────────────────────┘
//
// # Errors
//
// A server that cannot start as leader (a listen error, an unreadable job
// store).
func RunHA(ctx context.Context, cfg Config, el ha.Elector, onLeader func(*Server)) error {
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	log := cfg.Logger
	if cfg.Runtime == nil && cfg.Planner == nil {
		// One runtime for every term: what a standby compiles ahead is
		// there when it leads.
		if cfg.ModuleSizeLimit <= 0 {
			cfg.ModuleSizeLimit = dispatcher.DefaultModuleSizeLimit
		}
		rt, err := wasmhost.NewRuntime(ctx, wasmhost.NewRuntimeConfig().WithMaxModuleBytes(int(cfg.ModuleSizeLimit)).WithLogger(log))
		if err != nil {
			return fmt.Errorf("jobmanager: wasm runtime: %w", err)
		}
		defer rt.Close(context.WithoutCancel(ctx))
		cfg.Runtime = rt
	}
	for {
		log.Info("standing by: campaigning for the leadership")
		wctx, stopWarm := context.WithCancel(ctx)
		warmed := make(chan struct{})
		go func() { defer close(warmed); warmStandby(wctx, cfg, el) }()
		l, err := el.Campaign(ctx)
		stopWarm()
		<-warmed
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			log.Warn("campaign failed; retrying", "err", err)
			select {
			case <-ctx.Done():
				return nil
			case <-time.After(time.Second):
			}
			continue
		}
		log.Info("elected leader", "session", l.Session())
		c := cfg
		c.Leadership = l
		srv, err := New(ctx, c)
		if err != nil {
			rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
			l.Resign(rctx)
			cancel()
			switch {
			case ctx.Err() != nil:
				return nil // stopped while taking over
			case errors.Is(err, ha.ErrNotLeader):
				continue
			}
			return fmt.Errorf("lead: %w", err)
		}
		if onLeader != nil {
			onLeader(srv)
		}
		select {
		case <-ctx.Done():
			err := srv.Close()
			rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
			l.Resign(rctx)
			cancel()
			return err
		case <-l.Lost():
			log.Error("lost the leadership: stopping every job and standing by; the new leader recovers them", "session", l.Session())
			srv.Close()
		}
	}
}

// warmStandby compiles, while this JobManager stands by, the modules of
// the live jobs in the store (every 2s, each module once), so a takeover
// plans them without a cold compile. Best effort.
func warmStandby(ctx context.Context, cfg Config, el ha.Elector) {
	if cfg.Runtime == nil {
		return
	}
	done := map[control.ModuleRef]bool{}
	for {
		jobs, err := el.Jobs(ctx)
		if err != nil && ctx.Err() == nil {
			cfg.Logger.Debug("standby: read the job store failed", "err", err)
		}
		for _, j := range jobs {
			ref := control.ModuleRef{Tenant: j.Tenant, Digest: j.ModuleDigest}
			if j.Ended != nil || done[ref] || ctx.Err() != nil {
				continue
			}
			if err := compileStored(ctx, cfg, ref); err != nil {
				cfg.Logger.Debug("standby: compile a running job's module ahead failed", "module", ref.Digest, "err", err)
				continue
			}
			done[ref] = true
			cfg.Logger.Info("standby: compiled a running job's module ahead", "job", j.ID, "tenant", j.Tenant, "module", ref.Digest)
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(2 * time.Second):
		}
	}
}

// compileStored reads a module from the blob store and compiles it.
func compileStored(ctx context.Context, cfg Config, ref control.ModuleRef) error {
	rc, err := blob.GetModule(ctx, cfg.Blob, ref.Tenant, ref.Digest)
	if err != nil {
		return err
	}
	defer rc.Close()
	wasm, err := io.ReadAll(io.LimitReader(rc, cfg.ModuleSizeLimit+1))
	if err != nil {
		return err
	}
	_, err = cfg.Runtime.CompileFor(ctx, ref.Tenant, wasm)
	return err
}
