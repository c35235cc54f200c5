// Package rpcwire converts the control-plane vocabulary (internal/control
// and the checkpoint messages of internal/checkpoint) to and from its Thrift
// form, once, for both RPC adapters: jm/rpc sends deployments and triggers
// and serves task reports, tm/rpc does the reverse, and both use the same
// pair of functions for each message.
//
// Like the adapters, it may import idl/kitex_gen; nothing but the RPC
// adapters (jm/rpc, tm/rpc) may import it. It must not import jm, tm or
// Kitex itself: it converts values, it makes no calls. The mapping of
// errors to the wire lives with the rest of the Kitex plumbing, in
// internal/rpcserver.
package rpcwire
