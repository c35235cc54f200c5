// Package keygroup maps keys to key groups and key groups to subtasks, the
// way Flink's KeyGroupRangeAssignment does. Keyed state is stored by key group
// and the hash partitioner routes by key group, so a record always reaches the
// subtask that holds its key's state, and a job can be rescaled by handing
// whole key groups to new subtasks.
//
// It uses the standard library only (the guest SDK may import it).
package keygroup
