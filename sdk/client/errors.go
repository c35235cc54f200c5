package client

import "github.com/sluicehq/sluice/internal/rpcerr"

// Errors a call can return, matched with errors.Is. They are the JobManager's
// own errors, carried over the wire with their code: a client sees the same
// error the server had.
var (
	ErrInvalidArgument    = rpcerr.ErrInvalidArgument
	ErrNotFound           = rpcerr.ErrNotFound
	ErrAlreadyExists      = rpcerr.ErrAlreadyExists
	ErrPermissionDenied   = rpcerr.ErrPermissionDenied
	ErrUnauthenticated    = rpcerr.ErrUnauthenticated
	ErrResourceExhausted  = rpcerr.ErrResourceExhausted
	ErrFailedPrecondition = rpcerr.ErrFailedPrecondition
	// ErrUnavailable: the JobManager could not be reached.
	ErrUnavailable = rpcerr.ErrUnavailable
	// ErrDeadlineExceeded: the call timed out.
	ErrDeadlineExceeded = rpcerr.ErrDeadlineExceeded
	ErrInternal         = rpcerr.ErrInternal

	// ErrJobNotFound: no job with that id.
	ErrJobNotFound = rpcerr.ErrJobNotFound
	// ErrModuleNotFound: no module with that digest; upload it first.
	ErrModuleNotFound = rpcerr.ErrModuleNotFound
	// ErrInvalidModule: the bytes are not a Sluice Wasm module.
	ErrInvalidModule = rpcerr.ErrInvalidModule
	// ErrModuleTooLarge: the module is over the cluster's size limit.
	ErrModuleTooLarge = rpcerr.ErrModuleTooLarge
	// ErrNotEnoughSlots: the job needs more slots than the cluster can give.
	ErrNotEnoughSlots = rpcerr.ErrNotEnoughSlots
)
