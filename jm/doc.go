// Package jm is the JobManager: the Dispatcher (the front door for clients),
// the ResourceManager with its SlotManager (TaskManagers, slots, heartbeats)
// and one JobMaster per job (execution graph, scheduling, restarts).
//
// Subpackages hold each part; package jm wires them into one process that
// serves every service on one Kitex port:
//
//	srv, err := jm.New(ctx, jm.Config{ListenAddr: "127.0.0.1:0", Blob: store, Runtime: rt})
//	defer srv.Close()
//	fmt.Println(srv.Addr()) // Dispatcher, ResourceManager and JobMaster services
//
//	jm/resourcemanager  SlotManager (pure bookkeeping) + ResourceManager (lock, heartbeat timeouts, waiting slot requests)
//	jm/jobmaster        one goroutine-owned state machine per job
//	jm/dispatcher       uploads, submissions, job registry, retention
//	jm/rpc              the Kitex endpoints and the TaskExecutor client (the only kitex_gen importer)
//	jm/rest             the REST API (Config.RESTListenAddr), Flink's paths over the same Dispatcher calls
//
// Only jm/rpc imports idl/kitex_gen. It must not import tm.
package jm
