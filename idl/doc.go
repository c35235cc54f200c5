// Package idl holds the Thrift IDL of every Sluice RPC service and, under
// kitex_gen, the code Kitex generates from it (committed; regenerate with
// idl/gen.sh, which runs the generator version pinned in go.mod).
package idl
