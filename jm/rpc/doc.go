// Package rpc is the JobManager's Kitex boundary: one endpoint file per
// service it serves (Dispatcher, ResourceManager, JobMaster), the client
// side of the TaskExecutor service it calls. The control vocabulary it shares
// with the TaskManager (deployments, task reports, splits, checkpoint
// messages) is converted by internal/rpcwire, the same functions tm/rpc
// uses; convert.go holds only what is the JobManager's alone (the
// Dispatcher's job details, the ResourceManager's registration). Every
// handler runs the same steps: authenticate → validate → call the domain →
// map the error to the wire (rpcserver.ToWire, by internal/rpcerr's table).
package rpc
