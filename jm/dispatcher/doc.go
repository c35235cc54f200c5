// Package dispatcher is the JobManager's front door: it stores uploaded
// modules, turns a submission into a validated job graph (the module's plan
// runs in a sandbox), starts one JobMaster per job, and answers list, status,
// wait, cancel and the cluster overview. Finished jobs stay queryable for a
// retention time.
//
// Every call takes the tenant the caller acts for; jobs and modules of one
// tenant are invisible to the others (an unknown and a foreign job look the
// same: not found). It must not import idl/kitex_gen (jm/rpc adapts it).
package dispatcher
