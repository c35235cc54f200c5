package executor

import (
	"context"
	"errors"
	"time"

	"github.com/sluicehq/sluice/internal/control"
	"github.com/sluicehq/sluice/internal/rpcerr"
)

// Defaults when the ResourceManager's answer leaves them zero.
const (
	defaultHeartbeatInterval = time.Second
	defaultHeartbeatTimeout  = 10 * time.Second
	maxRegisterBackoff       = 5 * time.Second
)

// RunRegistration registers this TaskManager with the ResourceManager and
// heartbeats, with a slot report, at the interval the ResourceManager
// returned, until ctx ends.
//
// It registers again, with backoff, when a heartbeat answers known=false (the
// JobManager restarted, or declared this TaskManager dead) or when no
// heartbeat has succeeded for the heartbeat timeout. Either way the
// JobManager has given up on the tasks running here (and will restart them
// elsewhere), so they are canceled and every slot freed first (Reset).
//
//	   ┌──────────────┐  ok   ┌───────────────┐
//	──▶│ registering  │──────▶│  heartbeating │──┐ ok, every interval
//	   └──────────────┘       └───────────────┘◀─┘
//	     ▲  │ error: backoff      │ known=false, or no success
//	     │  └─▶(retry)            │ for the heartbeat timeout
//	     └────────────────────────┘ (Reset: cancel tasks, free slots)
func (e *Executor) RunRegistration(ctx context.Context, rm ResourceManager, reg control.Registration) {
	log := e.log
	backoff := 100 * time.Millisecond
	failures := 0
	for ctx.Err() == nil {
		reg.SlotReport = e.SlotReport()
		r, err := rm.Register(ctx, reg)
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			failures++
			lvl := log.Debug
			if failures == 1 || failures%20 == 0 {
				lvl = log.Warn
			}
			if permanent(err) {
				lvl = log.Error
			}
			lvl("could not register with the resource manager; retrying", "err", err, "attempts", failures, "backoff", backoff)
			if !sleep(ctx, backoff) {
				return
			}
			backoff = min(backoff*2, maxRegisterBackoff)
			continue
		}
		failures, backoff = 0, 100*time.Millisecond
		if r.HeartbeatInterval <= 0 {
			r.HeartbeatInterval = defaultHeartbeatInterval
		}
		if r.HeartbeatTimeout <= 0 {
			r.HeartbeatTimeout = defaultHeartbeatTimeout
		}
		e.ObserveLeaderSession(r.LeaderSession)
		e.setRegistration(r.RegistrationID)
		log.Info("registered with the resource manager", "registration", r.RegistrationID,
			"heartbeat_interval", r.HeartbeatInterval, "heartbeat_timeout", r.HeartbeatTimeout)

		reason := e.heartbeat(ctx, rm, reg.ResourceID, r)
		e.setRegistration("")
		if ctx.Err() != nil {
			return
		}
		log.Warn("registering again", "reason", reason)
		e.Reset(reason)
	}
}

// heartbeat sends heartbeats until one answers known=false, none succeeds
// for the timeout, or ctx ends; it returns why it stopped.
func (e *Executor) heartbeat(ctx context.Context, rm ResourceManager, resourceID string, r control.Registered) string {
	t := time.NewTicker(r.HeartbeatInterval)
	defer t.Stop()
	lastOK := time.Now()
	for {
		select {
		case <-ctx.Done():
			return "shutting down"
		case <-t.C:
		}
		hctx, cancel := context.WithTimeout(ctx, r.HeartbeatTimeout)
		known, err := rm.Heartbeat(hctx, control.Heartbeat{
			ResourceID:     resourceID,
			RegistrationID: r.RegistrationID,
			SlotReport:     e.SlotReport(),
			Metrics:        e.Metrics(),
			Tasks:          e.HeartbeatMetrics(),
		})
		cancel()
		switch {
		case ctx.Err() != nil:
			return "shutting down"
		case err != nil:
			if time.Since(lastOK) >= r.HeartbeatTimeout {
				return "no heartbeat answered for " + r.HeartbeatTimeout.String() + ": " + err.Error()
			}
			e.log.Debug("heartbeat failed", "err", err)
		case !known:
			return "the resource manager no longer knows this task manager"
		default:
			lastOK = time.Now()
		}
	}
}

// Registered reports whether the TaskManager is registered with the
// ResourceManager now, and under which registration id.
func (e *Executor) Registered() (string, bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.registration, e.registration != ""
}

func (e *Executor) setRegistration(id string) {
	e.mu.Lock()
	e.registration = id
	e.mu.Unlock()
}

// permanent reports registration errors that retrying will not fix by
// itself (the operator must change the TaskManager's configuration); the
// loop still retries, as the JobManager may be the one to change.
func permanent(err error) bool {
	return errors.Is(err, rpcerr.ErrInvalidArgument) || errors.Is(err, rpcerr.ErrPermissionDenied) ||
		errors.Is(err, rpcerr.ErrUnauthenticated)
}

func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}
