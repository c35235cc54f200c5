package jm

import (
	"context"
	"errors"
	"fmt"

	"github.com/sluicehq/sluice/internal/auth"
)

// RemovedTenantReason is the reason a removed tenant's jobs are cancelled
// with, as sluice status and the REST exceptions show it.
func RemovedTenantReason(tenant string) string {
	return fmt.Sprintf("tenant %s was removed from the tenants file: the job manager canceled the job", tenant)
}

// ReloadTenants makes next the server's tenants: from the call's return,
// every call is authenticated against next's tokens, and new submissions
// get next's quotas and policies (jobs already running keep the limits
// they started with). Every live job of a tenant next no longer holds is
// cancelled, with RemovedTenantReason in its history. next must be fully
// parsed (auth.LoadTenants): a file that does not parse never reaches
// here, so it changes nothing.
//
// # Errors
//
// An error when the server was started without tenants (an open cluster
// stays open: restart it with a tenants file) or next is nil; the
// context's error when it ends while removed tenants' jobs are being
// cancelled (the new tenants are in place then).
func (s *Server) ReloadTenants(ctx context.Context, next *auth.Tenants) (auth.Changes, error) {
	if s.cfg.Tenants == nil {
		return auth.Changes{}, errors.New("reload tenants: this job manager was started without a tenants file, so every client is tenant \"default\": restart it with --tenants")
	}
	ch, err := s.cfg.Tenants.Replace(next)
	if err != nil {
		return auth.Changes{}, fmt.Errorf("reload tenants: %w", err)
	}
	for _, t := range ch.Removed {
		ids, err := s.d.CancelTenantJobs(ctx, t, RemovedTenantReason(t))
		if len(ids) > 0 {
			s.log.Info("removed tenant's jobs canceled", "tenant", t, "jobs", ids)
		}
		if err != nil {
			return ch, fmt.Errorf("reload tenants: cancel the jobs of removed tenant %s: %w", t, err)
		}
	}
	return ch, nil
}

// policyOf gives the Dispatcher each tenant's current policy; nil without
// tenants (an open cluster has no policy).
func policyOf(ts *auth.Tenants) func(string) auth.Policy {
	if ts == nil {
		return nil
	}
	return ts.Policy
}
