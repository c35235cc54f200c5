package rpc

import (
	"github.com/cloudwego/kitex/server"

	dspsvc "github.com/sluicehq/sluice/idl/kitex_gen/sluice/dispatcher/dispatcher"
	jmsvc "github.com/sluicehq/sluice/idl/kitex_gen/sluice/jobmaster/jobmaster"
	rmsvc "github.com/sluicehq/sluice/idl/kitex_gen/sluice/resourcemanager/resourcemanager"
	"github.com/sluicehq/sluice/internal/rpcserver"
	dsp "github.com/sluicehq/sluice/jm/dispatcher"
	rmd "github.com/sluicehq/sluice/jm/resourcemanager"
)

// Services returns the registrations of every service the JobManager
// serves, for rpcserver.Start. A nil auth means OpenAuth.
func Services(d *dsp.Dispatcher, rm *rmd.ResourceManager, auth Auth) []rpcserver.Registration {
	if auth == nil {
		auth = OpenAuth{}
	}
	return []rpcserver.Registration{
		func(s server.Server) error { return dspsvc.RegisterService(s, &DispatcherEndpoint{D: d, Auth: auth}) },
		func(s server.Server) error {
			return rmsvc.RegisterService(s, &ResourceManagerEndpoint{RM: rm, Auth: auth})
		},
		func(s server.Server) error { return jmsvc.RegisterService(s, &JobMasterEndpoint{D: d, Auth: auth}) },
	}
}
