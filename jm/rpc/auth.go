package rpc

import (
	"context"

	"github.com/sluicehq/sluice/internal/auth"
	"github.com/sluicehq/sluice/internal/rpcerr"
	"github.com/sluicehq/sluice/internal/rpcserver"
	"github.com/sluicehq/sluice/jm/dispatcher"
)

// Auth authenticates calls.
type Auth interface {
	// Client returns the tenant a client call acts for.
	//
	// # Errors
	//
	// ErrUnauthenticated: no token, or one no tenant holds.
	Client(ctx context.Context) (tenant string, err error)
	// ClientToken returns the tenant a client's bearer token names ("" for
	// no token): the one check behind Client and the REST API's
	// Authorization header.
	//
	// # Errors
	//
	// ErrUnauthenticated: no token, or one no tenant holds.
	ClientToken(ctx context.Context, token string) (tenant string, err error)
	// Peer checks a call from a TaskManager or task (cluster secret).
	//
	// # Errors
	//
	// ErrUnauthenticated: no proof of the cluster secret, or a wrong one.
	Peer(ctx context.Context) error
}

// OpenAuth is the Auth of a cluster without tenants: everyone is the
// default tenant.
type OpenAuth struct{}

// Client returns dispatcher.DefaultTenant.
func (OpenAuth) Client(context.Context) (string, error) { return dispatcher.DefaultTenant, nil }

// ClientToken returns dispatcher.DefaultTenant, whatever the token.
func (OpenAuth) ClientToken(context.Context, string) (string, error) {
	return dispatcher.DefaultTenant, nil
}

// Peer accepts every peer.
func (OpenAuth) Peer(context.Context) error { return nil }

// TokenAuth authenticates clients by the bearer token in their calls'
// metadata (rpcserver.MetaToken) and peers by the proof of the cluster
// secret (rpcserver.MetaPeer). A nil Tenants lets every client in as the
// default tenant; a nil Secret lets every peer in.
type TokenAuth struct {
	Tenants *auth.Tenants
	Secret  *auth.Secret
}

// Client returns the tenant whose token the call carries.
func (a TokenAuth) Client(ctx context.Context) (string, error) {
	tok, _ := rpcserver.Incoming(ctx, rpcserver.MetaToken)
	return a.ClientToken(ctx, tok)
}

// ClientToken returns the tenant holding token; with no Tenants, the
// default tenant.
//
// # Errors
//
// ErrUnauthenticated: no token, or one no tenant holds.
func (a TokenAuth) ClientToken(_ context.Context, tok string) (string, error) {
	if a.Tenants == nil {
		return dispatcher.DefaultTenant, nil
	}
	if tok == "" {
		return "", rpcerr.Errorf(rpcerr.ErrUnauthenticated, "no token: pass --token or set SLUICE_TOKEN")
	}
	t, err := a.Tenants.Lookup(tok)
	if err != nil {
		return "", rpcerr.Errorf(rpcerr.ErrUnauthenticated, "invalid token: ask the cluster operator for one (sluice tenant add)")
	}
	return t.Name, nil
}

// Peer checks the cluster-secret proof of the call.
func (a TokenAuth) Peer(ctx context.Context) error {
	if a.Secret == nil {
		return nil
	}
	proof, _ := rpcserver.Incoming(ctx, rpcserver.MetaPeer)
	if !a.Secret.CheckRPC(proof) {
		return rpcerr.Errorf(rpcerr.ErrUnauthenticated, "not a cluster member: wrong or missing cluster secret (--secret-file or SLUICE_CLUSTER_SECRET)")
	}
	return nil
}
