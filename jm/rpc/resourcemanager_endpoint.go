package rpc

import (
	"context"

	"github.com/sluicehq/sluice/idl/kitex_gen/sluice/resourcemanager"
	"github.com/sluicehq/sluice/internal/rpcerr"
	"github.com/sluicehq/sluice/internal/rpcserver"
	"github.com/sluicehq/sluice/internal/rpcwire"
	rmd "github.com/sluicehq/sluice/jm/resourcemanager"
)

// ResourceManagerEndpoint serves the ResourceManager service.
type ResourceManagerEndpoint struct {
	RM   *rmd.ResourceManager
	Auth Auth
}

var _ resourcemanager.ResourceManager = (*ResourceManagerEndpoint)(nil)

// RegisterTaskManager registers a TaskManager.
func (e *ResourceManagerEndpoint) RegisterTaskManager(ctx context.Context, req *resourcemanager.RegisterTaskManagerRequest) (*resourcemanager.RegisterTaskManagerResponse, error) {
	if err := e.Auth.Peer(ctx); err != nil {
		return nil, rpcserver.ToWire(err)
	}
	if req == nil {
		return nil, rpcserver.ToWire(rpcerr.Errorf(rpcerr.ErrInvalidArgument, "register task manager: no request"))
	}
	r, err := e.RM.RegisterTaskManager(ctx, rpcwire.RegistrationFromWire(req))
	if err != nil {
		return nil, rpcserver.ToWire(err)
	}
	return rpcwire.RegisteredToWire(r), nil
}

// Heartbeat records a heartbeat.
func (e *ResourceManagerEndpoint) Heartbeat(ctx context.Context, req *resourcemanager.HeartbeatRequest) (*resourcemanager.HeartbeatResponse, error) {
	if err := e.Auth.Peer(ctx); err != nil {
		return nil, rpcserver.ToWire(err)
	}
	if req == nil {
		return nil, rpcserver.ToWire(rpcerr.Errorf(rpcerr.ErrInvalidArgument, "heartbeat: no request"))
	}
	known, err := e.RM.Heartbeat(ctx, rpcwire.HeartbeatFromWire(req))
	if err != nil {
		return nil, rpcserver.ToWire(err)
	}
	return &resourcemanager.HeartbeatResponse{Known: known}, nil
}
