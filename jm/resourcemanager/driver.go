package resourcemanager

import (
	"context"
	"log/slog"
)

// ResourceSpec is what one TaskManager a Driver starts must offer.
type ResourceSpec struct {
	// Slots is the number of task slots; at least 1.
	Slots int
	// MemoryBytes is the memory the TaskManager may use; 0 means the
	// driver's (or its template's) default.
	MemoryBytes int64
}

// DriverEnv is what a Driver is handed at Initialize.
type DriverEnv struct {
	// JobManagerAddress is the Kitex address the TaskManagers the driver
	// starts register with.
	JobManagerAddress string
	// OnTerminated tells the ResourceManager that a TaskManager the driver
	// started has ended (its process exited, its pod was deleted or
	// failed) without being released. It may be called from any goroutine,
	// must not be called with a lock the driver's other methods take, and
	// is never called for a TaskManager after ReleaseTaskManager for it
	// returned.
	OnTerminated func(resourceID, reason string)
	// Logger; never nil.
	Logger *slog.Logger
}

// Driver asks an outside system (this machine's processes, Kubernetes) for
// TaskManagers and gives them back: Flink's ResourceManagerDriver. The
// ResourceManager calls Initialize once before any other method and Close
// once at the end; the other methods may be called concurrently.
//
// The TaskManager a driver starts registers under the resource id its
// RequestTaskManager returned, which is how the ResourceManager ties the
// registration to the request.
type Driver interface {
	// Name is a short word for logs and errors ("process", "kubernetes").
	Name() string
	// Initialize prepares the driver and returns the resource ids of
	// TaskManagers an earlier JobManager of this cluster started that still
	// run (the ResourceManager adopts them: they count toward the maximum
	// and are released when idle).
	//
	// # Errors
	//
	// A driver that cannot work (a bad template, no API server); the
	// JobManager does not start then.
	Initialize(ctx context.Context, env DriverEnv) (recovered []string, err error)
	// RequestTaskManager starts one TaskManager offering spec and returns
	// the resource id it registers under. It returns once the start was
	// asked for, not once the TaskManager registered.
	//
	// # Errors
	//
	// The TaskManager could not be started; nothing is left running.
	RequestTaskManager(ctx context.Context, spec ResourceSpec) (resourceID string, err error)
	// ReleaseTaskManager stops a TaskManager the driver started. Releasing
	// one that already ended is not an error.
	//
	// # Errors
	//
	// It could not be stopped (the API server refused); the
	// ResourceManager logs the error and forgets the TaskManager.
	ReleaseTaskManager(ctx context.Context, resourceID string) error
	// Close stops the driver's own goroutines. What it does with the
	// TaskManagers still running is the driver's choice, documented on it.
	Close(ctx context.Context) error
}
