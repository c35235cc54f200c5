// Package rpc is the TaskManager's Kitex boundary: the TaskExecutor handler
// the JobManager calls, and the ResourceManager and JobMaster clients the
// TaskManager calls. It converts between idl/kitex_gen and tm/executor's
// types (convert.go) and maps errors through internal/rpcerr; nothing else in
// tm imports kitex_gen.
package rpc
