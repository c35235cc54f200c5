// Package auth holds the credentials of a session cluster: the tenants file
// (tenant names, the SHA-256 hashes of their bearer tokens, their quotas),
// token generation, and the cluster secret TaskManagers join with, from
// which the RPC and data-port proofs are derived. It stores no token, only
// hashes, and compares them in constant time. It must not import kitex_gen.
package auth
