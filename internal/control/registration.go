package control

import "time"

// Registration is what a TaskManager tells the ResourceManager about itself.
type Registration struct {
	ResourceID  string // stable name of the TaskManager, unique in the cluster
	RPCAddress  string // its RPC address (TaskExecutor service), host:port
	DataAddress string // its data-exchange address, host:port
	Slots       int
	CPUCores    int
	MemoryBytes int64
	SlotReport  []SlotStatus // allocations it holds already (it outlived a JobManager)
}

// SlotStatus is one slot in a slot report.
type SlotStatus struct {
	Index        int
	AllocationID string // empty when free
	JobID        string
}

// Registered is the ResourceManager's answer to a registration.
type Registered struct {
	RegistrationID    string
	HeartbeatInterval time.Duration
	HeartbeatTimeout  time.Duration
	// LeaderSession is the JobManager's leader session: an HA session
	// (HASession) fences off the older leaders' calls.
	LeaderSession string
}

// Heartbeat is a TaskManager's periodic report to the ResourceManager.
type Heartbeat struct {
	ResourceID     string
	RegistrationID string
	SlotReport     []SlotStatus
	Metrics        map[string]int64
	// Tasks are the live figures of the tasks running on the TaskManager;
	// the ResourceManager hands them to the JobMaster of each job.
	Tasks []ExecutionMetrics
}
