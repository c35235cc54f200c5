package rpc

import (
	"context"

	"github.com/sluicehq/sluice/jm/dispatcher"
)

// Auth authenticates calls. It is a placeholder for the tenants issue: the
// default lets every client act as the default tenant and every peer in.
type Auth interface {
	// Client returns the tenant a client call acts for.
	Client(ctx context.Context) (tenant string, err error)
	// Peer checks a call from a TaskManager or task (cluster secret).
	Peer(ctx context.Context) error
}

// OpenAuth is the Auth of a cluster without tenants: everyone is the
// default tenant.
type OpenAuth struct{}

// Client returns dispatcher.DefaultTenant.
func (OpenAuth) Client(context.Context) (string, error) { return dispatcher.DefaultTenant, nil }

// Peer accepts every peer.
func (OpenAuth) Peer(context.Context) error { return nil }
