// Package resourcemanager is the JobManager's ResourceManager: TaskManagers
// register with it and heartbeat to it, and JobMasters get slots from it.
//
// The bookkeeping is the SlotManager, pure logic with time passed in; the
// ResourceManager adds the lock, the heartbeat-timeout loop, slot requests
// that wait for slots, and the callbacks that tell JobMasters about lost
// TaskManagers. It must not import idl/kitex_gen (jm/rpc adapts it).
package resourcemanager
