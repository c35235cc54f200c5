// Package checkpoint is the vocabulary the JobMaster's checkpoint
// coordinator and the TaskManager's tasks share: triggers, acknowledgements,
// state handles, source positions, file-sink parts, the metadata object
// that makes a checkpoint (or savepoint) exist, and the records objects that
// keep a job's collected records across a JobManager failover.
//
// # Layout in the blob store
//
//	tenants/<t>/jobs/<job>/checkpoints/<n>/task-<v1>_<v2>-<subtask>.state   one per subtask
//	tenants/<t>/jobs/<job>/checkpoints/<n>/_metadata                        written last
//	tenants/<t>/savepoints/<id>/…                                           same shape, owned by the user
//	tenants/<t>/jobs/<job>/pending/<vertex>-<subtask>-a<attempt>-<seq>      file-sink parts not yet committed
//	tenants/<t>/files/<path>/part-<job>-<vertex>-<subtask>-a<attempt>-<seq> committed file-sink parts
//	tenants/<t>/results/<job>/released/<n>                                  HA: collect-sink records checkpoint n released
//	tenants/<t>/results/<job>/records                                       HA: every record released, once the job ended
//
// A checkpoint directory without _metadata does not exist: nothing lists or
// restores it, and the coordinator deletes it when the checkpoint aborts.
//
// It imports only blob and the standard
// library plus sonic; jm and tm both import it, it imports neither.
package checkpoint
