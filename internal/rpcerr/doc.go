// Package rpcerr is the one table of the project's error kinds: a code per
// kind, a sentinel per code (and a few more specific ones that carry a
// reason), and Classify, which finds the code and reason of any error. The
// RPC edge (internal/rpcserver) sends an error as its code, reason and
// message and rebuilds it from them, so a client gets the same error the
// server had: the same message, and errors.Is answers the same way on both
// sides.
//
// Domain code returns the sentinels below (wrapped with context, or built
// with Errorf to set the exact message); RPC adapters call rpcserver.ToWire
// on the way out and rpcserver.FromCall on the way in.
//
//	// server side, in a domain package
//	return rpcerr.Errorf(rpcerr.ErrNotFound, "job %q not found", id)
//	// RPC handler
//	return nil, rpcserver.ToWire(err)
//	// client adapter
//	if err != nil { return rpcserver.FromCall(err) }
//	// caller, on either side
//	if errors.Is(err, rpcerr.ErrNotFound) { ... }
//
// It imports only the standard library and internal/jobgraph (whose
// ErrInvalidGraph is in the table), so domain packages can use it without
// depending on Kitex; it must not import idl/kitex_gen or Kitex.
package rpcerr
