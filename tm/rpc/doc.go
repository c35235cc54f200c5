// Package rpc is the TaskManager's Kitex boundary: the TaskExecutor handler
// the JobManager calls, and the ResourceManager and JobMaster clients the
// TaskManager calls. The control vocabulary (internal/control) is converted
// by internal/rpcwire, the same functions jm/rpc uses; convert.go holds only
// the registration and heartbeat with the ResourceManager. Errors cross with
// rpcserver.ToWire and rpcserver.FromCall; nothing else in tm imports
// kitex_gen.
package rpc
