// Package rpc is the JobManager's Kitex boundary: one endpoint file per
// service it serves (Dispatcher, ResourceManager, JobMaster), the client
// side of the TaskExecutor service it calls, and convert.go, the only place
// kitex_gen types meet the domain's. Every handler runs the same steps:
// authenticate → validate → call the domain → map the error through
// internal/rpcerr.
package rpc
