package dispatcher

import "github.com/sluicehq/sluice/internal/rpcerr"

// Bounds on a submission's arguments, config and name, checked by
// CheckSubmission at every front door (Kitex and REST).
const (
	MaxArgs        = 1024
	MaxArgsBytes   = 64 << 10
	MaxConfig      = 256
	MaxConfigBytes = 64 << 10
	MaxNameBytes   = 256
)

// CheckSubmission refuses arguments, config and names beyond the bounds:
// they are copied into every task deployment and the job's details. The
// front doors call it before anything else of the submission is read.
//
// # Errors
//
// ErrInvalidArgument naming the bound.
func CheckSubmission(s Submission) error {
	n := 0
	for _, a := range s.Args {
		n += len(a)
	}
	if len(s.Args) > MaxArgs || n > MaxArgsBytes {
		return rpcerr.Errorf(rpcerr.ErrInvalidArgument, "submit job: %d arguments of %d bytes: at most %d arguments and %d bytes", len(s.Args), n, MaxArgs, MaxArgsBytes)
	}
	n = 0
	for k, v := range s.Config {
		n += len(k) + len(v)
	}
	if len(s.Config) > MaxConfig || n > MaxConfigBytes {
		return rpcerr.Errorf(rpcerr.ErrInvalidArgument, "submit job: %d config entries of %d bytes: at most %d entries and %d bytes", len(s.Config), n, MaxConfig, MaxConfigBytes)
	}
	if len(s.Name) > MaxNameBytes {
		return rpcerr.Errorf(rpcerr.ErrInvalidArgument, "submit job: name of %d bytes: at most %d", len(s.Name), MaxNameBytes)
	}
	return nil
}
